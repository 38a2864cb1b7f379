"""Theory predictions from transition classes: every (class, group) pair named in SPEC section 7,
and the built-in layers' declared classes giving the predictions the papers state for them."""
import numpy as np
import pytest

from ssm_bench import registry
from ssm_bench import tables
from ssm_bench import theory

GROUPS = ["C2", "C6", "C24", "C60", "C2xC4", "C2xC30", "S3", "A4", "S4", "A5", "D4", "Q8"]
EXPECTED = {
    # class: minimal depth per group, None = never at finite precision
    "time_invariant": [None] * 12,
    "nonnegative_diagonal": [None] * 12,
    "signed_diagonal": [1, None, None, None, 2, None, None, None, None, None, 2, 2],
    "unit_modulus_diagonal": [1, 1, 1, 1, 1, 1, 2, 2, 3, None, 2, 2],
    # the paper's theorems hold at any modulus (its proofs remove the other coordinates first)
    "complex_diagonal": [1, 1, 1, 1, 1, 1, 2, 2, 3, None, 2, 2],
    "nonlinear_or_dense": [1] * 12,
}
# What the papers say of each built-in layer (SPEC 7): its class decides its predictions.
BUILTIN_CLASSES = {"mamba": "nonnegative_diagonal", "s4d": "time_invariant",
                   "negmamba": "signed_diagonal", "aussm": "unit_modulus_diagonal",
                   "simple_aussm": "unit_modulus_diagonal", "rnn": "nonlinear_or_dense",
                   "ids4": "nonlinear_or_dense", "lstm": "nonlinear_or_dense",
                   "gru": "nonlinear_or_dense", "deltanet": "householder:1",
                   "deltaproduct": "householder:2", "transformer": "tc0"}


@pytest.mark.parametrize("cls", list(EXPECTED))
@pytest.mark.parametrize("index,group", list(enumerate(GROUPS)))
def test_min_depth(cls, index, group):
  want = EXPECTED[cls][index]
  got = theory.min_depth(cls, group)
  assert got == want, f"{cls} on {group}: predicted minimal depth {got}, theory says {want}"
  for depth in (1, 2, 3):
    assert theory.expressible([cls] * depth, group) == (want is not None and depth >= want)


def test_every_class_with_a_subgroup_series_is_tabled_here():
  assert set(EXPECTED) == {n for n, c in theory.CLASSES.items()
                           if c.step and c.source == "ssm_bench.theory_builtin"}


def _exponent_step(g, h, m):
  return g.power_commutator_subgroup(h, m or 2)


def _register_exponent_class(monkeypatch, **rules):
  """A class of the researcher's own into a copy of the classes, undone after the test."""
  monkeypatch.setattr(theory, "CLASSES", dict(theory.CLASSES))
  return theory.register_class("exponent", "m-th roots of unity", "a conjecture",
                               **({"step": _exponent_step, "parameter": "m"} | rules))


def test_a_registered_class_predicts_and_declares_like_a_built_in(monkeypatch):
  """register_class: its step (with the parameter after the colon) drives min_depth,
  expressible and the tables' prediction; a layer declares it; the same rules again are a
  no-op."""
  c = _register_exponent_class(monkeypatch)
  assert c.source == __name__
  assert theory.min_depth("exponent:4", "C4") == 1 and theory.min_depth("exponent:2", "C4") == 2
  assert theory.min_depth("exponent:4", "C3") is None, "C3 has exponent 3: never with 4th roots"
  assert theory.min_depth("exponent:6", "S4") == 3
  assert theory.expressible(["exponent:4", "unit_modulus_diagonal"], "C12") is True
  assert theory.prediction(["exponent:4"] * 2, "D4") == {
      "expressible": True, "min_depth": 2, "theorem": True}
  assert _register_exponent_class(monkeypatch) is not None  # again: a no-op
  registry.names()
  monkeypatch.setattr(registry, "_LAYERS", dict(registry._LAYERS))
  registry.register_layer("ticker", lambda cfg, **kw: None, theory_class="exponent:4")
  assert registry.theory_class_of("ticker") == "exponent:4"
  assert tables.stack_prediction("ticker", 1, "C3")["expressible"] is False


