"""The sweep definitions (launch/sweeps.py): the Table 2 grids and their compiled groups, every
sweep's runs, and the smoke's seeds against the success rates measured for them."""
import json
import os

import pytest

from launch import sweep
from launch import sweeps


def test_table2_grid_and_groups():
  groups = sweep.plan("table2", "/tmp/unused")
  assert sum(len(c) for c, _ in groups) == 9 * 5 * 2 * 3 * 3 * 3 * 3 == 7290
  assert len(groups) == 5 * 2 * 3, "one compiled group per (model, depth, d_state)"
  assert all(len(c) == 9 * 27 for c, _ in groups), "groups x lr x schedule x seed train together"
  assert all(len({x.shape_key() for x in c}) == 1 for c, _ in groups)
  runs = [c for cs, _ in groups for c in cs]
  assert sorted({c.lr for c in runs}) == [1e-4, 1e-3, 1e-2], "one lr per decade, 1e-4 to 1e-2"
  assert {c.conv_kernel for c in runs} == {0}, "the protocol trains without the Mamba conv"
  assert {c.matmul_precision for c in runs} == {"float32"}, "the paper trains in true float32"
  lite_groups = sweep.plan("table2_lite", "/tmp/unused")
  assert len(lite_groups) == 10, "table2_lite: one program per (model, depth)"
  lite = [c for cs, _ in lite_groups for c in cs]
  assert {c.matmul_precision for c in lite} == {"float32"}
  assert {(c.steps, c.d_state, c.schedule) for c in lite} == {(3000, 32, "cosine")}, (
      "table2_lite's protocol (BUILD_NOTES, Protocols) changed")
  assert {c.steps for c in runs} == {20000}
  # the rest of SPEC's protocol (section 4) and its evaluation set (section 5)
  assert sorted({c.d_state for c in runs}) == [32, 64, 128]
  assert {c.schedule for c in runs} == {"constant", "cosine", "cosine_restarts"}
  assert {c.seed for c in runs} == {0, 1, 2}
  protocol = {(c.batch_size, c.d_model, c.weight_decay, c.grad_clip, c.curriculum_start,
               c.curriculum_threshold, c.curriculum_patience, c.train_length, c.eval_seqs,
               c.eval_length) for c in runs + lite}
  assert protocol == {(256, 128, 0.01, 1.0, 2, 0.95, 5, 60, 512, 1000)}, protocol


@pytest.mark.parametrize("name", list(sweeps.SWEEPS))
def test_every_sweep_expands_to_valid_unique_runs(name):
  groups = sweep.plan(name, "/tmp/unused")
  dirs = [d for _, ds in groups for d in ds]
  assert dirs and len(dirs) == len(set(dirs)), "two runs share a directory"


def test_the_readmes_smoke_probability_is_what_the_measured_rates_give():
  import re
  readme = open(os.path.join(os.path.dirname(__file__), "..", "README.md")).read()
  stated = float(re.search(r"probability >= (0\.\d+) by the measured success rates", readme)[1])
  assert sweeps.smoke_verdicts_probability() >= stated


def test_the_smoke_rates_are_those_of_the_stored_smoke_p_runs():
  """SMOKE_MEASURED sizes the smoke's seeds: it must be the count of the committed smoke_p runs
  of the smoke's current configs (max_len >= 100 / runs, per model; runs of a config the smoke
  no longer trains, kept as the pilots' record, do not count), not a number that drifted."""
  import collections
  import glob
  from ssm_bench.config import PRESETS
  root = os.path.join(os.path.dirname(__file__), "..", "results")
  current = {(c.model, c.lr, c.d_state) for c in sweeps.expand("smoke_p", PRESETS["cpu"])}
  ok, n = collections.Counter(), collections.Counter()
  for path in glob.glob(os.path.join(root, "runs_smoke_p*", "*", "summary.json")):
    s = json.load(open(path))
    if (s["config"]["model"], s["config"]["lr"], s["config"]["d_state"]) in current:
      n[s["config"]["model"]] += 1
      ok[s["config"]["model"]] += s["max_len"] >= 100
  assert {m: (ok[m], n[m]) for m in n} == sweeps.SMOKE_MEASURED


