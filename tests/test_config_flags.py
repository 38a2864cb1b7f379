"""Every TrainConfig field is a flag; sweeps take --preset and --config.<field> overrides."""
import dataclasses
import json
import os
import re

import pytest

from launch import sweeps
from ssm_bench import config
from ssm_bench.paper import TABLE2_DEPTHS, TABLE2_GROUPS, TABLE2_MODELS
import launcher


def test_shape_fields_are_every_field_but_the_traced_ones():
  names = [f.name for f in dataclasses.fields(config.TrainConfig)]
  assert set(config.SHAPE_FIELDS) == set(names) - {"lr", "schedule", "seed"}


def test_overrides_reach_every_config_and_summary(tmp_path):
  out = launcher.run(["launch.sweep", "--sweep=tiny", f"--workdir={tmp_path}",
                      "--config.steps=30", "--config.weight_decay=0.05", "--config.eval_seqs=16",
                      "--config.curriculum_patience=2", "--quiet"], timeout=600)
  assert out.returncode == 0, out.stderr
  names = os.listdir(tmp_path)
  assert len(names) == 4
  for name in names:
    for f in ("config.json", "summary.json"):
      data = json.load(open(tmp_path / name / f))
      cfg = data.get("config", data)
      assert (cfg["steps"], cfg["weight_decay"], cfg["eval_seqs"], cfg["curriculum_patience"]) == (
          30, 0.05, 16, 2), f"{name}/{f}: overrides missing: {cfg}"
    assert json.load(open(tmp_path / name / "summary.json"))["steps"] == 30


def test_table2_lite_covers_all_90_cells():
  cfgs = sweeps.expand("table2_lite", config.PRESETS[sweeps.SWEEPS["table2_lite"].preset])
  cells = {(c.task, c.model, c.depth) for c in cfgs}
  assert cells == {(g, m, d) for g in TABLE2_GROUPS for m in TABLE2_MODELS for d in TABLE2_DEPTHS}
  assert len(cells) == 90 and len(cfgs) == 360
  assert {(c.d_state, c.steps, c.schedule, c.conv_kernel, c.pad_order, c.matmul_precision)
          for c in cfgs} == {(32, 3000, "cosine", 0, 60, "float32")}, "the lite protocol changed"


def test_paper_width_table2_sweeps_name_their_protocol_after_themselves():
  from ssm_bench import tables
  for name in ("table2", "table2_lite"):
    cfgs = sweeps.expand(name, config.PRESETS[sweeps.SWEEPS[name].preset])
    labels = {tables.protocol(dataclasses.asdict(c)) for c in cfgs}
    assert labels == {name}, (f"{name}'s fixed values read as differences from another preset "
                              f"in its tables' protocol name: {labels}")


def test_table2_cpu_covers_all_90_cells_each_in_one_protocol():
  from ssm_bench import tables
  cfgs = sweeps.expand("table2_cpu", config.PRESETS["table2_cpu"])
  cells = {(c.task, c.model, c.depth) for c in cfgs}
  assert cells == {(g, m, d) for g in TABLE2_GROUPS for m in TABLE2_MODELS for d in TABLE2_DEPTHS}
  rnn = [c for c in cfgs if c.model == "rnn"]
  assert {(c.d_model, c.d_state, c.steps) for c in rnn} == {(64, 64, 6000)}, "rnn preset lost"
  labels = {tables.protocol(dataclasses.asdict(c)) for c in cfgs}
  assert labels == {"table2_cpu"}, f"per-model preset values leaked into the protocol: {labels}"


def test_train_takes_the_presets_values_for_its_model():
  from launch import config_flags
  # no command-line holders: the model and a width arrive as an entry point's own values
  values = config_flags.build({}, "table2_cpu", model="simple_aussm", d_model=16)
  assert (values["d_model"], values["d_state"], values["steps"]) == (16, 32, 6000), values
  assert config_flags.build({}, "table2_cpu")["d_state"] == 4, "mamba (the default) got another's"


