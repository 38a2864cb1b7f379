"""The watchdog (launch/watchdog.py): a sweep that hangs is killed and relaunched, and resumes;
one that never progresses is given up on with one line; Ctrl-C lets a stopping child finish and
kills one that ignores it; the supervisor exits as its child did."""
import json
import os
import subprocess
import sys
import time

import pytest

from launch import sweep
from ssm_bench import runs
import launcher

pytestmark = pytest.mark.heavy  # the hung sweep: a minute or more (scheduled first, conftest.py)


def test_watchdog_restarts_a_sweep_that_hangs_and_it_finishes(tmp_path):
  """A group that hangs (as the XLA CPU runtime did: results/pilots.md, "Incidents") is killed
  after --stall_s
  without progress and the sweep relaunched; it resumes and finishes every run once."""
  env = {**os.environ, "SSM_BENCH_FAULT": "group_start:2:hang"}
  try:
    out = launcher.run(["launch.sweep", "--sweep=tiny",
                        f"--workdir={tmp_path}", "--stall_s=10", "--quiet"], env=env, timeout=150)
  except subprocess.TimeoutExpired:
    pytest.fail("the hung sweep was never restarted")
  assert out.returncode == 0, f"exit {out.returncode}:\n{out.stderr[-2000:]}"
  assert "no progress for 10s" in out.stderr, f"no restart reported:\n{out.stderr[-2000:]}"
  dirs = [d for _, ds in sweep.plan("tiny", str(tmp_path)) for d in ds]
  assert all(runs.read_summary(d)["status"] == "done" for d in dirs), "a run did not finish"
  for d in dirs:
    steps = [json.loads(l)["step"] for l in open(os.path.join(d, "metrics.jsonl"))]
    assert len(steps) == len(set(steps)), f"{d}: a step logged twice after the restart"


def test_watchdog_gives_up_after_its_restarts_with_one_line(monkeypatch, capsys):
  """A sweep that never makes progress is launched 1 + restarts times, then the supervisor
  stops with status 1 and says so (finished runs are kept)."""
  from launch import watchdog
  launched = []

  def spawn(args, **kwargs):
    launched.append(args)
    return subprocess.Popen(["sleep", "60"])

  monkeypatch.setattr(watchdog, "spawn", spawn)
  assert watchdog.supervise(["--sweep=tiny"], stall_s=0.4, restarts=2) == 1
  err = capsys.readouterr().err
  assert len(launched) == 3, f"launched {len(launched)} times, not 1 + 2 restarts"
  assert "restarting it (2 of 2)" in err and "stalled 3 times" in err, err


def test_watchdog_judges_each_launch_by_a_fresh_heartbeat_against_stall_s(monkeypatch):
  """Each launch starts with the heartbeat touched (a relaunch is not killed at once for its
  predecessor's silence), and a child is killed once the heartbeat is older than stall_s, not
  some multiple of it."""
  from launch import watchdog
  stall_s, at_spawn, at_kill = 1.0, [], []

  class Silent:  # a child that never beats
    def __init__(self, path):
      self.path, self.proc = path, subprocess.Popen(["sleep", "60"])

    def wait(self, timeout=None):
      return self.proc.wait(timeout)

    def kill(self):
      at_kill.append(time.time() - os.path.getmtime(self.path))
      self.proc.kill()

  def spawn(args, env):
    path = env[watchdog.ENV]
    at_spawn.append(time.time() - os.path.getmtime(path))
    return Silent(path)

  monkeypatch.setattr(watchdog, "spawn", spawn)
  assert watchdog.supervise(["--sweep=tiny"], stall_s=stall_s, restarts=1) == 1
  assert len(at_spawn) == 2 and max(at_spawn) < stall_s / 2, (
      f"heartbeat ages at each launch {at_spawn}: a relaunch began with a stale one")
  # polled every stall_s / 4: killed a poll past stall_s (3.5 x leaves a loaded machine slack)
  assert len(at_kill) == 2 and all(stall_s < a < 3.5 * stall_s for a in at_kill), (
      f"heartbeat ages when killed {at_kill}, with stall_s {stall_s}")


def test_watchdog_stop_lets_a_stopping_child_finish_and_kills_one_that_ignores_ctrl_c(
    monkeypatch, capsys):
  """Ctrl-C: a child stopping cleanly (saving a checkpoint) is waited for and its status kept;
  one that ignores SIGINT is killed after the grace period, reported as interrupted (130)."""
  from launch import watchdog
  stopping = subprocess.Popen([sys.executable, "-c",
                               "import time; time.sleep(1); raise SystemExit(130)"])
  assert watchdog.stop(stopping) == 130 and stopping.returncode == 130, (
      f"a child stopping on its own ended with {stopping.returncode}")
  monkeypatch.setenv("SSM_BENCH_STOP_GRACE_S", "0.5")
  deaf = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                           "signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(60)"])
  started = time.time()
  assert watchdog.stop(deaf) == 130 and deaf.returncode == -9, deaf.returncode
  # 3 s for a terminal's Ctrl-C to stop it, then the 0.5 s grace: not the default 30 s
  assert time.time() - started < 15, f"killed {time.time() - started:.0f} s after the stop"
  assert "interrupted" in capsys.readouterr().err


@pytest.mark.parametrize("rc", [-15, 3])
def test_a_supervised_sweep_exits_as_its_child_did(rc):
  """The supervisor dies by the signal that killed its child (what a caller of an unsupervised
  sweep would see), or exits with the child's status."""
  code = f"from launch import watchdog; watchdog.exit_like({rc})"
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
  assert out.returncode == rc, f"exit_like({rc}) ended with {out.returncode}: {out.stderr[-500:]}"
