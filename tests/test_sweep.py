"""The sweep launcher: grid sizes, grouping, skipping, resuming, executors, errors."""
import json
import os
import subprocess
import sys

import pytest

from launch import executors
from launch import progress
from launch import sweep
from launch import sweeps
from ssm_bench import evaluation
from ssm_bench import runs

pytestmark = pytest.mark.heavy  # a minute or more in all: scheduled first (conftest.py)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
  assert {c.steps for c in runs} == {20000}


@pytest.mark.parametrize("name", list(sweeps.SWEEPS))
def test_every_sweep_expands_to_valid_unique_runs(name):
  groups = sweep.plan(name, "/tmp/unused")
  dirs = [d for _, ds in groups for d in ds]
  assert dirs and len(dirs) == len(set(dirs)), "two runs share a directory"


def test_only_regex_filters_and_bad_regex_is_a_usage_error():
  groups = sweep.plan("table2", "/tmp/unused", only=r"^C2-negmamba-L1-n32-")
  assert sum(len(c) for c, _ in groups) == 27
  with pytest.raises(Exception, match="not a valid regular expression"):
    sweep.plan("table2", "/tmp/unused", only="(")


def test_interrupted_sweep_completes_with_every_run_done_once(tmp_path):
  groups = sweep.plan("tiny", str(tmp_path))

  class StopAfterFirstGroup(progress.Progress):
    def group_done(self, runs):
      raise KeyboardInterrupt

  with pytest.raises(KeyboardInterrupt):
    executors.local(groups, progress=StopAfterFirstGroup(2, 4, enabled=False))
  first = {d: runs.read_summary(d)["finished_at"] for d in groups[0][1]}
  assert all(runs.read_summary(d) is None for d in groups[1][1])
  trained = []
  orig = runs.train_group

  def spy(cfgs, dirs, **kw):
    trained.extend(d for d in dirs if runs.read_summary(d) is None)
    return orig(cfgs, dirs, **kw)

  runs.train_group = spy
  try:
    executors.local(groups)
    executors.local(groups)  # a third launch finds everything done
  finally:
    runs.train_group = orig
  assert sorted(trained) == sorted(groups[1][1]), "only the unfinished group may train"
  assert {d: runs.read_summary(d)["finished_at"] for d in groups[0][1]} == first
  for _, dirs in groups:
    for d in dirs:
      steps = [json.loads(l)["step"] for l in open(os.path.join(d, "metrics.jsonl"))]
      assert steps == [10, 20], f"{d}: steps logged {steps}"
      assert runs.read_summary(d)["status"] == "done"


def run_sweep(*args):
  return subprocess.run([sys.executable, "-m", "launch.sweep", *args], capture_output=True,
                        text=True, timeout=600)


@pytest.fixture(scope="module")
def tiny_local(tmp_path_factory):
  """The tiny sweep trained once by the local executor: the reference other executors match."""
  d = tmp_path_factory.mktemp("tiny_local")
  executors.local(sweep.plan("tiny", str(d)))
  return d


def _same_results(reference, other, what, loss_tol=0.0):
  for name in os.listdir(reference):
    a, b = runs.read_summary(os.path.join(reference, name)), runs.read_summary(
        os.path.join(other, name))
    assert b is not None, f"{what} did not finish {name}"
    for key in ("status", "max_len", "steps") + (("acc_curve", "seq_acc_curve") * (not loss_tol)):
      assert a[key] == b[key], f"{name}: {key} differs between the local executor and {what}"
    assert abs(a["final_loss"] - b["final_loss"]) <= loss_tol, (
        f"{name}: final loss {a['final_loss']} in-process, {b['final_loss']} with {what}")


def test_cli_workers_train_as_in_process_and_a_rerun_trains_nothing(tmp_path, tiny_local):
  """--workers=2: each group in its own single-threaded process; the same runs as in one
  process up to float32 summation order (single- vs multi-threaded XLA: 7th digit, recorded as
  the summary's xla_flags); then a plain relaunch finds every run finished."""
  first = run_sweep("--sweep=tiny", f"--workdir={tmp_path}", "--workers=2")
  assert first.returncode == 0, first.stderr
  assert "| C2 |" in first.stdout, "the sweep should end with its table"
  _same_results(tiny_local, tmp_path, "--workers=2", loss_tol=1e-4)
  assert all("multi_thread_eigen=false" in runs.read_summary(tmp_path / n)["xla_flags"]
             for n in os.listdir(tmp_path)), "a worker's summary does not record its XLA flags"
  mtimes = {p: os.path.getmtime(os.path.join(tmp_path, p, "summary.json")) for p in os.listdir(tmp_path)}
  second = run_sweep("--sweep=tiny", f"--workdir={tmp_path}")
  assert second.returncode == 0 and "2 groups already finished" in second.stdout, second.stdout
  assert mtimes == {p: os.path.getmtime(os.path.join(tmp_path, p, "summary.json")) for p in mtimes}


