"""The causality check: every built-in layer passes it, a layer that reads ahead fails it, at
initialisation (refused before a run starts) and with trained weights (left out of the tables)."""
import numpy as np
import pytest

from ssm_bench import causality
from ssm_bench import plugins
from ssm_bench import registry
from ssm_bench import runs
from ssm_bench import tables
from ssm_bench.config import PRESETS, ModelConfig, TrainConfig


def small(*layers, **kw):
  return ModelConfig(layers=layers, vocab_size=5, num_classes=5, d_model=8, d_state=2, **kw)


@pytest.mark.parametrize("model", registry.names())
def test_every_builtin_layer_is_causal(model):
  """With Mamba's conv on (the length-bucket test turns it off), at every cut of the check."""
  out = causality.check_at_init(small(model))
  assert out["ok"] is True, f"{model}: {out['detail']}"


def test_a_hybrid_stack_of_builtins_is_causal():
  out = causality.check_at_init(small("s4d", "transformer", "mamba"))
  assert out["ok"] is True, out["detail"]


def test_cuts_spread_over_the_sequence_and_the_check_changes_only_what_follows_them():
  assert causality.cuts(4, 16).tolist() == [1, 6, 10, 15]
  assert causality.cuts(1, 16).tolist() == [8]
  tokens = np.arange(32).reshape(4, 8) % 3
  changed, c = causality.perturbed(tokens, 3)
  for row, cut in enumerate(c):
    assert (changed[row, :cut] == tokens[row, :cut]).all(), f"row {row} changed before {cut}"
    assert (changed[row, cut:] != tokens[row, cut:]).all(), f"row {row} unchanged after {cut}"


def test_compare_names_the_farthest_look_ahead():
  logits = np.zeros((2, 6, 3))
  moved = logits.copy()
  moved[1, 1, 0] = 0.5  # row 1 (cut 5 of 6 on 2 rows) moved at position 1: 4 ahead
  moved[0, 0, 2] = 1e-7  # rounding, not a dependence
  moved[1, 4, 1] = 0.9  # a larger move, but only 1 ahead: the farthest is what is named
  out = causality.compare(logits, moved, causality.cuts(2, 6))
  assert out["ok"] is False and "position 1 moved by 0.5" in out["detail"], out
  assert "reads at least 4 positions ahead" in out["detail"], out
  assert causality.compare(logits, logits + 1e-7, causality.cuts(2, 6))["ok"] is True
  # a small leak is a leak: 1e-3 on logits of size 1 is far above float32 rounding
  small = logits + 1.0
  small_moved = small.copy()
  small_moved[0, 0, 1] += 1e-3
  assert causality.compare(small, small_moved, causality.cuts(2, 6))["ok"] is False


def test_a_one_token_vocabulary_is_not_called_checked():
  """With one token nothing can be changed after a cut, so the check says it checked nothing
  rather than 'causal'."""
  out = causality.check_at_init(ModelConfig(layers=("mamba",), vocab_size=1, num_classes=2,
                                            d_model=8, d_state=2))
  assert out == {"checked": False, "ok": None, "detail": "one token: nothing to change"}, out


def test_a_layer_that_reads_ahead_is_caught_at_initialisation():
  plugins.load("plugin_layers.peek:register")
  out = causality.check_at_init(small("peek"))
  assert out["ok"] is False and "reads at least 1 position ahead" in out["detail"], out
  with pytest.raises(registry.LayerError, match="not causal at initialisation"):
    causality.require(small("s4d", "peek"))
  causality.require(small("sleeper"))  # reads ahead only through a weight that starts at 0


def test_a_builtin_layer_whose_kwargs_read_ahead_is_refused_at_initialisation():
  """Built-ins at their defaults are this file's first test; their kwargs can read ahead (the
  transformer's causal flag), so a stack with kwargs is checked as a plugin's is."""
  with pytest.raises(registry.LayerError, match="not causal at initialisation"):
    causality.require(small("transformer", layer_kwargs='{"causal": false}'))
  causality.require(small("transformer", layer_kwargs='{"position": "rope"}'))


def test_a_sweep_with_a_plugin_that_reads_ahead_is_refused_before_it_starts():
  from launch import common, sweep
  peek = TrainConfig(task="C2", model="peek", plugins="plugin_layers.peek:register")
  with pytest.raises(common.UsageError, match="network peek is not causal"):
    sweep.check_layers([peek.replace(model="s4d", plugins=""), peek])


def test_a_run_whose_trained_weights_read_ahead_is_left_out_of_the_tables_with_its_reason(
    tmp_path):
  plugins.load("plugin_layers.peek:register")
  base = TrainConfig(task="C2", plugins="plugin_layers.peek:register",
                     **{**PRESETS["profile_tiny"], "steps": 10})
  cfgs = [base.replace(model="sleeper"), base.replace(model="s4d", plugins="")]
  summaries = [runs.train_group([c], [str(tmp_path / runs.run_name(c))])[0] for c in cfgs]
  sleeper, s4d = (s["causal"] for s in summaries)
  assert sleeper["ok"] is False and "ahead" in sleeper["detail"], sleeper
  assert s4d["ok"] is True, s4d
  rs = tables.load(str(tmp_path))
  assert [s["config"]["model"] for s in rs.good] == ["s4d"], "a run that reads ahead is in a cell"
  assert [n for n, _ in rs.problems] == [runs.run_name(cfgs[0])], rs.problems
  assert "reads ahead" in rs.problems[0][1] and sleeper["detail"] in rs.problems[0][1]


def test_a_sweep_checks_each_plugin_network_once_whatever_its_tasks(monkeypatch):
  """The check compiles (about 3 s a network on CPU): checked per task, the profile sweep of one
  plugin layer spent 90 s of a 110 s launch on 32 checks. A task sizes only the embedding and
  the head, so one check per network."""
  from launch import sweep
  checked = []
  monkeypatch.setattr(causality, "require", lambda cfg: checked.append(cfg.layers))
  base = TrainConfig(model="rotation", plugins="examples.rotation", d_model=8, d_state=2)
  sweep.check_layers([base.replace(task=t, depth=d, model=",".join(["rotation"] * d))
                      for d in (1, 2) for t in ("C2", "S3", "A4")])
  assert checked == [("rotation",), ("rotation", "rotation")], checked


def test_the_causality_check_compiles_nothing_the_declaration_check_did_not():
  """Every summary runs both checks: the second must reuse the first's program (a jax array and
  a NumPy array of tokens were cached apart, one compile more per run in every summary)."""
  import jax
  from ssm_bench import declaration, models
  model = models.StateTracker(small("s4d"))
  tokens = jax.random.randint(jax.random.PRNGKey(1), (8, 40), 0, 5)[:4, :32]  # as a summary's
  params = jax.jit(model.init)(jax.random.PRNGKey(0), tokens)
  declaration.check(model, params, tokens)
  before = declaration._forward._cache_size()
  causality.check(model, params, tokens)
  assert declaration._forward._cache_size() == before, "the causality check compiled again"