def test_an_override_of_a_varied_axis_is_reported_as_collapsing_it():
  """--config.model=lstm (a model table2_cpu does not train, as a plugin) trains every model's
  runs as lstm's: `collapsed` names the axis and the grid's values (launch.sweep prints it); an
  axis the grid does not vary, a model the grid trains (it selects its own runs), or no
  override is not reported."""
  from ssm_bench.config import PRESETS
  base = PRESETS["table2_cpu"]
  got = sweeps.collapsed("table2_cpu", base, {"model": "lstm", "matmul_precision": "float32"})
  assert got == {"model": ["aussm", "mamba", "negmamba", "rnn", "simple_aussm"]}, got
  assert sweeps.collapsed("table2_cpu", base, {"model": "rnn"}) == {}
  assert sweeps.collapsed("table2_cpu", base, {}) == {}
  assert sweeps.collapsed("smoke", PRESETS["cpu"], {"task": "C2"}) == {}, "smoke trains C2 only"


def test_a_model_override_takes_its_own_sizes_not_those_of_each_model_it_replaces():
  """The languages sweep gives rnn and lstm 32 units and the others the preset's 4: with
  --config.model=gru every run took the size of the model it replaced (84 gru runs at 4 units
  and 84 at 32, twice the cells). A field the grid sets per model takes the overriding model's
  value there, or the base's when the sweep has no such model."""
  from ssm_bench.config import PRESETS
  base = PRESETS["cpu"]
  plain = sweeps.expand("languages", base)
  assert {c.d_state for c in plain if c.model in ("rnn", "lstm")} == {32}
  for model, units in (("gru", base["d_state"]), ("rnn", 32)):
    cfgs = sweeps.expand("languages", base, {"model": model})
    assert {c.d_state for c in cfgs} == {units}, (model, sorted({c.d_state for c in cfgs}))
    assert len(cfgs) == len(plain) // len(sweeps.LANGUAGE_MODELS), (model, len(cfgs))
  wider = sweeps.expand("languages", base, {"model": "gru", "d_state": 16})
  assert {c.d_state for c in wider} == {16}, "an explicit override must still win"


@pytest.mark.parametrize("sweep", ["table2_cpu", "languages", "table2_baselines"])
def test_a_model_the_sweep_trains_gets_its_own_runs_when_overridden(sweep):
  """--config.model=M where the sweep trains M: exactly M's runs of the full sweep (its rates,
  seeds and sizes), not every model's runs made M's (table2_cpu mamba: 540 runs at the five
  models' rates and seeds instead of its 180)."""
  from ssm_bench.config import PRESETS
  base = PRESETS[sweeps.SWEEPS[sweep].preset]
  full = sweeps.expand(sweep, base)
  for model in sorted({c.model for c in full}):
    want = [c for c in full if c.model == model]
    got = sweeps.expand(sweep, base, {"model": model})
    assert got == want, (f"{sweep} --config.model={model}: {len(got)} runs, want its own "
                         f"{len(want)} (lr x seed {sorted({(c.lr, c.seed) for c in got})[:6]})")


def test_illusion_on_the_cpu_preset_trains_its_cpu_grid_at_fixed_lengths():
  """Paper 002's minimal-depth sweep at CPU scale (results/pilots.md): lengths 2, 4, 8 at depth
  1-3, each trained at its length (no curriculum), the rnn widened to 64 units like table2_cpu."""
  from ssm_bench.config import PRESETS
  cfgs = sweeps.expand("illusion", PRESETS["cpu"])
  assert {(c.train_length, c.depth) for c in cfgs} == {(n, d) for n in (2, 4, 8) for d in (1, 2, 3)}
  assert all(c.curriculum_start == c.train_length for c in cfgs), "a curriculum in the illusion"
  assert {(c.model, c.d_state) for c in cfgs} == {
      ("mamba", 16), ("s4d", 16), ("ids4", 16), ("rnn", 64)}, "the cpu sizes changed"