def test_near_solution_starts_aussm_from_its_construction_beside_a_default_init():
  cfgs = sweeps.expand("near_solution", config.PRESETS["cpu"])
  assert {(c.task, c.model, c.depth, c.norm) for c in cfgs} == {("S3", "aussm", 2, "none")}
  assert sorted({c.init_from_analytic for c in cfgs}) == [-1.0, 0.0, 0.01, 0.03, 0.1, 0.3]
  assert all(c.preset == "near_solution" for c in cfgs)


def test_near_solution_of_another_task_and_model_trains_that_construction_and_its_baseline():
  """--config.task=D4 --config.model=deltanet: every run, the default-init baseline too, is the
  network of D4's two-layer DeltaNet construction (not the S3 AUSSM network with D4's tokens)."""
  from ssm_bench import train
  cfgs = sweeps.expand("near_solution", config.PRESETS["cpu"], {"task": "D4", "model": "deltanet"})
  want = train.analytic_config(cfgs[0].replace(init_from_analytic=0.0))
  arch = lambda c: (c.task, c.model, c.depth, c.d_model, c.d_state, c.norm, c.activation,
                    c.initial_state, c.conv_kernel)
  assert {arch(c) for c in cfgs} == {arch(want)}, {arch(c) for c in cfgs}
  assert (want.model, want.depth, want.initial_state) == ("deltanet", 2, "learned"), arch(want)
  assert sorted({c.init_from_analytic for c in cfgs}) == [-1.0, 0.0, 0.01, 0.03, 0.1, 0.3]
  for c in cfgs:  # each config describes the network the run builds
    train.model_config(c)
  # a model without the task's construction is refused, not swapped for the task's default
  with pytest.raises(config.ConfigError, match="S3 has no mamba construction to start from; "
                                                "choose one of simple_aussm, aussm"):
    sweeps.expand("near_solution", config.PRESETS["cpu"], {"model": "mamba"})


def test_parity_hybrid_evaluates_to_10000_at_the_papers_sizes():
  cfgs = sweeps.expand("parity_hybrid", config.PRESETS["cpu"])
  assert {c.eval_length for c in cfgs} == {10000} and {c.train_length for c in cfgs} == {8}
  assert {(c.model, c.depth, c.d_state) for c in cfgs} == {
      ("rnn", 1, 8), ("s4d", 2, 16), ("mamba", 2, 16), ("s4d,mamba", 2, 16), ("negmamba", 1, 16)}


def test_one_network_has_one_model_name_and_theory_and_a_malformed_list_is_an_error():
  from ssm_bench import registry, runs
  spaced = config.TrainConfig(model=" s4d , mamba", depth=2)
  assert spaced.model == "s4d,mamba", f"spaces kept in the run's model: {spaced.model!r}"
  assert registry.theory_classes(spaced.model, 2) == ["time_invariant", "nonnegative_diagonal"]
  repeated = config.TrainConfig(model="mamba,mamba", depth=2)
  assert runs.run_name(repeated) == runs.run_name(config.TrainConfig(model="mamba", depth=2)), (
      "one network under two run identities")
  for model, depth, words in [("mamba,", 2, "empty name"), ("s4d,,mamba", 3, "empty name"),
                              ("s4d,mamba", 3, "depth is 3")]:
    try:
      config.TrainConfig(model=model, depth=depth)
    except config.ConfigError as e:
      assert words in str(e), f"{model!r} at depth {depth}: {e}"
    else:
      raise AssertionError(f"{model!r} at depth {depth} was accepted")


def test_installed_versions_are_inside_the_pinned_ranges():
  """setup.cfg admits only what CI and the GPU ran; this run must be one of them."""
  import configparser
  import os
  from importlib import metadata
  cfg = configparser.ConfigParser()
  cfg.read(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "setup.cfg"))
  reqs = [r.strip() for r in cfg["options"]["install_requires"].splitlines() if r.strip()]
  ver = lambda v: tuple(int(x) for x in v.split(".")[:3] if x.isdigit())
  for req in reqs:
    name, spec = req.split(">=")[0], req.split(">=")[1]
    low, high = spec.split(",<")
    have = ver(metadata.version(name))
    assert ver(low) <= have < ver(high), f"{name} {metadata.version(name)} outside {req}"
  assert any(r.startswith("jax>=0.10") for r in reqs), "jax's lower bound is below what is tested"


