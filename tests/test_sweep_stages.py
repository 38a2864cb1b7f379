"""Staged sweeps: later stages add seeds or depths only where the finished runs ask for them."""
import os

import pytest

from launch import sweep
from launch import sweep_stages
from launch import sweeps

from fake_runs import finish_with, finish_with_seq_acc
import launcher

pytestmark = pytest.mark.heavy  # trains tiny runs through the CLI: scheduled first (conftest.py)


def run_sweep(*args):
  return launcher.run(["launch.sweep", *args], timeout=600)


def test_illusion_runs_by_depth_and_skips_depths_a_shallower_stack_solved(tmp_path):
  groups = sweep.plan("illusion", str(tmp_path), only=r"^A5-mamba-")
  staged = sweep.stages(groups, sweeps.SWEEPS["illusion"].stage)
  assert [{c.depth for cfgs, _ in s for c in cfgs} for s in staged] == [{1}, {2}, {3}]
  lengths = sorted(c.train_length for cfgs, _ in staged[0] for c in cfgs)
  by_length = {cfgs[0].train_length: (cfgs[0], dirs[0]) for cfgs, dirs in staged[0]}
  (short_cfg, short_dir), (long_cfg, long_dir) = by_length[lengths[0]], by_length[lengths[-1]]
  finish_with_seq_acc(short_cfg, short_dir, 0.95)  # depth 1 solves the shortest length
  finish_with_seq_acc(long_cfg, long_dir, 0.5)  # and not the longest
  kept, runs_dropped, groups_dropped = sweep.prune(staged[1], groups, sweep_stages.shallower_solved)
  kept_lengths = sorted(cfgs[0].train_length for cfgs, _ in kept)
  assert lengths[0] not in kept_lengths, "depth 2 trained although depth 1 solved the length"
  assert lengths[-1] in kept_lengths, "depth 2 skipped although depth 1 failed the length"
  assert (runs_dropped, groups_dropped) == (1, 1)
  assert len(sweep.prune(staged[2], groups, sweep_stages.shallower_solved)[0]) == len(staged[2]) - 1
  deep_long = next((c[0], d[0]) for c, d in staged[1] if c[0].train_length == lengths[-1])
  finish_with_seq_acc(*deep_long, 0.95)  # a deeper stack's success says nothing about a shallower one
  assert sweep.prune(staged[0], groups, sweep_stages.shallower_solved)[1] == 0


def test_table2_baselines_adds_seeds_where_one_run_of_a_cell_extrapolates(tmp_path):
  """The baselines' sweep has table2_cpu's second stage: deltaproduct C2 with one run of four
  reaching 100 trains seeds 4-7; deltanet C2 with two does not."""
  groups = sweep.plan("table2_baselines", str(tmp_path), only=r"^C2-delta(net|product)-L1-")
  first, second = sweep.stages(groups, sweeps.SWEEPS["table2_baselines"].stage)
  for (cfgs, dirs), max_lens in zip(first, ((1000, 1000, 0, 0), (100, 80, 0, 0))):
    for c, d, max_len in zip(cfgs, dirs, max_lens):
      finish_with(c, d, max_len)
  kept = sweep.prune(second, groups, sweeps.SWEEPS["table2_baselines"].skip)[0]
  assert [(cfgs[0].model, sorted({c.seed for c in cfgs})) for cfgs, _ in kept] == [
      ("deltaproduct", list(sweep_stages.TABLE2_CPU_MORE_SEEDS))], kept