def test_dry_run_prints_counts():
  out = run_sweep("--sweep=table2", "--dry_run")
  assert out.returncode == 0
  assert out.stdout.strip().splitlines()[-1] == "table2: 7290 runs in 30 compiled groups"


@pytest.mark.parametrize("args,needle", [
    (["--sweep=nope"], "sweep"),
    (["--sweep=tiny", "--only=("], "regular expression"),
    (["--sweep=tiny", "--workdir=/proc/forbidden"], "workdir"),
])
def test_bad_input_is_a_one_line_error(args, needle):
  out = run_sweep(*args)
  assert out.returncode != 0
  assert "Traceback" not in out.stderr and needle in out.stderr


def test_ray_workers_get_a_memory_share_of_their_gpu_or_no_gpu():
  assert executors.worker_env(0.5)["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.450"
  assert "XLA_PYTHON_CLIENT_ALLOCATOR" not in executors.worker_env(1.0), "platform allocator is slow"
  assert executors.worker_env(0.0)["JAX_PLATFORMS"] == "cpu"


def test_progress_prints_plain_lines_with_eta_when_not_a_terminal(tmp_path):
  import io
  out = io.StringIO()
  p = progress.Progress(2, 4, stream=out)
  p.start_group("C2 mamba x1", 2, 20)
  p.step(10)
  p.group_done(2)
  assert "[1/2 groups, 2/4 runs]" in out.getvalue() and "ETA" in out.getvalue(), out.getvalue()


def test_progress_totals_shrink_when_a_staged_sweep_skips_runs():
  import io
  out = io.StringIO()
  p = progress.Progress(3, 6, stream=out)
  p.drop(1, 2)  # a stage found one group unnecessary
  p.start_group("A5 ids4 x1", 2, 20)
  p.group_done(2)
  assert "[1/2 groups, 2/4 runs]" in out.getvalue(), out.getvalue()


def test_progress_of_a_resumed_group_counts_only_the_runs_it_trains(tmp_path):
  import io
  groups = sweep.plan("tiny", str(tmp_path))
  executors.local([([groups[0][0][0]], [groups[0][1][0]])])  # one run of the first group
  out = io.StringIO()
  bar = progress.Progress(2, 3, stream=out)
  executors.local(groups, progress=bar)
  assert "[1/2 groups, 1/3 runs]" in out.getvalue(), f"finished runs counted:\n{out.getvalue()}"
  assert "[2/2 groups, 3/3 runs]" in out.getvalue(), out.getvalue()


def _ray_plans_memory_splits_on_a_worker(groups):
  """The budget and the estimates come from a worker (the workers' device and backend), not from
  the driver, which may be a CPU head node; a run that fits nowhere is refused in one line."""
  same = executors.ray_plan(groups)  # CPU workers report no budget: groups stay whole
  assert same == groups
  try:
    split = executors.ray_plan(groups, memory_gb=1e-9)
  except ValueError as e:
    assert "one run needs" in str(e), e
  else:
    raise AssertionError(f"a run larger than the budget was planned: {split}")


def test_worker_processes_get_disjoint_cores_and_single_threaded_xla():
  assert executors.core_slices([0, 1], 2) == [[0], [1]]
  assert executors.core_slices([0, 1, 2, 3], 2) == [[0, 2], [1, 3]]
  assert executors.core_slices([0, 1], 3) == [[0], [1], [0]], "more workers than cores share"
  env = executors.cpu_worker_env(1, {"XLA_FLAGS": "--xla_foo=1 --xla_cpu_multi_thread_eigen=true"})
  assert env["XLA_FLAGS"].split() == ["--xla_foo=1", "--xla_cpu_multi_thread_eigen=false"], \
      env["XLA_FLAGS"]
  assert "multi_thread" not in executors.cpu_worker_env(2, {})["XLA_FLAGS"]
  assert env["JAX_PLATFORMS"] == "cpu"


def test_worker_processes_stop_the_sweep_on_a_directory_holding_another_run(tmp_path, tiny_local):
  groups = sweep.plan("tiny", str(tmp_path))
  import shutil  # the first run's directory now holds another run's summary
  other = sorted(os.listdir(tiny_local))[-1]
  shutil.copytree(os.path.join(tiny_local, other), groups[0][1][0])
  with pytest.raises(runs.RunError, match="already holds a different run"):
    executors.processes(groups[:1], workers=2)


def test_ray_plans_on_a_worker_matches_local_and_reaches_a_plugin_layer(tmp_path, tiny_local):
  """One Ray instance for three behaviours: memory planned on a worker, the same summaries as
  the local executor, and a plugin layer (examples/rotation.py, recorded in its runs' config)
  found on the workers."""
  pytest.importorskip("ray")
  ray_dir = tmp_path / "ray"
  plugin = sweep.plan("profile", str(tmp_path / "plugin"), only=r"^C2-rotation-L1-",
                      preset="profile_tiny",
                      overrides={"model": "rotation", "plugins": "examples.rotation"})
  cwd = os.getcwd()
  os.chdir(ROOT)  # the driver's directory is on the workers' path
  try:
    _ray_plans_memory_splits_on_a_worker(sweep.plan("tiny", str(ray_dir)))
    failures = executors.ray(sweep.plan("tiny", str(ray_dir)) + plugin)
  finally:
    os.chdir(cwd)
    import ray
    ray.shutdown()
  assert failures == 0
  _same_results(tiny_local, ray_dir, "ray")
  for _, dirs in plugin:
    for d in dirs:
      assert runs.read_summary(d)["status"] == "done", f"{d}: the plugin layer did not run on Ray"


def _finish(cfg, run_dir, seq_acc):
  curve = {str(n): 0.0 for n in evaluation.grid(cfg.eval_length)}
  runs.rundir.write_summary(cfg, run_dir, {"status": "done", "max_len": 0, "steps": cfg.steps,
                                           "acc_curve": curve, "seq_acc_curve": curve,
                                           "seq_acc_at_train_length": seq_acc}, 1.0)
  assert runs.is_finished(run_dir), "the fake summary is not a valid finished one"


def test_illusion_runs_by_depth_and_skips_depths_a_shallower_stack_solved(tmp_path):
  groups = sweep.plan("illusion", str(tmp_path), only=r"^A5-mamba-")
  staged = sweep.stages(groups, sweeps.SWEEPS["illusion"].stage)
  assert [{c.depth for cfgs, _ in s for c in cfgs} for s in staged] == [{1}, {2}, {3}]
  lengths = sorted(c.train_length for cfgs, _ in staged[0] for c in cfgs)
  by_length = {cfgs[0].train_length: (cfgs[0], dirs[0]) for cfgs, dirs in staged[0]}
  (short_cfg, short_dir), (long_cfg, long_dir) = by_length[lengths[0]], by_length[lengths[-1]]
  _finish(short_cfg, short_dir, 0.95)  # depth 1 solves the shortest length
  _finish(long_cfg, long_dir, 0.5)  # and not the longest
  kept, runs_dropped, groups_dropped = sweep.prune(staged[1], groups, sweeps.shallower_solved)
  kept_lengths = sorted(cfgs[0].train_length for cfgs, _ in kept)
  assert lengths[0] not in kept_lengths, "depth 2 trained although depth 1 solved the length"
  assert lengths[-1] in kept_lengths, "depth 2 skipped although depth 1 failed the length"
  assert (runs_dropped, groups_dropped) == (1, 1)
  assert len(sweep.prune(staged[2], groups, sweeps.shallower_solved)[0]) == len(staged[2]) - 1
  deep_long = next((c[0], d[0]) for c, d in staged[1] if c[0].train_length == lengths[-1])
  _finish(*deep_long, 0.95)  # a deeper stack's success says nothing about a shallower one
  assert sweep.prune(staged[0], groups, sweeps.shallower_solved)[1] == 0


def _finish_with(cfg, run_dir, max_len, status="done"):
  curve = {str(n): 0.0 for n in evaluation.grid(cfg.eval_length)}
  runs.rundir.write_summary(cfg, run_dir, {"status": status, "max_len": max_len,
                                           "steps": cfg.steps, "acc_curve": curve,
                                           "seq_acc_curve": curve}, 1.0)


def test_a_deadline_starts_no_group_the_longest_so_far_would_not_finish(monkeypatch):
  """Groups of 10 s against an end at 25 s: two train, the third is not started; the first
  group starts even when the end has already passed."""
  now = [0.0]
  trained = []

  def train_group(cfgs, dirs, progress=None):
    trained.append(dirs[0])
    now[0] += 10

  monkeypatch.setattr(runs, "train_group", train_group)
  monkeypatch.setattr(runs, "unfinished", lambda dirs: len(list(dirs)))
  groups = [([None], [f"g{i}"]) for i in range(3)]
  with pytest.raises(executors.TimeUp) as stop:
    executors.local(groups, deadline=executors.Deadline(25.0, clock=lambda: now[0]))
  assert trained == ["g0", "g1"] and stop.value.groups_left == 1, trained
  trained.clear()
  with pytest.raises(executors.TimeUp) as stop:
    executors.local(groups, deadline=executors.Deadline(-1.0, clock=lambda: now[0]))
  assert trained == ["g0"] and stop.value.groups_left == 2, trained


def test_cli_time_limit_stops_between_groups_and_the_same_command_resumes(tmp_path):
  """An end already past (as a watchdog restart inherits it) lets one group start, with one
  worker process or two; the message says so, and the same command finishes the sweep."""
  env = {**os.environ, sweep.DEADLINE_ENV: "0"}
  for workers, workdir in ((1, tmp_path / "one"), (2, tmp_path / "two")):
    args = ["--sweep=tiny", f"--workdir={workdir}", "--time_limit_s=600", f"--workers={workers}",
            "--quiet"]
    first = subprocess.run([sys.executable, "-m", "launch.sweep", *args], capture_output=True,
                           text=True, timeout=600, env=env)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "stopped at the time limit" in first.stdout and "1 group(s)" in first.stdout, (
        f"workers={workers}: " + first.stdout[-1000:])
    assert sweep.finished_count(sweep.plan("tiny", str(workdir))) == 2, f"workers={workers}"
  second = run_sweep(*args)  # (resuming is the same code whatever the workers)
  assert second.returncode == 0 and "stopped" not in second.stdout, second.stdout[-1000:]
  assert sweep.finished_count(sweep.plan("tiny", str(workdir))) == 4


def test_table2_baselines_adds_seeds_where_one_run_of_a_cell_extrapolates(tmp_path):
  """The baselines' sweep has table2_cpu's second stage: deltaproduct C2 with one run of four
  reaching 100 trains seeds 4-7; deltanet C2 with two does not."""
  groups = sweep.plan("table2_baselines", str(tmp_path), only=r"^C2-delta(net|product)-L1-")
  first, second = sweep.stages(groups, sweeps.SWEEPS["table2_baselines"].stage)
  for (cfgs, dirs), max_lens in zip(first, ((1000, 1000, 0, 0), (100, 80, 0, 0))):
    for c, d, max_len in zip(cfgs, dirs, max_lens):
      _finish_with(c, d, max_len)
  kept = sweep.prune(second, groups, sweeps.SWEEPS["table2_baselines"].skip)[0]
  assert [(cfgs[0].model, sorted({c.seed for c in cfgs})) for cfgs, _ in kept] == [
      ("deltaproduct", list(sweeps.TABLE2_CPU_MORE_SEEDS))], kept


def test_a_resumed_sweep_measures_and_trains_only_its_unfinished_groups(tmp_path, monkeypatch):
  """A relaunch on a fresh GPU machine must not compile a finished group's program to size it."""
  from ssm_bench import memory
  measured = []
  monkeypatch.setattr(memory, "_program_bytes", lambda cfg, k: measured.append(cfg.model) or 1.0)
  groups = sweep.plan("tiny", str(tmp_path))
  assert [cfgs[0].model for cfgs, _ in groups] == ["mamba", "negmamba"]
  for c, d in zip(*groups[0]):
    _finish_with(c, d, 0)
  fit = lambda gs: sweep.fit_to_memory(gs, 2 ** 30)
  assert sweep.to_train(groups, fit) == groups[1:] and measured == ["negmamba"], measured
  assert sweep.to_train(groups) == groups[1:] and measured == ["negmamba"], (
      "a sweep without a memory budget measured a group")


def test_table2_cpu_adds_seeds_to_cells_against_the_theory_on_fewer_than_four_runs(tmp_path):
  """Stage 2 of table2_cpu also trains a cell whose (2) first-stage runs go against the theory:
  none extrapolates where it allows the cell, or several do where it rules the cell out; not a
  cell that agrees with it, nor one against it that already had MIN_RUNS_AGAINST_THEORY runs."""
  groups = sweep.plan("table2_cpu", str(tmp_path), only=r"^(C2xC4-negmamba-L[12]|C2xC4-mamba-L2|"
                      r"C2-negmamba-L1|C24-rnn-L1|C6-mamba-L1)-")
  first, second = sweep.stages(groups, sweeps.SWEEPS["table2_cpu"].stage)
  cell = {(cfgs[0].task, cfgs[0].model, cfgs[0].depth): (cfgs, dirs) for cfgs, dirs in first}
  assert len(cell[("C2xC4", "negmamba", 2)][0]) < sweeps.MIN_RUNS_AGAINST_THEORY
  assert len(cell[("C24", "rnn", 1)][0]) == sweeps.MIN_RUNS_AGAINST_THEORY
  # negmamba at depth 2 can express C2xC4, at depth 1 it cannot; mamba never can
  for key, max_lens in ((("C2xC4", "negmamba", 2), (80, 0)), (("C2xC4", "negmamba", 1), (0, 0)),
                        (("C2xC4", "mamba", 2), (0, 0)), (("C2", "negmamba", 1), (1000, 1000)),
                        (("C24", "rnn", 1), (0, 0, 60, 0)), (("C6", "mamba", 1), (120, 200))):
    for c, d, max_len in zip(*cell[key], max_lens):
      _finish_with(c, d, max_len)
  kept = sweep.prune(second, groups, sweeps.verdict_settled)[0]
  assert sorted({(cfgs[0].task, cfgs[0].model, cfgs[0].depth) for cfgs, _ in kept}) == [
      ("C2xC4", "negmamba", 2), ("C6", "mamba", 1)], (
      "extra seeds went elsewhere than the two cells against the theory on 2 runs")
  assert {c.seed for cfgs, _ in kept for c in cfgs} == set(sweeps.TABLE2_CPU_MORE_SEEDS)


def test_table2_cpu_adds_seeds_only_to_cells_whose_verdict_rests_on_one_run(tmp_path):
  """Stage 2 of table2_cpu: the extra seeds train for a cell where exactly one first-stage run
  extrapolates, never where none or several do; extra seeds form their own groups."""
  groups = sweep.plan("table2_cpu", str(tmp_path), only=r"^(C2-rnn-L[12]|C6-rnn-L1)-")
  first, second = sweep.stages(groups, sweeps.SWEEPS["table2_cpu"].stage)
  assert {c.seed for cfgs, _ in first for c in cfgs} == {0, 1, 2, 3}
  assert {c.seed for cfgs, _ in second for c in cfgs} == set(sweeps.TABLE2_CPU_MORE_SEEDS)
  cell = {(cfgs[0].task, cfgs[0].depth): (cfgs, dirs) for cfgs, dirs in first}
  for key, max_lens in (((("C2", 1), (1000, 0, 20, 0))), (("C2", 2), (1000, 120, 0, 0)),
                        (("C6", 1), (80, 0, 0, 0))):  # one, two and no runs extrapolate
    for c, d, max_len in zip(*cell[key], max_lens):
      _finish_with(c, d, max_len)
  kept, runs_dropped, groups_dropped = sweep.prune(second, groups, sweeps.verdict_settled)
  assert [(cfgs[0].task, cfgs[0].depth, len(cfgs)) for cfgs, _ in kept] == [("C2", 1, 4)], kept
  assert (runs_dropped, groups_dropped) == (8, 2)
  c, d = cell[("C2", 2)][0][1], cell[("C2", 2)][1][1]  # C2 depth 2's second success diverged
  _finish_with(c, d, 120, status="diverged")
  kept = sweep.prune(second, groups, sweeps.verdict_settled)[0]
  assert sorted(cfgs[0].depth for cfgs, _ in kept) == [1, 2], "a diverged run counted as a success"
  [(extra, extra_dirs)] = [(cfgs, dirs) for cfgs, dirs in kept if cfgs[0].depth == 1]
  for c, d in zip(extra, extra_dirs):  # the extra seeds' own successes do not change the rule
    _finish_with(c, d, 1000)
  kept = sweep.prune(second, groups, sweeps.verdict_settled)[0]
  assert sorted(cfgs[0].depth for cfgs, _ in kept) == [1, 2], "second-stage runs were counted"
  assert not any(sweeps.verdict_settled(c, []) for cfgs, _ in first for c in cfgs), (
      "a first-stage run was skipped")


def _profile_cells(tmp_path, only, **kw):
  groups = sweep.plan("profile", str(tmp_path), only=only,
                      overrides={"model": "negmamba", **kw})
  staged = sweep.stages(groups, sweeps.SWEEPS["profile"].stage)
  cells = {}
  for stage in staged:
    for cfgs, dirs in stage:
      extra = cfgs[0].seed in sweeps.PROFILE_MORE_SEEDS["profile_cpu"]
      cells[(cfgs[0].task, cfgs[0].depth, extra)] = (cfgs, dirs)
  return groups, staged, cells


def test_profile_adds_seeds_only_to_cells_against_the_theory_on_two_runs(tmp_path):
  """Each depth of the cpu profile has a second stage: seeds 1-3 (at both rates) train for a
  cell whose two first runs go against negmamba's theory (D4 at depth 2 unlearnt, ✓; C3 at
  depth 1 learnt, ✗), not for cells that agree with it (C2: one of two extrapolates, ✓; D4 at
  depth 1: none, ✗); a deeper stack is skipped once an extra seed extrapolated."""
  groups, staged, cells = _profile_cells(tmp_path, r"^(C2|C3|D4)-negmamba-L[123]-")
  assert [sorted({sweeps.profile_stage(c) for cfgs, _ in s for c in cfgs}) for s in staged] == [
      [(d, e)] for d in (1, 2, 3) for e in (0, 1)], "stages are not depth by depth, first runs first"
  assert len(cells[("D4", 2, False)][0]) == 2 and len(cells[("D4", 2, True)][0]) == 6
  for key, max_lens in ((("C2", 1), (1000, 20)), (("C3", 1), (120, 0)), (("D4", 1), (0, 0)),
                        (("D4", 2), (60, 0))):
    for c, d, max_len in zip(*cells[key + (False,)], max_lens):
      _finish_with(c, d, max_len)
  skip = sweeps.SWEEPS["profile"].skip
  extra = lambda depth: sorted((cfgs[0].task, len(cfgs)) for cfgs, _ in sweep.prune(
      staged[2 * depth - 1], groups, skip)[0])
  assert extra(1) == [("C3", 6)], "depth 1's extra seeds went elsewhere than C3 (beats theory)"
  assert extra(2) == [("D4", 6)], "depth 2's extra seeds went elsewhere than D4 (below theory)"
  assert all(not skip(c, []) for s in staged[::2] for cfgs, _ in s for c in cfgs), (
      "a first run was skipped with nothing finished")
  cfgs, dirs = cells[("D4", 2, True)]
  _finish_with(cfgs[0], dirs[0], 100)
  kept = sweep.prune(staged[4], groups, skip)[0]
  assert "D4" not in {cfgs[0].task for cfgs, _ in kept}, (
      "depth 3 trained though an extra seed at depth 2 extrapolated")


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
  trained = [not sweeps.profile_skip(c, finished) for c in extra]
  assert trained == [wanted] * 6, (
      f"d_state {d_state}: extra seeds trained {trained}, want {wanted} (theory at that width)")


def test_profile_seed_override_trains_even_where_the_theory_agrees(tmp_path):
  """--config.seed=2 (an extra seed) on a cell with no first runs to judge by still trains it."""
  groups, staged, cells = _profile_cells(tmp_path, r"^D4-negmamba-L1-", seed=2)
  assert [c.seed for cfgs, _ in groups for c in cfgs] == [2, 2]
  kept = [c for s in staged for cfgs, _ in sweep.prune(s, groups, sweeps.profile_skip)[0]
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
  _finish(shallow, shallow_dir, 0.95)
  dry = run_sweep(*args, f"--workdir={tmp_path}", "--dry_run")
  assert dry.returncode == 0, dry.stderr
  for line in ("stage 1: 1 run(s), 1 of them wanted by the 1 run(s) finished so far",
               "stage 2: 1 run(s), 0 of them", "stage 3: 1 run(s), 0 of them"):
    assert line in dry.stdout, f"missing {line!r} in the dry run:\n{dry.stdout}"
  out = run_sweep(*args, f"--workdir={tmp_path}", "--quiet")
  assert out.returncode == 0, out.stderr
  assert "2 runs not needed" in out.stdout, out.stdout
  assert os.listdir(tmp_path) == [os.path.basename(shallow_dir)], "a skipped depth was trained"


def test_watchdog_restarts_a_sweep_that_hangs_and_it_finishes(tmp_path):
  """A group that hangs (as the XLA CPU runtime did: results/pilots.md, "Incidents") is killed
  after --stall_s
  without progress and the sweep relaunched; it resumes and finishes every run once."""
  env = {**os.environ, "SSM_BENCH_FAULT": "group_start:2:hang"}
  try:
    out = subprocess.run([sys.executable, "-m", "launch.sweep", "--sweep=tiny",
                          f"--workdir={tmp_path}", "--stall_s=10", "--quiet"],
                         capture_output=True, text=True, env=env, timeout=150)
  except subprocess.TimeoutExpired:
    pytest.fail("the hung sweep was never restarted")
  assert out.returncode == 0, f"exit {out.returncode}:\n{out.stderr[-2000:]}"
  assert "no progress for 10s" in out.stderr, f"no restart reported:\n{out.stderr[-2000:]}"
  dirs = [d for _, ds in sweep.plan("tiny", str(tmp_path)) for d in ds]
  assert all(runs.read_summary(d)["status"] == "done" for d in dirs), "a run did not finish"
  for d in dirs:
    steps = [json.loads(l)["step"] for l in open(os.path.join(d, "metrics.jsonl"))]
    assert len(steps) == len(set(steps)), f"{d}: a step logged twice after the restart"


def test_a_sweep_prints_the_table_of_its_own_runs_only(tmp_path, tiny_local):
  import shutil
  workdir = tmp_path / "runs"
  shutil.copytree(tiny_local, workdir)
  own = sorted(os.listdir(workdir))
  other = workdir / "S3-rnn-L1-other-sweep"  # another sweep's finished run, same directory
  shutil.copytree(workdir / own[0], other)
  summary = json.load(open(other / "summary.json"))
  summary["config"].update(task="S3", model="rnn")
  json.dump({**summary, "run": other.name}, open(other / "summary.json", "w"))
  out = run_sweep("--sweep=tiny", f"--workdir={workdir}", "--quiet")
  assert out.returncode == 0, out.stderr[-2000:]
  assert f"All {len(own)} runs finished" in out.stdout and "rnn" not in out.stdout, (
      "the finished sweep's table shows runs that are not the sweep's:\n" + out.stdout[-1500:])


def test_changing_how_a_finished_sweep_executes_retrains_nothing(tmp_path, tiny_local):
  """log_every, checkpoint_every and eval_chunk are execution, not identity: same run names, and
  the finished runs are kept as they are."""
  import shutil
  tmp_path = tmp_path / "runs"
  shutil.copytree(tiny_local, tmp_path)
  before = {d: runs.read_summary(d)["finished_at"] for _, ds in sweep.plan("tiny", str(tmp_path))
            for d in ds}
  again = sweep.plan("tiny", str(tmp_path), overrides={"checkpoint_every": 20, "log_every": 20,
                                                      "eval_chunk": 4})
  assert sorted(d for _, ds in again for d in ds) == sorted(before), "runs were renamed"
  executors.local(again)
  after = {d: runs.read_summary(d)["finished_at"] for _, ds in again for d in ds}
  assert after == before, "a finished run was retrained"


def test_the_readmes_smoke_probability_is_what_the_measured_rates_give():
  import re
  readme = open(os.path.join(os.path.dirname(__file__), "..", "README.md")).read()
  stated = float(re.search(r"probability >= (0\.\d+) by the measured success rates", readme)[1])
  assert sweeps.smoke_verdicts_probability() >= stated
