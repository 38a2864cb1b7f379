"""Restart a local sweep whose process stops making progress; stop it for sure on Ctrl-C.

A CPU sweep hung nine times at a group's start (results/pilots.md, "Incidents": a deadlock in
jaxlib's batched CPU QR, since avoided): no in-process timer can cancel a running XLA program.
So the sweep runs as a child process that touches a heartbeat file at every progress event
(a group starting, a chunk of steps, a group done). When the file is older than `stall_s`
the child is killed and launched again with the same arguments; like any relaunch it skips the
finished runs and resumes the others from their checkpoints.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings

from launch import common

ENV = "SSM_BENCH_HEARTBEAT"  # set in the child: the file it touches, and "do not supervise"
# A clean stop waits for a checkpoint save in flight: seconds. Past this, the child is killed.
STOP_GRACE_S = 30.0


def beat():
  path = os.environ.get(ENV)
  if path:
    with open(path, "a"):
      os.utime(path)


def supervised() -> bool:
  return ENV in os.environ


def die_with_parent():
  """In the child: SIGKILL when the supervisor dies (Linux), so killing the sweep kills it all."""
  try:
    import ctypes
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
  except (OSError, AttributeError):
    pass


def spawn(args: list[str], **kwargs) -> subprocess.Popen:
  """`python -m launch.sweep *args` as a child that dies with this process (`die_with_parent`).
  Fork-then-exec at once: jax's warning about forking a threaded process (this one has jax
  started when it checked a plugin's layer) does not apply, so it is not printed."""
  warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called")
  return subprocess.Popen([sys.executable, "-m", "launch.sweep", *args],
                          preexec_fn=die_with_parent, **kwargs)


def exit_like(rc: int):
  """Exit as the child did: killed by a signal, this process dies by the same signal (what a
  caller of an unsupervised sweep would see); otherwise with its exit status."""
  if rc < 0:
    try:
      signal.signal(-rc, signal.SIG_DFL)
    except (OSError, ValueError):  # SIGKILL and SIGSTOP cannot be caught anyway
      pass
    os.kill(os.getpid(), -rc)
  sys.exit(rc)


def stop(child) -> int:
  """Ctrl-C reached this process. A terminal's Ctrl-C reaches the child too and it stops cleanly
  (status 130); a SIGINT sent to this process alone is passed on. A child still running
  STOP_GRACE_S later never acted on its SIGINT (results/pilots.md, "Incidents") and is
  killed, which a sweep survives like any kill: finished runs and checkpoints are kept."""
  try:
    return child.wait(timeout=3)
  except subprocess.TimeoutExpired:
    child.send_signal(signal.SIGINT)
  grace = float(os.environ.get("SSM_BENCH_STOP_GRACE_S", STOP_GRACE_S))
  try:
    return child.wait(timeout=grace)
  except subprocess.TimeoutExpired:
    child.kill()
    child.wait()
    print(f"note: the sweep had not stopped {grace:g} s after its Ctrl-C, so it was killed",
          file=sys.stderr)  # why the stop took that long
    print(common.INTERRUPTED, file=sys.stderr)
    return 130


def supervise(args: list[str], stall_s: float, restarts: int = 5) -> int:
  """Run `python -m launch.sweep *args` until it exits; returns its exit status (negative: the
  signal that killed it)."""
  fd, path = tempfile.mkstemp(prefix="ssm-bench-heartbeat-")
  os.close(fd)
  env = {**os.environ, ENV: path}
  poll = min(5.0, stall_s / 4)
  try:
    for attempt in range(restarts + 1):
      os.utime(path)
      child = spawn(args, env=env)
      while True:
        try:
          return child.wait(timeout=poll)
        except subprocess.TimeoutExpired:
          pass
        except KeyboardInterrupt:
          return stop(child)
        if time.time() - os.path.getmtime(path) > stall_s:
          child.kill()
          child.wait()
          if attempt < restarts:
            print(f"warning: the sweep made no progress for {stall_s:g}s (a hung program); "
                  f"restarting it ({attempt + 1} of {restarts}), finished runs are kept",
                  file=sys.stderr, flush=True)
          break
    print(f"error: the sweep stalled {restarts + 1} times; stopped (finished runs are kept)",
          file=sys.stderr)
    return 1
  finally:
    os.unlink(path)