def test_table2_cpu_adds_seeds_to_cells_against_the_theory_on_fewer_than_four_runs(tmp_path):
  """Stage 2 of table2_cpu also trains a cell whose (2) first-stage runs go against the theory:
  none extrapolates where it allows the cell, or several do where it rules the cell out; not a
  cell that agrees with it, nor one against it that already had MIN_RUNS_AGAINST_THEORY runs."""
  groups = sweep.plan("table2_cpu", str(tmp_path), only=r"^(C2xC4-negmamba-L[12]|C2xC4-mamba-L2|"
                      r"C2-negmamba-L1|C24-rnn-L1|C6-mamba-L1)-")
  first, second = sweep.stages(groups, sweeps.SWEEPS["table2_cpu"].stage)
  cell = {(cfgs[0].task, cfgs[0].model, cfgs[0].depth): (cfgs, dirs) for cfgs, dirs in first}
  assert len(cell[("C2xC4", "negmamba", 2)][0]) < sweep_stages.MIN_RUNS_AGAINST_THEORY
  assert len(cell[("C24", "rnn", 1)][0]) == sweep_stages.MIN_RUNS_AGAINST_THEORY
  # negmamba at depth 2 can express C2xC4, at depth 1 it cannot; mamba never can
  for key, max_lens in ((("C2xC4", "negmamba", 2), (80, 0)), (("C2xC4", "negmamba", 1), (0, 0)),
                        (("C2xC4", "mamba", 2), (0, 0)), (("C2", "negmamba", 1), (1000, 1000)),
                        (("C24", "rnn", 1), (0, 0, 60, 0)), (("C6", "mamba", 1), (120, 200))):
    for c, d, max_len in zip(*cell[key], max_lens):
      finish_with(c, d, max_len)
  kept = sweep.prune(second, groups, sweep_stages.verdict_settled)[0]
  assert sorted({(cfgs[0].task, cfgs[0].model, cfgs[0].depth) for cfgs, _ in kept}) == [
      ("C2xC4", "negmamba", 2), ("C6", "mamba", 1)], (
      "extra seeds went elsewhere than the two cells against the theory on 2 runs")
  assert {c.seed for cfgs, _ in kept for c in cfgs} == set(sweep_stages.TABLE2_CPU_MORE_SEEDS)


def test_table2_cpu_adds_seeds_only_to_cells_whose_verdict_rests_on_one_run(tmp_path):
  """Stage 2 of table2_cpu: the extra seeds train for a cell where exactly one first-stage run
  extrapolates, never where none or several do; extra seeds form their own groups."""
  groups = sweep.plan("table2_cpu", str(tmp_path), only=r"^(C2-rnn-L[12]|C6-rnn-L1)-")
  first, second = sweep.stages(groups, sweeps.SWEEPS["table2_cpu"].stage)
  assert {c.seed for cfgs, _ in first for c in cfgs} == {0, 1, 2, 3}
  assert {c.seed for cfgs, _ in second for c in cfgs} == set(sweep_stages.TABLE2_CPU_MORE_SEEDS)
  cell = {(cfgs[0].task, cfgs[0].depth): (cfgs, dirs) for cfgs, dirs in first}
  for key, max_lens in (((("C2", 1), (1000, 0, 20, 0))), (("C2", 2), (1000, 120, 0, 0)),
                        (("C6", 1), (80, 0, 0, 0))):  # one, two and no runs extrapolate
    for c, d, max_len in zip(*cell[key], max_lens):
      finish_with(c, d, max_len)
  kept, runs_dropped, groups_dropped = sweep.prune(second, groups, sweep_stages.verdict_settled)
  assert [(cfgs[0].task, cfgs[0].depth, len(cfgs)) for cfgs, _ in kept] == [("C2", 1, 4)], kept
  assert (runs_dropped, groups_dropped) == (8, 2)
  c, d = cell[("C2", 2)][0][1], cell[("C2", 2)][1][1]  # C2 depth 2's second success diverged
  finish_with(c, d, 120, status="diverged")
  kept = sweep.prune(second, groups, sweep_stages.verdict_settled)[0]
  assert sorted(cfgs[0].depth for cfgs, _ in kept) == [1, 2], "a diverged run counted as a success"
  [(extra, extra_dirs)] = [(cfgs, dirs) for cfgs, dirs in kept if cfgs[0].depth == 1]
  for c, d in zip(extra, extra_dirs):  # the extra seeds' own successes do not change the rule
    finish_with(c, d, 1000)
  kept = sweep.prune(second, groups, sweep_stages.verdict_settled)[0]
  assert sorted(cfgs[0].depth for cfgs, _ in kept) == [1, 2], "second-stage runs were counted"
  assert not any(sweep_stages.verdict_settled(c, []) for cfgs, _ in first for c in cfgs), (
      "a first-stage run was skipped")


