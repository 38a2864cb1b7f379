"""The sweep launcher: grouping, resuming, time limits, executors, errors (the sweeps' grids:
test_sweeps.py; the staged sweeps' skips: test_sweep_stages.py; progress lines:
test_progress.py)."""
import json
import os

import pytest

from launch import executors
from launch import progress
from launch import sweep
from ssm_bench import paper
from ssm_bench import runs

from fake_runs import finish_with
import launcher
import processes

pytestmark = pytest.mark.heavy  # a minute or more in all: scheduled first (conftest.py)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_only_regex_filters_and_bad_regex_is_a_usage_error():
  groups = sweep.plan("table2", "/tmp/unused", only=r"^C2-negmamba-L1-n32-")
  assert sum(len(c) for c, _ in groups) == 27
  # a search, as the flag says ("whose name matches"), not anchored at the name's start
  inner = sweep.plan("table2", "/tmp/unused", only=r"-negmamba-L1-n32-lr0\.0001-")
  assert {c.task for cfgs, _ in inner for c in cfgs} == set(paper.TABLE2_GROUPS), (
      "--only matched from the name's start only")
  with pytest.raises(Exception, match="not a valid regular expression"):
    sweep.plan("table2", "/tmp/unused", only="(")


def test_a_sweep_of_built_in_layers_builds_each_network_once_and_compiles_none(monkeypatch):
  """The layer checks cost little for the suite's own layers: planning table2_lite builds each
  of its built-in networks once (abstractly: its widths can still be wrong, a transformer's
  d_model its heads do not divide), not once per task, and compiles none (the causality check
  is for plugins and kwargs); a built-in layer given kwargs is built on every task (kwargs may
  bound it in length, or change its class) and its causality compiled once (kwargs may read
  ahead: a transformer's `causal`)."""
  from ssm_bench import causality, models
  built, compiled = [], []
  monkeypatch.setattr(models, "check", lambda cfg, length=4: built.append(
      (cfg.layers, cfg.d_model, cfg.d_state)))
  monkeypatch.setattr(causality, "check_at_init", lambda cfg: compiled.append(cfg.layers) or {
      "ok": True})
  groups = sweep.plan("table2_lite", "/tmp/unused")
  networks = {(c.model, c.depth, c.d_model, c.d_state) for g, _ in groups for c in g}
  assert len(built) == len(set(built)) == len(networks) and not compiled, (
      f"{len(built)} builds ({len(set(built))} distinct) for {len(networks)} networks; "
      f"compiled {compiled[:4]}")
  built.clear()
  sweep.plan("illusion", "/tmp/unused", only="^A5-ids4-L1-",
             overrides={"layer_kwargs": '{"row_norm": true}'})
  assert built and all(b[0] == ("ids4",) for b in built) and compiled == [("ids4",)], (
      built, compiled)


def test_a_workdir_that_cannot_be_made_or_written_is_one_usage_error(tmp_path, monkeypatch):
  """Said before any run starts (as root every directory is writable, so the write check is
  reached through os.access)."""
  (tmp_path / "file").write_text("")
  with pytest.raises(sweep.common.UsageError, match="cannot create workdir"):
    sweep.check_workdir(str(tmp_path / "file" / "runs"))
  sweep.check_workdir(str(tmp_path / "ok"))
  monkeypatch.setattr(os, "access", lambda path, mode: False)
  with pytest.raises(sweep.common.UsageError, match="is not writable"):
    sweep.check_workdir(str(tmp_path / "ok"))


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
  return launcher.run(["launch.sweep", *args], timeout=600)


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
  # a group of the nine tasks padded to one order says so, not its first run's task
  assert "group 0: 9 tasks (padded to order 60) mamba depth 1 d_model 128 d_state 32 " in (
      out.stdout), out.stdout[:1000]


def test_a_dry_run_says_when_an_override_merges_the_runs_of_a_varied_axis():
  """A model the sweep does not train takes every model's runs, with a note; one it trains
  selects its own runs, with none."""
  out = run_sweep("--sweep=tiny", "--config.model=rnn", "--dry_run")
  assert out.returncode == 0, out.stderr
  assert ("--config.model=rnn replaces the tiny sweep's 2 values of model (mamba, negmamba)"
          in out.stderr), f"no note of the merged model axis in: {out.stderr!r}"
  assert out.stdout.strip().splitlines()[-1] == "tiny: 2 runs in 1 compiled group"
  own = run_sweep("--sweep=tiny", "--config.model=mamba", "--dry_run")
  assert own.returncode == 0 and "replaces" not in own.stderr, own.stderr
  assert own.stdout.strip().splitlines()[-1] == "tiny: 2 runs in 1 compiled group"