def test_illusion_on_the_paper_preset_trains_paper_002s_grid():
  """Paper 002, Fig. 3: A5, A4xC5 and C60 at lengths 2, 4, .., 20 and depth 1 to 4, each trained
  at its length and evaluated to at least 20."""
  from ssm_bench.config import PRESETS
  cfgs = sweeps.expand("illusion", PRESETS["paper"])
  assert {(c.train_length, c.depth) for c in cfgs} == {
      (n, d) for n in range(2, 21, 2) for d in (1, 2, 3, 4)}, "not lengths 2..20 x depth 1..4"
  assert {c.task for c in cfgs} == {"A5", "A4xC5", "C60"}
  assert all(c.eval_length == max(c.train_length, 20) for c in cfgs)
  assert len(cfgs) == 3 * 4 * 4 * 10


def test_near_solution_trains_each_noise_scale_and_the_default_initialisation():
  """Paper 000, Sec. 6: the construction plus noise at each scale, beside the same network from
  a default initialisation (init_from_analytic -1), 3 seeds each."""
  from ssm_bench.config import PRESETS
  cfgs = sweeps.expand("near_solution", PRESETS["cpu"])
  assert sorted({c.init_from_analytic for c in cfgs}) == [-1.0, 0.0, 0.01, 0.03, 0.1, 0.3]
  assert len(cfgs) == 6 * 3 and {c.seed for c in cfgs} == {0, 1, 2}


def test_table2_lite_gives_every_cell_its_two_rates_and_two_seeds():
  """table2_lite's 360 runs: each of the 90 cells at lr 1e-3 and 1e-2, seeds 0 and 1."""
  from collections import defaultdict
  cells = defaultdict(set)
  for cs, _ in sweep.plan("table2_lite", "/tmp/unused"):
    for c in cs:
      cells[(c.task, c.model, c.depth)].add((c.lr, c.seed))
  assert len(cells) == 90
  assert all(v == {(lr, s) for lr in (1e-3, 1e-2) for s in (0, 1)} for v in cells.values()), (
      next(v for v in cells.values()))


def test_the_baselines_sweep_plans_both_stages_for_every_cell():
  """table2_baselines: the baselines on C2, S3 and A5 at depth 1 and 2, lr 3e-3 and 3e-2 with
  seeds 0 and 1, then TABLE2_CPU_MORE_SEEDS (trained where verdict_settled says so)."""
  from collections import defaultdict
  from launch import sweep_stages
  from ssm_bench.config import PRESETS
  cells = defaultdict(set)
  for c in sweeps.expand("table2_baselines", PRESETS["table2_ext_cpu"]):
    cells[(c.task, c.model, c.depth)].add((c.lr, c.seed))
  assert len(cells) == 3 * 5 * 2
  seeds = (0, 1) + sweep_stages.TABLE2_CPU_MORE_SEEDS
  assert all(v == {(lr, s) for lr in (3e-3, 3e-2) for s in seeds} for v in cells.values()), (
      next(v for v in cells.values()))


def test_parity_hybrid_trains_at_length_8_without_a_curriculum():
  from ssm_bench.config import PRESETS
  cfgs = sweeps.expand("parity_hybrid", PRESETS["cpu"])
  assert {(c.train_length, c.curriculum_start) for c in cfgs} == {(8, 8)}


def test_the_gpu_profile_trains_the_paper_protocol_without_the_conv():
  """The profile's GPU protocol: the paper preset (float32 matmuls) without the Mamba block's
  conv, like Table 2's, at table2_lite's rates and seeds."""
  from ssm_bench.config import PRESETS
  cfgs = sweeps.expand("profile", PRESETS["profile"], {"model": "mamba"})
  assert {(c.conv_kernel, c.matmul_precision, c.preset) for c in cfgs} == {
      (0, "float32", "profile")}
  assert {(c.lr, c.seed) for c in cfgs} >= {(lr, s) for lr in (1e-3, 1e-2) for s in (0, 1)}


@pytest.mark.parametrize("preset,programs", [("profile_tiny", 3), ("profile", 3),
                                              ("profile_cpu", 30)])