@pytest.mark.parametrize("name,rules,problem", [
    ("Bad-Name", {}, "must be lower-case letters"),
    ("unit_modulus_diagonal", {}, "already registered by ssm_bench.theory_builtin with other rules"),
    ("fresh", {"step": 3}, "step must be callable"),
    ("fresh", {"step": _exponent_step, "predict": lambda g, d, p, w: None}, "not both"),
    ("fresh", {"theorem": ""}, "theorem must be a non-empty string"),
    ("fresh", {"includes": ["signed_diagonal"]}, "includes must be a dict"),
    ("fresh", {"includes": {"signed": "why"}}, "includes 'signed', which is no other class "
     r"registered before it \(a plugin's own: register it first\); choose from time_invariant, "),
    ("fresh", {"includes": {"fresh": "itself"}}, "which is no other class registered before"),
    ("fresh", {"includes": {"signed_diagonal": " "}}, "without a reason"),
])
def test_a_bad_class_registration_is_one_line_and_registers_nothing(monkeypatch, name, rules,
                                                                     problem):
  monkeypatch.setattr(theory, "CLASSES", dict(theory.CLASSES))
  before = dict(theory.CLASSES)
  args = {"description": "d", "theorem": "t", **rules}
  with pytest.raises(theory.TheoryError, match=problem):
    theory.register_class(name, args.pop("description"), args.pop("theorem"), **args)
  assert theory.CLASSES == before, "a refused class was registered"


@pytest.mark.parametrize("step", [lambda g, h, m: np.array([1]),  # no identity
                                  lambda g, h, m: np.array([0, 1]),  # C4: {1, a} is no subgroup
                                  # a subgroup, but not of h: from {1, a^2} back to all of C4
                                  lambda g, h, m: np.array([0, 2]) if h.size == 4 else
                                  np.arange(4)])
def test_a_step_that_returns_no_subgroup_is_an_error_not_a_wrong_prediction(monkeypatch, step):
  _register_exponent_class(monkeypatch, step=step)
  with pytest.raises(theory.TheoryError, match="not a subgroup"):
    theory.min_depth("exponent", "C4")
  with pytest.raises(theory.TheoryError, match="not a subgroup"):
    theory.expressible(["exponent"] * 2, "C4")
  # as reports print it (launch.info, the profiles): an error, not "no theorem"
  with pytest.raises(theory.TheoryError, match="not a subgroup"):
    theory.min_depth_text("exponent", "C4")
  with pytest.raises(theory.TheoryError, match="not a subgroup"):  # as tables read it
    theory.prediction(["exponent"], "C4")


def test_inclusion_follows_registered_chains_with_their_reasons_from_the_included_class_up(
    monkeypatch):
  """complex includes signed directly and the non-negative class through it (the reasons in
  the order they apply); nothing includes itself, and inclusion is not read backwards. A
  plugin's class includes through the built-ins' declarations, and a parameter is not read."""
  assert theory.inclusion("complex_diagonal", "nonnegative_diagonal") == (
      "eigenvalues in [0, 1] are in [-1, 1]; real eigenvalues in [-1, 1] are complex ones of "
      "modulus at most 1")
  assert theory.inclusion("signed_diagonal", "nonnegative_diagonal") == (
      "eigenvalues in [0, 1] are in [-1, 1]")
  assert theory.inclusion("nonnegative_diagonal", "signed_diagonal") is None
  assert theory.inclusion("signed_diagonal", "signed_diagonal") is None
  assert theory.inclusion("unit_modulus_diagonal", "nonnegative_diagonal") is None
  _register_exponent_class(monkeypatch, includes={"complex_diagonal": "a wider set"})
  assert theory.included("exponent:4") == {
      "complex_diagonal": "a wider set",
      "signed_diagonal": "real eigenvalues in [-1, 1] are complex ones of modulus at most 1; "
                         "a wider set",
      "unit_modulus_diagonal": "the unit circle is one modulus; a wider set",
      "nonnegative_diagonal": "eigenvalues in [0, 1] are in [-1, 1]; real eigenvalues in "
                              "[-1, 1] are complex ones of modulus at most 1; a wider set"}
  with pytest.raises(theory.TheoryError, match="already registered by"):  # other inclusions
    _register_exponent_class(monkeypatch, includes={"signed_diagonal": "a wider set"})