def test_languages_add_seeds_where_a_cell_rests_on_one_run_or_goes_against_the_theory(tmp_path):
  """Each depth of the languages sweep has a second stage (seed 1 at both rates): on parity it
  trains for mamba (one of two succeeds, and its class is predicted not to model it: ✗), aussm
  (one of two) and rnn (none, ✓); not for negmamba (both succeed) nor the transformer
  (none, no theorem). Success is the language table's, on whole strings; a depth-2 extra seed
  is skipped once depth 1 modelled the language, extra seeds included."""
  groups = sweep.plan("languages", str(tmp_path),
                      only=r"^lang-parity-(mamba|negmamba|aussm|rnn|transformer)-L[12]-")
  staged = sweep.stages(groups, sweeps.SWEEPS["languages"].stage)
  assert [sorted({sweep_stages.language_stage(c) for cfgs, _ in s for c in cfgs}) for s in staged] == [
      [(d, e)] for d in (1, 2) for e in (0, 1)], "stages are not depth by depth, first runs first"
  first = {cfgs[0].model: (cfgs, dirs) for cfgs, dirs in staged[0]}
  for model, max_lens in (("mamba", (1000, 0)), ("aussm", (0, 120)), ("rnn", (80, 0)),
                          ("negmamba", (1000, 1000)), ("transformer", (0, 0))):
    cfgs, dirs = first[model]
    assert len(cfgs) == 2, (model, len(cfgs))
    for c, d, max_len in zip(cfgs, dirs, max_lens):
      finish_with(c, d, max_len)
  skip = sweeps.SWEEPS["languages"].skip
  kept = sweep.prune(staged[1], groups, skip)[0]
  assert sorted((cfgs[0].model, len(cfgs)) for cfgs, _ in kept) == [
      ("aussm", 2), ("mamba", 2), ("rnn", 2)], kept
  assert {c.seed for cfgs, _ in kept for c in cfgs} == set(sweep_stages.LANGUAGE_MORE_SEEDS)
  extra = {cfgs[0].model: (cfgs, dirs) for cfgs, dirs in kept}
  finish_with(extra["rnn"][0][1], extra["rnn"][1][1], 1000)  # rnn's extra seed models parity
  deeper = {cfgs[0].model for s in staged[2:] for cfgs, _ in sweep.prune(s, groups, skip)[0]}
  assert deeper == {"transformer"}, (
      f"depth 2 trained {sorted(deeper)}: want the one model no depth-1 run modelled parity with")


def _profile_cells(tmp_path, only, **kw):
  groups = sweep.plan("profile", str(tmp_path), only=only,
                      overrides={"model": "negmamba", **kw})
  staged = sweep.stages(groups, sweeps.SWEEPS["profile"].stage)
  cells = {}
  for stage in staged:
    for cfgs, dirs in stage:
      extra = cfgs[0].seed in sweep_stages.PROFILE_MORE_SEEDS["profile_cpu"]
      cells[(cfgs[0].task, cfgs[0].depth, extra)] = (cfgs, dirs)
  return groups, staged, cells


def test_profile_adds_seeds_to_cells_against_the_theory_or_resting_on_one_run(tmp_path):
  """Each depth of the cpu profile has a second stage: seeds 1-3 (at both rates) train for a
  cell whose two first runs go against negmamba's theory (D4 at depth 2 unlearnt, ✓; C3 at
  depth 1 learnt, ✗), seed 1 alone for a cell that agrees on one success (C2: one of two
  extrapolates, ✓), nothing for a cell that agrees otherwise (D4 at depth 1: none, ✗); a deeper
  stack is skipped once an extra seed extrapolated."""
  groups, staged, cells = _profile_cells(tmp_path, r"^(C2|C3|D4)-negmamba-L[123]-")
  assert [sorted({sweep_stages.profile_stage(c) for cfgs, _ in s for c in cfgs}) for s in staged] == [
      [(d, e)] for d in (1, 2, 3) for e in (0, 1)], "stages are not depth by depth, first runs first"
  assert len(cells[("D4", 2, False)][0]) == 2 and len(cells[("D4", 2, True)][0]) == 6
  for key, max_lens in ((("C2", 1), (1000, 20)), (("C3", 1), (120, 0)), (("D4", 1), (0, 0)),
                        (("D4", 2), (60, 0))):
    for c, d, max_len in zip(*cells[key + (False,)], max_lens):
      finish_with(c, d, max_len)
  skip = sweeps.SWEEPS["profile"].skip
  extra = lambda depth: sorted((cfgs[0].task, len(cfgs)) for cfgs, _ in sweep.prune(
      staged[2 * depth - 1], groups, skip)[0])
  assert extra(1) == [("C2", 2), ("C3", 6)], (
      f"depth 1's extra seeds: {extra(1)}; want C2's seed 1 (one success) and C3's 1-3 (beats "
      "theory)")
  assert {c.seed for cfgs, _ in sweep.prune(staged[1], groups, skip)[0] for c in cfgs
          if c.task == "C2"} == {1}, "C2's one extra seed is not seed 1"
  assert extra(2) == [("D4", 6)], "depth 2's extra seeds went elsewhere than D4 (below theory)"
  assert all(not skip(c, []) for s in staged[::2] for cfgs, _ in s for c in cfgs), (
      "a first run was skipped with nothing finished")
  cfgs, dirs = cells[("D4", 2, True)]
  finish_with(cfgs[0], dirs[0], 100)
  kept = sweep.prune(staged[4], groups, skip)[0]
  assert "D4" not in {cfgs[0].task for cfgs, _ in kept}, (
      "depth 3 trained though an extra seed at depth 2 extrapolated")


