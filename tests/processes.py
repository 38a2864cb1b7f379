"""Processes for the tests: finding them by command line or parent (to check nothing was left
running), and starting commands with SIGINT at its default, as a terminal's shell would."""
import contextlib
import glob
import signal
import subprocess
import time

import pytest


def running_with(needle: str, wait_s: float = 0.0) -> list[str]:
  """Pids of live processes whose command line contains `needle`, after waiting up to wait_s
  for there to be none (Linux /proc; a process gone meanwhile is skipped)."""
  deadline = time.time() + wait_s
  while True:
    pids = []
    for path in glob.glob("/proc/[0-9]*/cmdline"):
      try:
        with open(path, "rb") as f:
          if needle.encode() in f.read():
            pids.append(path.split("/")[2])
      except OSError:
        pass
    if not pids or time.time() >= deadline:
      return pids
    time.sleep(0.2)


def children(pid: int) -> list[int]:
  """Pids of the live children of `pid` (Linux /proc; [] once it is gone)."""
  try:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
      return [int(c) for c in f.read().split()]
  except OSError:
    return []


def still_running(pids) -> list[int]:
  """Those of `pids` that still run (not gone, not a zombie waiting to be reaped)."""
  def running(pid):
    try:
      with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # the state, after the name
    except OSError:
      return False
  return [p for p in pids if running(p)]


# For tests that start Ray: it starts its own processes fork-then-exec (a preexec_fn), which
# jax's fork warning counts although no Python runs in the forked child
RAY_FORKS = pytest.mark.filterwarnings(r"ignore:os\.fork\(\) was called:RuntimeWarning")


@contextlib.contextmanager
def _sigint_at_default():
  """Commands started inside get SIGINT at its default, as a terminal's shell starts them: a
  test run started in the background inherits SIGINT ignored, and a process that starts with it
  ignored keeps it ignored (Python's rule). exec resets a handled signal to its default, so this
  process handles it meanwhile: no preexec_fn, whose fork of this threaded process (jax's
  threads) jax warns may deadlock."""
  old = signal.signal(signal.SIGINT, signal.default_int_handler)
  try:
    yield
  finally:
    signal.signal(signal.SIGINT, old)


def popen_from_a_shell(args, **kwargs) -> subprocess.Popen:
  """subprocess.Popen with SIGINT at its default in the command, whatever this process's."""
  with _sigint_at_default():
    return subprocess.Popen(args, **kwargs)


def run_from_a_shell(args, **kwargs) -> subprocess.CompletedProcess:
  """subprocess.run with SIGINT at its default in the command, whatever this process's."""
  with _sigint_at_default():
    return subprocess.run(args, **kwargs)