@pytest.mark.parametrize("fields,problem", [
    (dict(dt_min=0.1, dt_max=0.01), "dt_max (0.01) must be >= dt_min (0.1)"),
    (dict(eval_length=40), "eval_length (40) must be >= train_length (60)"),
    (dict(steps=250), "steps (250) must be a multiple of log_every (100)"),
    (dict(checkpoint_every=150), "checkpoint_every (150) must be a multiple of log_every (100)"),
    (dict(eval_seqs=100), "eval_seqs (100) must be a multiple of eval_chunk (64)"),
    (dict(eval_length=10, train_length=8), "eval_length (10) must be >= 20, the first length"),
    (dict(weight_decay=-0.1), "weight_decay must be a finite number >= 0, got -0.1"),
    (dict(curriculum_threshold=float("nan")), "curriculum_threshold must be a finite number"),
    (dict(seed=2 ** 31), "seed must be an integer in [0, 2^31), got 2147483648"),
    (dict(seed=-1), "seed must be an integer in [0, 2^31), got -1"),
    (dict(depth=True), "depth must be int, got True"),
    (dict(lr="0.1"), "lr must be float, got '0.1'"),
    (dict(task=3), "task must be str, got 3"),
])
def test_a_config_that_cannot_train_as_meant_is_refused_naming_the_rule(fields, problem):
  """Caught when the config is built, before any run directory exists (the CLI prints the
  message as its one error line: test_cli_errors)."""
  with pytest.raises(config.ConfigError, match=re.escape(problem)):
    config.TrainConfig(**fields)


# A value just outside each range rule of config._RANGES (the positive integers' 0 from its list).
_JUST_OUTSIDE = {**{name: 0 for name in config._POSITIVE_INTS},
                 "lr": 0.0, "weight_decay": -1e-9, "grad_clip": 0.0, "warmup_steps": -1,
                 "conv_kernel": -1, "dt_min": 0.0, "dt_max": 0.0, "curriculum_threshold": -1e-9,
                 "init_from_analytic": float("nan"), "seed": -1, "pad_order": -1}


def test_every_numeric_field_has_a_range_rule_and_a_value_just_outside_it_below():
  """A number a run cannot use (a 0 interval, a negative size) is refused when the config is
  built, for every int and float field."""
  numeric = {f for f, t in config.field_types().items() if t in (int, float)}
  assert numeric == set(config._RANGES), f"without a range rule: {numeric - set(config._RANGES)}"
  assert set(_JUST_OUTSIDE) == set(config._RANGES), (
      f"fields without a case: {set(config._RANGES) - set(_JUST_OUTSIDE)}")


@pytest.mark.parametrize("field", sorted(_JUST_OUTSIDE))
def test_a_value_just_outside_a_fields_range_is_refused_naming_it(field):
  """Each range rule at its edge (0 where it must be > 0, -1 where >= 0, nan where finite)."""
  what = config._RANGES[field][1]
  with pytest.raises(config.ConfigError, match=re.escape(f"{field} must be {what}")):
    config.TrainConfig(**{field: _JUST_OUTSIDE[field]})


def test_an_integer_given_for_a_float_field_is_taken_as_that_float():
  """`--config.lr=1` or a preset's `weight_decay: 0` is a float field's value, stored as a float
  (so the run's name and config hash are the same as for 1.0)."""
  cfg = config.TrainConfig(lr=1, weight_decay=0)
  assert (cfg.lr, cfg.weight_decay) == (1.0, 0.0) and isinstance(cfg.lr, float), cfg
  assert cfg == config.TrainConfig(lr=1.0, weight_decay=0.0)