@pytest.mark.parametrize("args,needle", [
    (["--sweep=nope"], "sweep"),
    (["--sweep=tiny", "--only=("], "regular expression"),
    (["--sweep=tiny", "--workdir=/proc/forbidden"], "workdir"),
    (["--sweep=tiny", "--target=a100"], "add --dry_run"),
    (["--sweep=tiny", "--dry_run", "--target=a10"], "unknown a10; choose from a100"),
])
def test_bad_input_is_a_one_line_error(args, needle):
  out = run_sweep(*args)
  assert out.returncode != 0
  assert "Traceback" not in out.stderr and needle in out.stderr


def test_ray_workers_get_a_memory_share_of_their_gpu_or_no_gpu():
  assert executors.worker_env(0.5)["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.450"
  assert "XLA_PYTHON_CLIENT_ALLOCATOR" not in executors.worker_env(1.0), "platform allocator is slow"
  assert executors.worker_env(0.0)["JAX_PLATFORMS"] == "cpu"


def test_a_ray_worker_finds_modules_from_the_drivers_directory(monkeypatch, tmp_path):
  """A plugin module found from where the sweep was started (python -m puts it on sys.path)
  must be importable on a worker too: the driver's directory leads the workers' PYTHONPATH."""
  monkeypatch.chdir(tmp_path)
  monkeypatch.setenv("PYTHONPATH", "/elsewhere")
  path = executors.worker_env(0.0)["PYTHONPATH"].split(os.pathsep)
  assert path == [str(tmp_path), "/elsewhere"], path


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


def test_a_sweep_refuses_in_one_line_a_run_another_process_is_training(tmp_path):
  """A second launch of a running sweep stops at the first run the first launch holds, in one
  line, instead of training it again beside it (or a traceback, as a RunError was)."""
  from ssm_bench import rundir
  held = sweep.plan("tiny", str(tmp_path))[0][1][0]
  with rundir.training_lock([held]):
    out = launcher.run(["launch.sweep", "--sweep=tiny", f"--workdir={tmp_path}", "--quiet"],
                       env={**os.environ, "SSM_BENCH_LOCK_WAIT_S": "0.3"}, timeout=300)
  errors = [line for line in out.stderr.splitlines() if line.strip()]
  assert out.returncode == 2 and len(errors) == 1, f"exit {out.returncode}: {out.stderr[-1500:]}"
  assert errors[0] == (f"error: {held} is being trained by another process; wait for it to "
                       "finish (or stop it: its checkpoints resume), or use another workdir")
  assert not os.listdir(held), "the refused launch wrote into the held run"


def test_worker_processes_stop_the_sweep_on_a_directory_holding_another_run(tmp_path, tiny_local):
  groups = sweep.plan("tiny", str(tmp_path))
  import shutil  # the first run's directory now holds another run's summary
  other = sorted(os.listdir(tiny_local))[-1]
  shutil.copytree(os.path.join(tiny_local, other), groups[0][1][0])
  with pytest.raises(runs.RunError, match="already holds a different run"):
    executors.processes(groups[:1], workers=2)


@processes.RAY_FORKS
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


def test_a_deadline_starts_no_group_the_longest_so_far_would_not_finish(monkeypatch):
  """Groups of 10 s against an end at 25 s: two train, the third is not started; the first
  group starts even when the end has already passed."""
  now = [0.0]
  trained = []

  def train_group(cfgs, dirs, progress=None, **_):
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


def test_a_deadline_reckons_with_the_longest_group_so_far_not_the_first(monkeypatch):
  """Groups of 5, 15 and 5 s against an end at 30 s: after the 15 s group (at 20 s) the longest
  so far would end at 35 s, so the third is not started."""
  now, trained = [0.0], []
  length = {"g0": 5, "g1": 15, "g2": 5}

  def train_group(cfgs, dirs, progress=None, **_):
    trained.append(dirs[0])
    now[0] += length[dirs[0]]

  monkeypatch.setattr(runs, "train_group", train_group)
  monkeypatch.setattr(runs, "unfinished", lambda dirs: len(list(dirs)))
  with pytest.raises(executors.TimeUp) as stop:
    executors.local([([None], [g]) for g in length],
                    deadline=executors.Deadline(30.0, clock=lambda: now[0]))
  assert trained == ["g0", "g1"] and stop.value.groups_left == 1, (
      f"trained {trained}: the deadline did not keep the longest group's time")


def test_the_local_executor_sizes_each_group_just_before_it_trains(monkeypatch):
  """A session cut short must not compile (to size) the groups it never reaches: sizing comes
  group by group, counts in the group's time against the deadline, and a group split in two
  trains as two programs that the progress counts."""
  import io
  now, events = [0.0], []

  def train_group(cfgs, dirs, progress=None, **_):
    events.append(("train", tuple(dirs)))
    now[0] += 10

  def fit(groups):
    ((cfgs, dirs),) = groups  # one group at a time
    events.append(("size", dirs[0]))
    now[0] += 5
    return [(cfgs[:1], dirs[:1]), (cfgs[1:], dirs[1:])] if len(dirs) > 1 else groups

  monkeypatch.setattr(runs, "train_group", train_group)
  monkeypatch.setattr(runs, "unfinished", lambda dirs: len(list(dirs)))
  cfg = type("Cfg", (), {"task": "C2", "model": "mamba", "depth": 1, "steps": 1})
  groups = [([cfg, cfg], ["a0", "a1"]), ([cfg], ["b0"]), ([cfg], ["c0"])]
  out = io.StringIO()
  bar = progress.Progress(3, 4, stream=out)
  with pytest.raises(executors.TimeUp) as stop:
    executors.local(groups, progress=bar, fit=fit,
                    deadline=executors.Deadline(45.0, clock=lambda: now[0]))
  assert events == [("size", "a0"), ("train", ("a0",)), ("train", ("a1",)),
                    ("size", "b0"), ("train", ("b0",))], (
      f"groups sized up front or in another order: {events}")
  assert stop.value.groups_left == 1, "group c0 should be left for the next launch"
  assert "[3/4 groups, 3/4 runs]" in out.getvalue(), f"the split is not counted:\n{out.getvalue()}"


def test_a_split_part_whose_runs_all_finished_is_not_trained(monkeypatch):
  """A group resumed after a split: the part whose runs finished in the last launch is left
  out (no compile, no progress count); only the other part trains."""
  trained = []
  monkeypatch.setattr(runs, "train_group", lambda cfgs, dirs, progress=None, **_: trained.append(dirs))
  monkeypatch.setattr(runs, "unfinished", lambda dirs: sum(d != "a0" for d in dirs))
  fit = lambda groups: [(c[:1], d[:1]) for c, d in groups] + [(c[1:], d[1:]) for c, d in groups]
  executors.local([([None, None], ["a0", "a1"])], fit=fit)
  assert trained == [["a1"]], f"trained {trained}: a finished part was trained again"


def test_a_sweep_on_one_device_sizes_no_group_it_does_not_reach(tmp_path, monkeypatch):
  """The sweep hands its memory fit to the executor: with a time limit that lets one group
  start, only that group's program is compiled to size it."""
  import time
  from absl import flags
  from ssm_bench import memory
  sized, trained = [], []
  monkeypatch.setattr(memory, "_program_bytes", 
                      lambda cfg, k, device=None: sized.append(cfg.model) or 1.0)
  monkeypatch.setattr(runs, "train_group", lambda cfgs, dirs, progress=None, **_:
                      trained.append(cfgs[0].model) or time.sleep(0.1))  # past the limit
  monkeypatch.delenv(sweep.DEADLINE_ENV, raising=False)
  argv = ["sweep", "--sweep=tiny", f"--workdir={tmp_path}", "--memory_gb=1", "--stall_s=0",
          "--time_limit_s=0.001", "--quiet"]
  try:
    flags.FLAGS(argv, known_only=True)
    sweep.main([])
  finally:
    flags.FLAGS.unparse_flags()
  assert trained == ["mamba"], trained
  assert sized == ["mamba"], f"groups sized that never trained: {sized}"


def test_cli_time_limit_stops_between_groups_and_the_same_command_resumes(tmp_path):
  """An end already past (as a watchdog restart inherits it) lets one group start, with one
  worker process or two; the message says so, and the same command finishes the sweep."""
  env = {**os.environ, sweep.DEADLINE_ENV: "0"}
  for workers, workdir in ((1, tmp_path / "one"), (2, tmp_path / "two")):
    args = ["--sweep=tiny", f"--workdir={workdir}", "--time_limit_s=600", f"--workers={workers}",
            "--quiet"]
    first = launcher.run(["launch.sweep", *args], timeout=600, env=env)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "stopped at the time limit" in first.stdout and "1 group(s)" in first.stdout, (
        f"workers={workers}: " + first.stdout[-1000:])
    assert sweep.finished_count(sweep.plan("tiny", str(workdir))) == 2, f"workers={workers}"
  second = run_sweep(*args)  # (resuming is the same code whatever the workers)
  assert second.returncode == 0 and "stopped" not in second.stdout, second.stdout[-1000:]
  assert sweep.finished_count(sweep.plan("tiny", str(workdir))) == 4


def test_a_dry_run_for_a_gpu_target_compiles_for_it_in_its_usable_memory(tmp_path, monkeypatch,
                                                                         capsys):
  """`--dry_run --target=rtx_4090` plans every program on that GPU's compile-only device, traced
  with the GPU's choices, in 75% of its 24 GB; --memory_gb still wins. (The device is this CPU
  standing in: CI has no CUDA plugin.)"""
  import contextlib
  import jax
  from absl import flags
  from launch import bench_compiled
  from ssm_bench import memory
  stand_in, seen = jax.devices()[0], []
  monkeypatch.setattr(bench_compiled, "target_device", lambda target: stand_in)
  monkeypatch.setattr(bench_compiled, "as_gpu", lambda target: contextlib.nullcontext(
      seen.append(("traced for", target))))
  monkeypatch.setattr(memory, "_program_bytes",
                      lambda cfg, k, device=None: seen.append(device) or 2 ** 30)
  for extra, fits in (([], "fit 18.0 GiB"), (["--memory_gb=20"], "fit 20.0 GiB")):
    monkeypatch.setattr(memory, "_CACHE", {})
    try:
      flags.FLAGS(["sweep", "--sweep=tiny", f"--workdir={tmp_path}", "--dry_run",
                   "--target=rtx_4090", *extra], known_only=True)
      sweep.main([])
    finally:
      flags.FLAGS.unparse_flags()
    out = capsys.readouterr().out
    assert "planned for rtx_4090" in out and fits in out, out
  assert seen and all(s in (stand_in, ("traced for", "rtx_4090")) for s in seen), seen
  assert seen.count(stand_in) == 8, f"2 groups x (K = 1, 2) x 2 plans on the target: {seen}"


def test_a_resumed_sweep_measures_and_trains_only_its_unfinished_groups(tmp_path, monkeypatch):
  """A relaunch on a fresh GPU machine must not compile a finished group's program to size it."""
  from ssm_bench import memory
  measured = []
  monkeypatch.setattr(memory, "_program_bytes", 
                      lambda cfg, k, device=None: measured.append(cfg.model) or 1.0)
  groups = sweep.plan("tiny", str(tmp_path))
  assert [cfgs[0].model for cfgs, _ in groups] == ["mamba", "negmamba"]
  for k, (c, d) in enumerate(zip(*groups[0])):
    finish_with(c, d, 0, status="diverged" if k == 0 else "done")  # diverged is finished too
  fit = lambda gs: sweep.fit_to_memory(gs, 2 ** 30)
  assert sweep.to_train(groups, fit) == groups[1:] and measured == ["negmamba"], measured
  assert sweep.to_train(groups) == groups[1:] and measured == ["negmamba"], (
      "a sweep without a memory budget measured a group")
  # a group split to fit: the part whose runs all finished is not trained again
  (cfgs, dirs), = groups[1:]
  finish_with(cfgs[0], dirs[0], 0)
  halves = lambda gs: [([c], [d]) for g in gs for c, d in zip(*g)]
  assert sweep.to_train(groups[1:], halves) == [([cfgs[1]], [dirs[1]])], (
      "a split group's finished part is trained again")


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
