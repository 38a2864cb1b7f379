"""Theory predictions for every (family, group) pair named in SPEC section 7."""
import pytest

from ssm_bench import theory

GROUPS = ["C2", "C6", "C24", "C60", "C2xC4", "C2xC30", "S3", "A4", "S4", "A5"]
EXPECTED = {
    # family: minimal depth per group, None = never at finite precision
    "mamba": [None] * 10,
    "s4d": [None] * 10,
    "negmamba": [1, None, None, None, 2, None, None, None, None, None],
    "aussm": [1, 1, 1, 1, 1, 1, 2, 2, 3, None],
    "simple_aussm": [1, 1, 1, 1, 1, 1, 2, 2, 3, None],
    "rnn": [1] * 10,
    "ids4": [1] * 10,
}


@pytest.mark.parametrize("family", list(EXPECTED))
@pytest.mark.parametrize("index,group", list(enumerate(GROUPS)))
def test_min_depth(family, index, group):
  want = EXPECTED[family][index]
  got = theory.min_depth(family, group)
  assert got == want, f"{family} on {group}: predicted minimal depth {got}, theory says {want}"
  for depth in (1, 2, 3):
    assert theory.expressible([family] * depth, group) == (want is not None and depth >= want)


def test_hybrids_of_mamba_and_s4d_never_track():
  for group in ("C2", "S3"):
    assert not theory.expressible(["s4d", "mamba"], group)
    assert not theory.prediction("s4d,mamba", 2, group)["expressible"]


def test_mixed_stack_uses_each_layers_power():
  assert theory.expressible(["negmamba", "aussm"], "S3") is True  # sign, then the C3 rotation
  assert theory.expressible(["mamba", "negmamba"], "C2") is True
  assert theory.expressible(["aussm", "negmamba"], "S3") is False  # S3' = C3 is not a 2-group


def test_trivial_group_needs_no_layer():
  assert theory.min_depth("mamba", "C1") == 0


def test_unknown_family():
  with pytest.raises(ValueError, match="no theory"):
    theory.expressible(["transformer"], "C2")
