"""Named crash points for fault-injection tests.

With SSM_BENCH_FAULT=<point>:<n> in the environment, the n-th time this process reaches
`point(<point>)` it SIGKILLs itself: no handler, no flush, exactly what a preempted machine or an
out-of-memory kill does. With <point>:<n>:hang it sleeps there for ever instead, as a program
stuck in the XLA runtime does (what the sweep's watchdog is for); <point>:<n>:deaf also ignores
SIGINT and says so on stderr, as a process whose Ctrl-C got lost (what the watchdog's stop
escalation is for); <point>:<n>:raise raises a RuntimeError there, as a group that runs out of
memory does (a failed group: its runs recorded 'failed', the sweep's exit status 1);
<point>:<n>:drop_sigint sends this process a SIGINT and drops the KeyboardInterrupt, as C code
that calls back into Python does (NumPy, a Cython module: what launch.interrupts.check is for).
Unset (always, outside tests) a point costs one dictionary lookup.
"""
from __future__ import annotations

import os
import signal
import sys
import time

POINTS = ("group_start", "chunk", "metrics", "checkpoint_save", "checkpoint_done", "eval",
          "summary_write", "summary_done")
_seen: dict = {}


def point(name: str):
  spec = os.environ.get("SSM_BENCH_FAULT")
  if not spec:
    return
  target, n, *action = spec.split(":")
  if target != name:
    return
  _seen[name] = _seen.get(name, 0) + 1
  if _seen[name] == int(n):
    if action == ["deaf"]:
      signal.signal(signal.SIGINT, signal.SIG_IGN)
      print(f"fault {name}: ignoring SIGINT, hanging", file=sys.stderr, flush=True)
      action = ["hang"]
    if action == ["drop_sigint"]:
      try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)  # the handler runs here
      except KeyboardInterrupt:
        pass
      return
    if action == ["raise"]:
      raise RuntimeError(f"fault {name}: raised as a failing program would")
    while action == ["hang"]:
      time.sleep(3600)
    os.kill(os.getpid(), signal.SIGKILL)