def test_the_tiny_and_gpu_profiles_train_every_group_of_a_depth_in_one_program(preset, programs):
  """Padded to order 60 (A5's), the ten groups of a depth share one compiled program (tiny:
  33 s instead of 156 s here); the CPU profile keeps one per group and depth, so a group's
  short curriculum lengths stay short (`length_buckets`)."""
  from ssm_bench.config import PRESETS
  cfgs = sweeps.expand("profile", PRESETS[preset], {"model": "negmamba"})
  shapes = {c.shape_key() for c in cfgs}
  assert len(shapes) == programs, f"{preset}: {len(cfgs)} runs in {len(shapes)} programs"


def test_a_hybrid_stacks_profile_trains_every_group_at_its_own_depth_only():
  """launch.profile --model=negmamba,deltanet: the stack is one network of depth 2, so its
  profile is the ten groups at depth 2 (a layer's: depths 1-3)."""
  from ssm_bench import tracking_profile
  from ssm_bench.config import PRESETS
  cfgs = sweeps.expand("profile", PRESETS["profile_cpu"],
                       {"model": "negmamba,deltanet", "depth": 2})
  assert {c.depth for c in cfgs} == {2}, sorted({c.depth for c in cfgs})
  assert {c.model for c in cfgs} == {"negmamba,deltanet"}
  assert {c.task for c in cfgs} == set(tracking_profile.GROUPS)


def test_a_profile_of_a_group_outside_its_ten_trains_that_group_alone():
  """launch.profile --groups=D3 hands the sweep --config.task=D3: that group is the one trained,
  at the profile's depths, rates and seeds; without one the profile's ten train."""
  from ssm_bench import tracking_profile
  from ssm_bench.config import PRESETS
  base = PRESETS["profile_cpu"]
  added = sweeps.expand("profile", base, {"model": "negmamba", "task": "D3"})
  assert {c.task for c in added} == {"D3"}
  collapsed = sweeps.collapsed("profile", base, {"model": "negmamba", "task": "D3"})
  assert collapsed == {}, f"the added group reads as merging the profile's groups: {collapsed}"
  assert {c.depth for c in added} == set(tracking_profile.DEPTHS)
  own = sweeps.expand("profile", base, {"model": "negmamba"})
  assert {c.task for c in own} == set(tracking_profile.GROUPS)


# Sweeps with no committed runs, or only some: table2 (the order of 100 GPU-hours), smoke_p (its
# rates are test_the_smoke_rates_...'s), tiny (for tests).
NOT_COMMITTED = ("table2", "smoke_p", "tiny")


def test_every_committed_sweeps_first_stage_is_stored_under_the_names_it_plans_today():
  """The stored runs are today's protocol: a preset, grid or layer-preset change (the rnn's wide
  table2_cpu values, a learning rate) renames a sweep's runs, so the committed tables would read
  an old protocol and the same command would train the sweep again. Every run of each committed
  sweep's first stage (the one no earlier result can skip), and of each profiled built-in layer's
  profile, is stored finished in results/runs."""
  from ssm_bench import registry, rundir
  stored = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "results", "runs")
  configs = [json.load(open(os.path.join(stored, d, "config.json"))) for d in os.listdir(stored)]
  profiled = {c["model"] for c in configs if c["preset"] == "profile_cpu"}
  plans = [(name, {}) for name in sweeps.SWEEPS if name not in NOT_COMMITTED + ("profile",)]
  plans += [("profile", {"model": m}) for m in sorted(profiled)
            if registry.find(m) is not None and registry.get(m).builtin]
  assert len(plans) > 15, f"too few sweeps and profiles to check: {plans}"
  for name, overrides in plans:
    groups = sweep.plan(name, stored, overrides=overrides, check=False)
    stage = sweeps.SWEEPS[name].stage or (lambda c: 0)
    first = min(stage(c) for cfgs, _ in groups for c in cfgs)
    dirs = [d for cfgs, ds in groups for c, d in zip(cfgs, ds) if stage(c) == first]
    missing = [os.path.basename(d) for d in dirs if not rundir.is_finished(d)]
    assert not missing, (f"{name} {overrides}: {len(missing)} of its {len(dirs)} first-stage "
                         f"runs are not stored under today's names, e.g. {missing[:3]}")