@pytest.mark.parametrize("group", ["C2", "C3", "C2xC2", "C4", "C6", "D4", "Q8", "S3", "A4",
                                   "S4", "A5", "C2xC4", "C24", "C2xC30"])
def test_a_class_tracks_every_group_at_most_as_deep_as_a_class_it_includes(group):
  """A stack of the including class can be a stack of the included one, so a theorem that gave
  the wider class a deeper minimal depth (or never) would contradict a declared inclusion."""
  depth = lambda cls: theory.min_depth(cls, group)
  pairs = [(a, b) for a in theory.CLASSES for b in theory.included(a)
           if theory.has_theorem(a) and theory.has_theorem(b)]
  assert len(pairs) >= 4, pairs
  for wide, narrow in pairs:
    if depth(narrow) is not None:
      assert depth(wide) is not None and depth(wide) <= depth(narrow), (
          f"{wide} includes {narrow}, which tracks {group} at depth {depth(narrow)}, but "
          f"{wide}'s theorem gives {depth(wide)}")


@pytest.mark.parametrize("group,by_depth,text", [
    ("C3", [True, True, True], "≤ 1"), ("S3", [None, True, True], "≤ 2"),
    ("S4", [None, None, True], "≤ 3"), ("A5", [None, None, None], "no theorem")])
def test_a_class_without_a_theorem_tracks_what_a_class_it_includes_does_and_rules_nothing_out(
    monkeypatch, group, by_depth, text):
  """A class with no theorem of its own that includes complex_diagonal: a stack of it tracks a
  group where that many complex layers do, with '≤ k' as its depth; elsewhere no theorem, never
  a 'no' (it may do more than what it includes)."""
  monkeypatch.setattr(theory, "CLASSES", dict(theory.CLASSES))
  theory.register_class("wider", "d", "no theorem of its own",
                        includes={"complex_diagonal": "among its transitions"})
  assert [theory.expressible(["wider"] * d, group) for d in (1, 2, 3)] == by_depth
  assert theory.min_depth_text("wider", group) == text
  assert not theory.has_theorem("wider")
  with pytest.raises(ValueError, match="has no theorem"):
    theory.min_depth("wider", group)


def test_each_layer_of_a_mixed_stack_is_read_as_any_class_it_includes(monkeypatch):
  """D4 is two signed layers deep (its elementary-2 series), and one complex layer tracks no
  non-Abelian group: a class including both tracks D4 under a signed layer (read as signed)
  and, two deep, alone; a class that includes only a class without a series gets nothing, and
  its layer in a stack leaves the series where it was."""
  monkeypatch.setattr(theory, "CLASSES", dict(theory.CLASSES))
  theory.register_class("both", "d", "t", includes={"signed_diagonal": "x",
                                                    "unit_modulus_diagonal": "y"})
  theory.register_class("narrow", "d", "t", includes={"householder_nonnegative": "z"})
  assert theory.expressible(["both", "signed_diagonal"], "D4") is True
  assert theory.expressible(["unit_modulus_diagonal", "both"], "D4") is True
  assert theory.expressible(["both"], "D4") is None
  assert theory.expressible(["both", "time_invariant"], "D4") is None
  assert theory.depth_bound("both", "D4") == 2 and theory.depth_bound("both", "C3") == 1
  assert theory.depth_bound("signed_diagonal", "D4") is None, "a class with its own theorem"
  assert theory.expressible(["narrow"] * 3, "C2") is None
  assert theory.expressible(["narrow", "both"], "C2") is True, "a layer with no reading skipped"
  assert theory.min_depth_text("narrow", "C2") == "no theorem"
  assert theory.expressible(["unknown"] * 3, "C2") is None