def test_profile_settles_a_deeper_cell_that_trained_before_a_shallower_success(tmp_path):
  """D4 at depths 2 and 3 both trained their first runs (0 of 2 each, below negmamba's theory),
  then an extra seed at depth 2 extrapolated: depth 3's verdict against the theory would rest on
  two runs, so its extra seeds still train (aussm's Q8 at depth 3 was such a cell). A depth-3
  cell with no first runs, as usual, does not."""
  groups, staged, cells = _profile_cells(tmp_path, r"^(D4|Q8)-negmamba-L[23]-")
  for key in (("D4", 2, False), ("D4", 3, False)):
    for c, d in zip(*cells[key]):
      finish_with(c, d, 0)
  cfgs, dirs = cells[("D4", 2, True)]
  finish_with(cfgs[0], dirs[0], 100)
  for c, d in zip(*cells[("Q8", 2, True)]):  # Q8: depth 2 extrapolated, depth 3 never trained
    finish_with(c, d, 100)
  skip = sweeps.SWEEPS["profile"].skip
  kept = sorted((cfgs[0].task, cfgs[0].depth, len(cfgs)) for s in staged[2:]
                for cfgs, _ in sweep.prune(s, groups, skip)[0])
  assert kept == [("D4", 3, 6)], (
      f"depth 3 kept {kept}: want D4's 6 extra seeds only (its two first runs are below theory)")


def test_a_shallower_success_skips_only_its_own_groups_deeper_runs(tmp_path):
  """C2 extrapolated at depth 1 (and D4 failed there): C2's depth-2 runs are skipped, D4's
  train; a C2 success says nothing about another group."""
  groups, _, _ = _profile_cells(tmp_path, r"^(C2|D4)-negmamba-L[12]-")
  runs = [c for cfgs, _ in groups for c in cfgs if c.seed == 0]
  finished = [(c, {"status": "done", "max_len": 1000 if c.task == "C2" else 0})
              for c in runs if c.depth == 1]
  skipped = {(c.task, c.depth): sweep_stages.profile_skip(c, finished) for c in runs
             if c.depth == 2}
  assert skipped == {("C2", 2): True, ("D4", 2): False}, skipped


@pytest.mark.parametrize("d_state,wanted", [(4, True), (2, False)])
def test_profile_second_stage_reads_the_theory_at_the_runs_width(tmp_path, d_state, wanted):
  """One DeltaProduct layer holds A5 only with keys of width 3 (the icosahedron): at d_state 4
  two failed runs are 'below theory' and get seeds 1-3; at d_state 2 there is no theorem."""
  groups = sweep.plan("profile", str(tmp_path), only=r"^A5-deltaproduct-L1-",
                      overrides={"model": "deltaproduct", "d_state": d_state})
  first = [c for cfgs, _ in groups for c in cfgs if c.seed == 0]
  extra = [c for cfgs, _ in groups for c in cfgs if c.seed != 0]
  assert len(first) == 2 and len(extra) == 6
  finished = [(c, {"status": "done", "max_len": 0}) for c in first]
  trained = [not sweep_stages.profile_skip(c, finished) for c in extra]
  assert trained == [wanted] * 6, (
      f"d_state {d_state}: extra seeds trained {trained}, want {wanted} (theory at that width)")


