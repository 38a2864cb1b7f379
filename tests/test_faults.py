"""Fault injection: a real sweep SIGKILLed at many moments finishes with nothing lost or doubled.

Each launch gets SSM_BENCH_FAULT=<point>:<n> (ssm_bench/faults.py: the process SIGKILLs itself the
n-th time it reaches that point) or is SIGKILLed from outside after a delay (during start-up,
tracing or compilation). Progress accumulates in one workdir; then plain launches finish it.
"""
import glob
import json
import os
import signal
import subprocess
import sys

import pytest

import launcher
import processes
from ssm_bench import rundir
from ssm_bench import runs

pytestmark = pytest.mark.heavy  # a minute or more in all: scheduled first (conftest.py)

# 2 shape groups x 2 runs, 10 chunks of 10 steps, a checkpoint every 2 chunks.
SWEEP = ["--sweep=tiny", "--config.steps=100", "--config.checkpoint_every=20", "--quiet"]
STEPS = list(range(10, 101, 10))
# Ordered so that each kill lands before the sweep can finish: early points first, then points
# that keep a little progress (a checkpoint, a summary), then the second group's.
FAULTS = ["after:1.0", "group_start:1", "chunk:1", "metrics:2", "checkpoint_save:1",
          "checkpoint_done:1", "after:3.5", "chunk:3", "eval:1", "summary_write:1",
          "summary_done:1", "group_start:2", "checkpoint_save:2", "eval:2"]