def test_other_rules_under_a_taken_name_are_refused(monkeypatch):
  _register_exponent_class(monkeypatch)
  with pytest.raises(theory.TheoryError, match="already registered by"):
    theory.register_class("exponent", "m-th roots of unity", "a conjecture",
                          step=lambda g, h, m: h)
  with pytest.raises(theory.TheoryError, match="already registered by"):  # without its 'm'
    theory.register_class("exponent", "m-th roots of unity", "a conjecture",
                          step=_exponent_step)


def test_another_lambda_of_the_same_module_is_other_rules(monkeypatch):
  """Rules are compared by module, name and line: two lambdas of one module share a module and
  the name '<lambda>', and only their lines tell a changed rule from the same one again."""
  monkeypatch.setattr(theory, "CLASSES", dict(theory.CLASSES))
  theory.register_class("lam", "d", "t", step=lambda g, h, m: h)
  with pytest.raises(theory.TheoryError, match="already registered by"):
    theory.register_class("lam", "d", "t", step=lambda g, h, m: h[:1])


@pytest.mark.parametrize("cls,group,want", [
    ("householder:1", "C2", "1"),  # DeltaNet with beta = 2: a reflection per odd bit (parity)
    # a rotation is two reflections; two layers: the first counts rotations mod 2, the second
    # reflects in a frame that flips with the count (cyclic and dihedral groups, Siems et al.)
    ("householder:1", "C3", "2"),
    ("householder:1", "C60", "2"),
    ("householder:1", "D4", "2"),
    ("householder:1", "C2xC2", "2"),  # the dihedral group of order 4
    ("householder:1", "Q8", "no theorem"),  # no faithful representation in the plane
    ("householder:1", "C2xC4", "no theorem"),
    ("householder:1", "A4", "no theorem"),
    ("householder", "C2", "1"),  # no parameter: one reflection per token
    ("householder", "S3", "2"),
    ("householder:2", "S3", "1"),  # S3 on 3 points: at most 2 transpositions per element
    ("householder:2", "A4", "1"),  # the tetrahedron's rotations: two reflections each
    ("householder:2", "A5", "1"),  # the icosahedron's
    ("householder:2", "C2xC4", "no theorem"),  # a sign and a quarter turn at once: 3
    ("householder:3", "C2xC4", "1"),
    ("householder:3", "Q8", "no theorem"),  # -1 acts as -I on Q8's only faithful irreducible
    ("householder:4", "Q8", "1"),
    ("householder_nonnegative", "C2", "no theorem"),
    ("tc0", "A5", "never"),  # unless TC0 = NC1
    ("tc0", "S3", "no theorem"),
    ("unknown", "C2", "no theorem"),
])
def test_classes_without_a_series_claim_only_what_their_papers_prove(cls, group, want):
  assert theory.min_depth_text(cls, group) == want
  if want == "no theorem":
    assert theory.expressible([cls], group) is None, f"{cls} on {group}: claims a theorem"