@pytest.mark.parametrize("d_state,wanted", [(12, True), (8, False)])
def test_profile_second_stage_reads_the_theory_at_the_layers_own_key_width(d_state, wanted):
  """A plugin whose keys are a quarter of d_state wide (`state_width`): two reflections hold A5
  in 3 dimensions, so at d_state 12 two failed runs are 'below theory' and get seeds 1-3, at
  d_state 8 (keys of width 2) there is no theorem and the cell is settled."""
  from ssm_bench import plugins
  from ssm_bench.config import TrainConfig
  plugins.load("plugin_layers.narrow_keys")
  base = TrainConfig(task="A5", model="narrow_keys", plugins="plugin_layers.narrow_keys",
                     preset="profile_cpu", d_state=d_state)
  finished = [(base.replace(lr=lr), {"status": "done", "max_len": 0}) for lr in (1e-3, 1e-2)]
  extra = base.replace(seed=sweep_stages.profile_extra_seeds(base)[0])
  assert (not sweep_stages.profile_skip(extra, finished)) is wanted, (
      f"d_state {d_state}: the extra seed {'did not train' if wanted else 'trained'}")


def test_profile_seed_override_trains_even_where_the_theory_agrees(tmp_path):
  """--config.seed=2 (an extra seed) on a cell with no first runs to judge by still trains it."""
  groups, staged, cells = _profile_cells(tmp_path, r"^D4-negmamba-L1-", seed=2)
  assert [c.seed for cfgs, _ in groups for c in cfgs] == [2, 2]
  kept = [c for s in staged for cfgs, _ in sweep.prune(s, groups, sweep_stages.profile_skip)[0]
          for c in cfgs]
  assert len(kept) == 2, "the overridden seed was skipped"


def test_unstaged_sweeps_run_as_one_stage():
  groups = sweep.plan("tiny", "/tmp/unused")
  assert sweep.stages(groups, sweeps.SWEEPS["tiny"].stage) == [groups]


def test_cli_staged_sweep_skips_the_depths_a_finished_shallower_run_solved(tmp_path):
  args = ["--sweep=illusion", "--only=^A5-ids4-", "--config.train_length=2",
          "--config.curriculum_start=2"]
  groups = sweep.plan("illusion", str(tmp_path), only="^A5-ids4-",
                      overrides={"train_length": 2, "curriculum_start": 2})
  assert sorted(c[0].depth for c, _ in groups) == [1, 2, 3]
  [(shallow, shallow_dir)] = [(c[0], d[0]) for c, d in groups if c[0].depth == 1]
  finish_with_seq_acc(shallow, shallow_dir, 0.95)
  dry = run_sweep(*args, f"--workdir={tmp_path}", "--dry_run")
  assert dry.returncode == 0, dry.stderr
  for line in ("stage 1: 1 run(s), 1 of them wanted by the 1 run(s) finished so far",
               "stage 2: 1 run(s), 0 of them", "stage 3: 1 run(s), 0 of them"):
    assert line in dry.stdout, f"missing {line!r} in the dry run:\n{dry.stdout}"
  # --only leaving the finished depth out: its stages still consult it (`whole_sweep`)
  deeper = run_sweep(*[a if not a.startswith("--only") else "--only=^A5-ids4-L[23]-" for a in args],
                     f"--workdir={tmp_path}", "--dry_run")
  assert deeper.returncode == 0, deeper.stderr
  for line in ("stage 1: 1 run(s), 0 of them wanted by the 1 run(s) finished so far",
               "stage 2: 1 run(s), 0 of them"):
    assert line in deeper.stdout, f"missing {line!r} in the dry run with --only:\n{deeper.stdout}"
  trained = run_sweep(*[a if not a.startswith("--only") else "--only=^A5-ids4-L[23]-"
                        for a in args], f"--workdir={tmp_path}", "--quiet")  # and training so
  assert trained.returncode == 0 and "2 runs not needed" in trained.stdout, (
      f"--only without the finished depth trained the deeper ones:\n{trained.stdout}")
  out = run_sweep(*args, f"--workdir={tmp_path}", "--quiet")
  assert out.returncode == 0, out.stderr
  assert "2 runs not needed" in out.stdout, out.stdout
  assert os.listdir(tmp_path) == [os.path.basename(shallow_dir)], "a skipped depth was trained"