def launch(workdir, env, fault=None):
  args = ["launch.sweep", *SWEEP, f"--workdir={workdir}"]
  if not (fault and fault.startswith("after:")):
    # The in-process faults kill the sweep itself; the watchdog's supervisor process around it
    # would only add a start-up per launch (it has its own tests in test_sweep.py).
    env = dict(env, SSM_BENCH_FAULT=fault) if fault else env
    out = launcher.run([*args, "--stall_s=0"], env=env, timeout=300)
    return out.returncode, out.stdout, out.stderr
  # killed from outside: the supervisor (a process of its own, whose command line names the
  # workdir), whose child must die with it
  p = subprocess.Popen([sys.executable, "-m", *args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, env=env)
  try:
    out, err = p.communicate(timeout=float(fault.split(":")[1]))
  except subprocess.TimeoutExpired:
    p.send_signal(signal.SIGKILL)
    p.wait()
    # PDEATHSIG acts at once; the sweep itself needs longer to go
    left = processes.running_with(f"--workdir={workdir}", wait_s=5)
    assert not left, f"{fault}: the sweep went on after its supervisor was killed: pids {left}"
    out, err = p.communicate()
  return p.returncode, out, err


def table(workdir):
  out = launcher.run(["launch.tables", f"--runs={workdir}", "--format=json"], timeout=300)
  assert out.returncode == 0, out.stderr
  data = json.loads(out.stdout)
  data.pop("problems")
  return data


@pytest.fixture(scope="module")
def env(tmp_path_factory):
  # its own compilation cache, not the test run's: where a timed kill lands (start-up, tracing,
  # compilation) must not depend on which tests happened to compile these programs before
  return {**os.environ, "SSM_BENCH_CACHE": str(tmp_path_factory.mktemp("xla-cache"))}


def test_sigkilled_sweep_finishes_with_every_run_once(tmp_path, env):
  reference, faulty = tmp_path / "reference", tmp_path / "faulty"
  rc, _, err = launch(reference, env)
  assert rc == 0, err
  kills = []
  for fault in FAULTS:
    rc, _, err = launch(faulty, env, fault)
    assert rc in (0, -signal.SIGKILL), f"{fault}: exit {rc}\n{err[-2000:]}"
    assert "Traceback" not in err, f"{fault}: a launch failed instead of being killed\n{err}"
    if rc == -signal.SIGKILL:
      kills.append(fault)
  print(f"{len(kills)} kills: {kills}")
  assert len(set(kills)) >= 13, f"only {len(kills)} kills landed: {kills}"
  for _ in range(3):  # plain relaunches until the sweep is done
    rc, out, err = launch(faulty, env)
    assert rc == 0, err
    if "groups already finished" in out and "4 runs in 2 groups; 2 groups" in out:
      break

  names = sorted(os.listdir(reference))
  assert sorted(os.listdir(faulty)) == names, "the killed sweep has other run directories"
  for name in names:
    d = str(faulty / name)
    s = runs.read_summary(d)
    assert s is not None and runs.validate_summary(s) == [], f"{name}: no valid summary"
    assert s["status"] == "done", f"{name}: {s['status']} {s.get('error')}"
    steps = [r["step"] for r in rundir.read_metrics(d)]
    assert steps == STEPS, f"{name}: metric steps {steps} (lost or counted twice)"
    with open(os.path.join(d, "metrics.jsonl")) as f:
      assert all(json.loads(line) for line in f), f"{name}: a cut metrics line survived"
    leftovers = glob.glob(os.path.join(d, "*.tmp-*")) + glob.glob(
        os.path.join(d, "checkpoints", "*tmp*"))
    assert not leftovers, f"{name}: half-written files left: {leftovers}"
  assert table(faulty) == table(reference), "tables differ from the uninterrupted sweep"


def finished_tiny_run(tmp_path):
  from ssm_bench.config import PRESETS, TrainConfig
  cfg = TrainConfig(**{**PRESETS["tiny"], "steps": 40, "checkpoint_every": 20})
  d = str(tmp_path / "run")
  [s] = runs.train_group([cfg], [d])
  return cfg, d, s


def test_a_group_that_fails_is_recorded_failed_and_the_sweep_exits_1(tmp_path, env):
  """A group whose program raises (out of memory, a plugin's bug) does not stop the sweep: its
  runs say 'failed', the other group trains, the table is printed, and the exit status is 1 so
  that a script or a job scheduler sees it; the same command then trains the failed runs."""
  code, out, err = launch(tmp_path, env, "chunk:1:raise")  # the first group, at its first chunk
  statuses = sorted(runs.read_summary(d)["status"] for d in glob.glob(f"{tmp_path}/*/"))
  assert statuses == ["done", "done", "failed", "failed"], statuses
  assert code == 1, f"a sweep with a failed group exited {code}\n{err[-2000:]}"
  assert "1 groups failed; their runs are recorded with status 'failed'" in err, err[-2000:]
  assert "| C2 |" in out, f"no table printed:\n{out}"
  code, out, err = launch(tmp_path, env)
  assert code == 0, err[-2000:]
  assert [runs.read_summary(d)["status"] for d in glob.glob(f"{tmp_path}/*/")] == ["done"] * 4


def test_truncated_summary_and_config_are_recovered(tmp_path):
  cfg, d, first = finished_tiny_run(tmp_path)
  for name in ("summary.json", "config.json"):
    path = os.path.join(d, name)
    text = open(path).read()
    open(path, "w").write(text[: len(text) // 2])
  assert runs.read_summary(d) is None, "a truncated summary must not count as a result"
  [again] = runs.train_group([cfg], [d])
  assert again["status"] == "done" and again["acc_curve"] == first["acc_curve"]
  assert json.load(open(os.path.join(d, "config.json")))["seed"] == cfg.seed
  assert [r["step"] for r in rundir.read_metrics(d)] == [10, 20, 30, 40]


def test_corrupt_checkpoint_falls_back_and_is_reported(tmp_path, capfd):
  cfg, d, first = finished_tiny_run(tmp_path)
  os.remove(os.path.join(d, "summary.json"))
  latest = os.path.join(d, "checkpoints", "40")
  for path in glob.glob(os.path.join(latest, "**", "*"), recursive=True):
    if os.path.isfile(path):
      open(path, "wb").write(b"garbage")
  [again] = runs.train_group([cfg], [d])
  assert "checkpoint at step 40 is unreadable" in capfd.readouterr().err
  assert again["status"] == "done" and again["steps"] == 40
  assert again["acc_curve"] == first["acc_curve"], "resuming from step 20 changed the result"
  assert [r["step"] for r in rundir.read_metrics(d)] == [10, 20, 30, 40]
  mgr = rundir.checkpointer(d)
  try:  # the garbage was replaced by the resumed run's own step 40, not kept beside it
    mgr.restore(40)
  except Exception as e:
    pytest.fail(f"the unreadable checkpoint at step 40 is still there after the rerun: {e!r:.200}")
  finally:
    mgr.close()


def test_a_full_disk_at_the_summary_leaves_no_result_and_relaunch_finishes(tmp_path, monkeypatch):
  """ENOSPC while the summary is written: no summary (nothing a table could read), the error
  propagates, and a relaunch with space again finishes the run."""
  from ssm_bench.config import PRESETS, TrainConfig
  cfg = TrainConfig(**{**PRESETS["tiny"], "steps": 20})
  d = str(tmp_path / "run")
  real = rundir.write_json_atomic

  def full(path, obj, point=None):
    if path.endswith("summary.json"):
      raise OSError(28, "No space left on device", path)
    return real(path, obj, point)
  monkeypatch.setattr(rundir, "write_json_atomic", full)
  with pytest.raises(OSError, match="No space left"):
    runs.train_group([cfg], [d])
  assert runs.read_summary(d) is None and not os.path.exists(os.path.join(d, "summary.json"))
  assert not glob.glob(os.path.join(d, "*.tmp-*")), "a temporary summary was left behind"
  monkeypatch.setattr(rundir, "write_json_atomic", real)
  [s] = runs.train_group([cfg], [d])
  assert s["status"] == "done" and s["steps"] == cfg.steps


@processes.RAY_FORKS
def test_a_ray_worker_killed_mid_group_is_a_failed_group_and_relaunch_finishes(tmp_path,
                                                                               monkeypatch):
  pytest.importorskip("ray")
  import ray
  from launch import executors
  from launch import sweep
  groups = sweep.plan("tiny", str(tmp_path))[:1]
  monkeypatch.setenv("SSM_BENCH_FAULT", "chunk:1")  # every attempt's worker dies at its first chunk
  try:
    assert executors.ray(groups, max_retries=0) == 1, "a killed worker must count as a failure"
  finally:
    ray.shutdown()
  assert all(runs.read_summary(d) is None for d in groups[0][1]), "a killed group left a result"
  monkeypatch.delenv("SSM_BENCH_FAULT")
  executors.local(groups)
  assert all(runs.read_summary(d)["status"] == "done" for d in groups[0][1])