@pytest.mark.parametrize("cls,group,narrow,wide", [
    ("householder:2", "A5", 2, 3),  # the icosahedron's rotations need 3 dimensions
    ("householder:2", "S4", 2, 3),
    ("householder:2", "C3", 1, 2),  # a turn needs a plane
    ("householder:2", "C2xC2", 1, 2),  # two independent signs
    ("householder:4", "Q8", 3, 4),
])
def test_householder_claims_need_keys_as_wide_as_the_representation(cls, group, narrow, wide):
  """The keys (d_state wide) must hold the faithful representation: one dimension short is 'no
  theorem' at every depth, and None (a caller that does not say) assumes keys wide enough."""
  assert theory.min_depth_text(cls, group, narrow) == "no theorem", (
      f"{cls} claims {group} with keys of width {narrow}")
  assert all(theory.expressible([cls] * d, group, narrow) is None for d in (1, 2, 3))
  assert theory.prediction([cls], group, narrow)["expressible"] is None
  for width in (wide, None):
    assert theory.min_depth_text(cls, group, width) == "1", f"{cls} on {group} at {width}"
    assert theory.expressible([cls], group, width) is True


def test_bad_class_names_fail_naming_the_choices(monkeypatch):
  with pytest.raises(ValueError, match="choose one of time_invariant"):
    theory.parse("householder:x")
  # a parameter only where the class names one, and each class that does is named
  with pytest.raises(ValueError, match=r"unit_modulus_diagonal takes no parameter \(householder "
                     r"takes :<n_h>, e.g. householder:2"):  # (a plugin's may follow)
    theory.parse("unit_modulus_diagonal:3")
  assert theory.parse("householder:3")[1] == 3 and theory.parse("householder")[1] is None
  _register_exponent_class(monkeypatch)
  with pytest.raises(ValueError, match="exponent takes :<m>, e.g. exponent:2"):
    theory.parse("signed_diagonal:2")
  with pytest.raises(theory.TheoryError, match="parameter must name the integer"):
    theory.register_class("oddparam", "d", "t", step=_exponent_step, parameter="the m")
  with pytest.raises(registry.LayerError, match="unknown theory class"):
    registry.register_layer("odd", lambda cfg, **kw: None, theory_class="diagonalish")


@pytest.mark.parametrize("name,cls", list(BUILTIN_CLASSES.items()))
def test_builtin_layers_declare_the_class_the_papers_give_them(name, cls):
  assert registry.theory_class_of(name) == cls, f"{name} declares the wrong transition class"


@pytest.mark.parametrize("kwargs,cls", [('{"beta_max": 1.0}', "householder_nonnegative"),
                                        ('{"key_norm": false}', "unknown"),
                                        ('{"beta_max": -1.0}', "unknown"),  # eigenvalues > 1
                                        # reflections need beta = 2, and 1.5 reaches only -0.5
                                        ('{"beta_max": 1.5}', "unknown"),
                                        ('{"n_h": 3}', "householder:3")])
def test_delta_rule_class_follows_its_kwargs(kwargs, cls):
  assert registry.theory_class_of("deltaproduct", kwargs) == cls


def test_delta_rule_class_refuses_fewer_than_one_factor():
  with pytest.raises(registry.LayerError, match="n_h must be at least 1, got 0"):
    registry.check_classes(("deltaproduct",), '{"n_h": 0}')


@pytest.mark.parametrize("below,group,want", [
    (["signed_diagonal"], "D4", True),  # negmamba counts the rotation tokens mod 2
    (["signed_diagonal"], "S3", True),
    (["signed_diagonal"], "C3", True),
    (["unit_modulus_diagonal"], "C6", True),  # a rotation by pi counts them too
    (["nonnegative_diagonal", "signed_diagonal"], "S3", True),  # any stack below that does
    (["nonnegative_diagonal"], "D4", None),  # Mamba cannot count mod 2
    (["time_invariant"], "S3", None),
    (["signed_diagonal"], "Q8", None),  # no faithful representation in the plane
    (["signed_diagonal"], "A4", None),
])
def test_one_reflection_per_token_above_a_stack_that_tracks_c2_tracks_the_plane_groups(
    below, group, want):
  """The householder class's `above` rule (analytic_dihedral.signed_plane builds it with one
  negmamba layer below, exact at 10^6): of DeltaNet's two layers on the plane's groups the first
  only counts the rotation tokens mod 2, which any stack that tracks C2 does in its place.
  Only on top: the same layers the other way round claim nothing, and keys one dimension wide
  hold no plane."""
  assert theory.expressible(below + ["householder:1"], group) is want, (below, group)
  if want:  # upside down, the stack tracks what the layers below track alone
    alone = True if theory.expressible(below, group) else None
    assert theory.expressible(["householder:1"] + below, group) is alone, "read bottom up"
    assert theory.expressible(below + ["householder:1"], group, 1) is alone, "keys too narrow"