def test_an_extra_seed_of_a_cell_with_no_finished_first_run_trains():
  """Nothing to judge the cell by (its first runs not finished, or a --config.seed= override on
  an extra seed): table2_cpu's and the languages' extra seeds train rather than being skipped."""
  from ssm_bench.config import TrainConfig
  cfg = TrainConfig(task="C2", model="negmamba", preset="table2_cpu",
                    seed=sweep_stages.TABLE2_CPU_MORE_SEEDS[0])
  assert sweep_stages.verdict_settled(cfg, []) is False
  lang = TrainConfig(task="lang-parity", model="negmamba", seed=sweep_stages.LANGUAGE_MORE_SEEDS[0])
  assert sweep_stages.language_settled(lang, []) is False


def test_a_language_cells_extra_seed_asks_the_theory_with_the_runs_kwargs():
  """The clock at m = 3 cannot track parity's C2 (✗): two first runs that both model parity go
  against that on too few runs, so its extra seed trains; at the default m = 4 (✓: 4th roots
  track C2, parity's monoid) the same runs settle the cell."""
  from ssm_bench import evaluation, plugins
  from ssm_bench.config import TrainConfig
  plugins.load("examples.clock")
  base = TrainConfig(task="lang-parity", model="clock", plugins="examples.clock",
                     layer_kwargs='{"m":3}', seed=0)
  solved = {str(n): 1.0 for n in evaluation.grid()}
  import dataclasses
  finished = [(c, {"config": dataclasses.asdict(c), "status": "done", "max_len": 1000,
                   "seq_acc_curve": solved}) for c in (base.replace(lr=3e-3), base.replace(lr=3e-2))]
  extra = base.replace(seed=sweep_stages.LANGUAGE_MORE_SEEDS[0])
  assert sweep_stages.language_settled(extra, finished) is False, "m = 3 read as the default m"
  at_default = [(c.replace(layer_kwargs=""), s) for c, s in finished]
  assert sweep_stages.language_settled(extra.replace(layer_kwargs=""), at_default) is True


def test_a_language_cells_extra_seed_asks_the_theory_at_the_cells_depth_and_width(monkeypatch):
  """Two first runs that fail go against a ✓ and call for the extra seed, but not a `?`:
  a counter mod 4 (monoid C4) is ✓ for negmamba from depth 2 on (? at depth 1); tomita6
  (monoid C3) is ✓ for deltaproduct with keys of 2 dimensions (? at d_state 1)."""
  import dataclasses
  from ssm_bench.config import TrainConfig
  from tasks import languages
  monkeypatch.setitem(languages.LANGUAGES, "mod4_for_stages", lambda: languages.from_spec(
      "mod4_for_stages", "ab", ["0", "1", "2", "3"], "0", ["0"],
      {"0 a": "1", "1 a": "2", "2 a": "3", "3 a": "0", "0 b": "0", "1 b": "1", "2 b": "2",
       "3 b": "3"}, member=lambda w: w.count("a") % 4 == 0))
  failed = {"status": "done", "max_len": 0, "seq_acc_curve": {"20": 0.0}}

  def settled(**fields):
    base = TrainConfig(seed=0, **fields)
    first = [(c, {**failed, "config": dataclasses.asdict(c)})
             for c in (base.replace(lr=3e-3), base.replace(lr=3e-2))]
    extra = base.replace(seed=sweep_stages.LANGUAGE_MORE_SEEDS[0])
    return sweep_stages.language_settled(extra, first)
  assert settled(task="lang-mod4_for_stages", model="negmamba", depth=1) is True
  assert settled(task="lang-mod4_for_stages", model="negmamba", depth=2) is False
  assert settled(task="lang-tomita6", model="deltaproduct", d_state=1) is True
  assert settled(task="lang-tomita6", model="deltaproduct", d_state=2) is False