def test_hybrids_of_mamba_and_s4d_never_track():
  for group in ("C2", "S3"):
    assert not theory.expressible(registry.theory_classes("s4d,mamba", 2), group)


def test_mixed_stack_uses_each_layers_power():
  cls = lambda m: registry.theory_classes(m, 2)
  assert theory.expressible(cls("negmamba,aussm"), "S3") is True  # sign, then the C3 rotation
  assert theory.expressible(cls("mamba,negmamba"), "C2") is True
  assert theory.expressible(cls("aussm,negmamba"), "S3") is False  # S3' = C3 is not a 2-group


def test_a_mixed_stack_tracks_what_any_of_its_sub_stacks_tracks(monkeypatch):
  """expressible: a layer whose output projection is zero leaves the residual stream as it was,
  so a stack mixing a class without a subgroup series (householder's predict rule, or no
  theorem) with others tracks a group when its series layers, the others skipped, or its
  householder layers alone do. It has no theorem (None) otherwise, never a "no": only stacks
  of series classes alone are ruled out. `launch.info --model=deltaproduct,negmamba` had
  printed "?" for C2, which each layer tracks alone."""
  assert theory.expressible(["householder:2", "signed_diagonal"], "S3") is True
  assert theory.expressible(["signed_diagonal", "householder:2"], "S3") is True
  assert theory.expressible(["householder:2", "signed_diagonal"], "C2") is True
  assert theory.expressible(["householder:2", "signed_diagonal"], "A5", 2) is None  # too narrow
  assert theory.expressible(["householder:2", "signed_diagonal"], "A5") is True
  assert theory.expressible(["householder:1", "signed_diagonal"], "A5") is None
  assert theory.expressible(["householder:1", "signed_diagonal"], "C2xC2") is True  # the signs
  assert theory.expressible(["householder:2", "signed_diagonal"], "C1") is True
  assert theory.expressible(["unit_modulus_diagonal", "unknown"], "C3") is True
  assert theory.expressible(["unknown", "unit_modulus_diagonal"], "C3") is True
  assert theory.expressible(["unknown", "signed_diagonal"], "C3") is None
  assert theory.expressible(["tc0", "signed_diagonal"], "A5") is None  # no theorem mixes them
  # series classes alone still say no
  assert theory.expressible(["signed_diagonal", "nonnegative_diagonal"], "C3") is False
  # a predict rule reads its own layers' count: two of a class that tracks C3 from depth 2 on,
  # with another layer between them, are a stack of two
  _register_exponent_class(monkeypatch, step=None, predict=lambda g, d, p, w: d >= 2)
  assert theory.expressible(["exponent", "signed_diagonal", "exponent"], "C3") is True
  assert theory.expressible(["exponent", "signed_diagonal"], "C3") is None


def test_never_needs_a_no_at_every_depth(monkeypatch):
  """min_depth of a class that predicts depth by depth: 'never' only when every depth is ruled
  out; a class that rules out depth 1 and says nothing of deeper stacks has no theorem there."""
  _register_exponent_class(monkeypatch, step=None, predict=lambda g, d, p, w: False if d == 1
                           else None)
  assert theory.min_depth_text("exponent", "C3") == "no theorem"
  theory.register_class("refuser", "never anything", "a conjecture",
                        predict=lambda g, d, p, w: False)
  assert theory.min_depth_text("refuser", "C3") == "never"


def test_trivial_group_needs_no_layer_whatever_the_class():
  """Every class with a theorem, a series or a predict rule (householder, tc0), says 0 for C1:
  `launch.info --group=C1` had listed deltanet and deltaproduct at 1 beside every other layer's
  0, since a predict rule is asked from depth 1 up."""
  for cls in ("nonnegative_diagonal", "householder:1", "householder:2", "tc0",
              "unit_modulus_diagonal"):
    assert theory.min_depth(cls, "C1") == 0, (cls, theory.min_depth(cls, "C1"))
  assert theory.min_depth_text("unknown", "C1") == "no theorem"


def test_a_class_without_a_theorem_for_the_group_predicts_no_depth():
  """prediction: tc0 rules out no depth for a solvable group (its predict says None), so there
  is no theorem there, not a 'never'; a hybrid stack has no one class's minimal depth."""
  assert theory.prediction(["tc0"], "S3") == {
      "expressible": None, "min_depth": None, "theorem": False}
  assert theory.prediction(["tc0"], "A5") == {
      "expressible": False, "min_depth": None, "theorem": True}
  assert theory.prediction(["signed_diagonal", "unit_modulus_diagonal"], "C2") == {
      "expressible": True, "min_depth": None, "theorem": True}


def test_unknown_class_is_no_theorem_not_an_error():
  assert theory.expressible(["unknown"], "C2") is None
  assert theory.prediction(["unknown", "unknown"], "S3") == {
      "expressible": None, "min_depth": None, "theorem": False}
  assert registry.theory_classes("not_registered", 2) == ["unknown", "unknown"]


_KEY = np.array([0.6, 0.8])
_REFLECTION = np.eye(2) - 2 * np.outer(_KEY, _KEY)  # beta = 2: spectral norm exactly 1


# each outside set just past the default tolerance (1e-4): a check loosened to let in a little
# more than its class fails here
@pytest.mark.parametrize("cls,inside,outside", [
    ("nonnegative_diagonal", [0.0, 0.5, 1.0], [0.5, -1e-3]),
    ("signed_diagonal", [-1.0, 0.0, 0.9], [0.0, 1.001]),
    ("signed_diagonal", [-1.0 + 0j, 0.5 + 1e-5j], [0.0, 0.5 + 1e-3j]),  # a real class is real
    ("unit_modulus_diagonal", np.exp(1j * np.array([0.1, 2.0])), [1.0, 1.001]),
    # any modulus, decaying or growing, any phase; no value that is not a number
    ("complex_diagonal", [0.0, 0.5 * np.exp(2j), 1.5, -1.0], [0.5, np.nan]),
    ("complex_diagonal", [1.0], [np.inf * 1j]),
    ("time_invariant", np.ones((2, 3, 4)), np.arange(24.0).reshape(2, 3, 4)),
    ("householder:1", _REFLECTION[None], 1.001 * _REFLECTION[None]),
    ("householder:2", (_REFLECTION @ np.diag([1.0, -1.0]))[None], 1.001 * np.eye(2)[None]),
])
def test_class_membership_check(cls, inside, outside):
  assert theory.check(cls, np.asarray(inside))["ok"] is True, f"{cls} rejects its own set"
  out = theory.check(cls, np.asarray(outside))
  assert out["checked"] and out["ok"] is False, f"{cls} accepts transitions outside its set"


def test_a_plugins_class_checks_its_own_set_the_clocks_m_th_roots():
  """examples/clock.py's roots_of_unity:m holds the m points, not the rest of the circle (a
  simple_aussm layer declaring it must fail its declaration check)."""
  from ssm_bench import plugins
  plugins.load("examples.clock")
  roots = lambda m: np.exp(2j * np.pi * np.arange(m) / m)
  assert theory.check("roots_of_unity:4", roots(4))["ok"] is True, "4th roots rejected"
  assert theory.check("roots_of_unity:6", roots(3))["ok"] is True, "cube roots not 6th roots"
  for outside in (np.exp([0.3j]), roots(6), [1.001], np.exp([1e-3j])):
    out = theory.check("roots_of_unity:4", np.asarray(outside))
    assert out["checked"] and out["ok"] is False, f"roots_of_unity:4 accepts {outside}: {out}"


@pytest.mark.parametrize("cls", ["nonlinear_or_dense", "tc0", "unknown"])
def test_a_class_with_no_set_checks_nothing(cls):
  """A class that names no set of transitions checks none: the profile counts only checked
  runs, so a run must not read as checked (and passing) where nothing was compared."""
  assert theory.check(cls, np.full((2, 3, 4), 7.0)) == {
      "checked": False, "ok": None, "detail": f"nothing to check for class {cls}"}


def _register_keyed_layer(monkeypatch):
  """A householder:2 plugin layer whose keys are `keys` wide, whatever d_state is."""
  registry.names()  # the built-ins first: the copy below holds them, and the test's layer goes
  monkeypatch.setattr(registry, "_LAYERS", dict(registry._LAYERS))  # with the copy
  registry.register_layer("keyed", lambda cfg, **kw: None, theory_class="householder:2",
                          kwargs={"keys": 2}, state_width=lambda config, kw: kw["keys"])


def test_predictions_read_a_layers_state_width_not_d_state(monkeypatch):
  """A4 needs keys of 3 dimensions: at d_state 8 the plugin's 2-wide keys get no theorem and its
  3-wide keys the claim; a built-in's width is its run's d_state."""
  _register_keyed_layer(monkeypatch)
  run = lambda model, kwargs: {"config": {"model": model, "d_state": 8, "d_model": 32,
                                          "layer_kwargs": kwargs}}
  for kwargs, width, verdict in (('{"keys":2}', 2, None), ('{"keys":3}', 3, True), ("", 2, None)):
    cell = [run("keyed", kwargs)]
    assert tables.cell_width(cell) == width, f"keys {kwargs or 'default'}: width should be {width}"
    got = tables.stack_prediction("keyed", 1, "A4", kwargs, tables.cell_width(cell))
    assert got["expressible"] is verdict, f"keys {kwargs or 'default'} on A4: {got}"
  assert tables.cell_width([run("deltanet", "")]) == 8, "a built-in's width is its d_state"
  assert tables.cell_width([run("keyed,mamba", "")]) == 8, "a hybrid's width is its d_state"


@pytest.mark.parametrize("state_width,problem", [
    (3, "must be a function"), (lambda config, kw: kw["nope"], "failed on the default config"),
    (lambda config, kw: 0, "positive int"), (lambda config, kw: 2.5, "positive int"),
    # Python's True is an int, 1: a flag returned by mistake must not read as a width
    (lambda config, kw: True, "positive int, got True")])
def test_a_bad_state_width_is_refused_at_registration(monkeypatch, state_width, problem):
  registry.names()
  monkeypatch.setattr(registry, "_LAYERS", dict(registry._LAYERS))
  with pytest.raises(registry.LayerError, match=problem):
    registry.register_layer("keyed", lambda cfg, **kw: None, theory_class="householder:2",
                            state_width=state_width)
  assert registry.find("keyed") is None, "a refused layer must not be registered"


def test_two_layers_of_one_reflection_track_the_plane_groups_only_with_keys_of_two_dimensions():
  """DeltaNet's two-layer claim (cyclic and dihedral groups) reflects in a plane: keys of one
  dimension give no theorem at any depth, and one layer none at any width."""
  for group in ("C3", "D4", "S3", "C2xC2"):
    assert theory.min_depth_text("householder:1", group, 2) == "2", group
    assert theory.expressible(["householder:1"], group, 2) is None, group
    assert all(theory.expressible(["householder:1"] * d, group, 1) is None for d in (1, 2, 3)), (
        f"DeltaNet claims {group} with keys of one dimension")
