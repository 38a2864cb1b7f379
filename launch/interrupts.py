"""Ctrl-C in the entry points, from their first line: `python -m launch.X` installs these hooks
as it imports the package (launch/__init__.py), so a Ctrl-C during start-up (importing jax takes a second or two) is neither lost nor a traceback.

Two ways a Ctrl-C went wrong before the entry point's own handler (`common.run_main`) ran:
jax's garbage-collection callback (run often while modules import) swallowed it as an
"Exception ignored" and the command trained on (3 of 4 Ctrl-Cs sent 0.3-1.2 s after
`launch.train` started, 2026-12-06); or it landed in an import and printed a traceback.
"""
from __future__ import annotations

import os
import sys

INTERRUPTED = "interrupted: finished runs and checkpoints are kept; the same command resumes"


def install():
  """The hooks below, for this process (idempotent)."""
  sys.unraisablehook = _redeliver_lost_interrupt
  sys.excepthook = _interrupted_line


def _interrupted_line(exc_type, exc, tb, default=sys.excepthook):
  """sys.excepthook: a KeyboardInterrupt that reached the top (one before the entry point's
  main, which handles its own) ends as `run_main` ends one: the line and status 130."""
  if not issubclass(exc_type, KeyboardInterrupt):
    return default(exc_type, exc, tb)
  print(INTERRUPTED, file=sys.stderr)
  sys.stderr.flush()
  os._exit(130)  # without the interpreter's teardown, as run_main (XLA's threads may be busy)


def _redeliver_lost_interrupt(unraisable, default=sys.unraisablehook):
  """sys.unraisablehook: a Ctrl-C that lands while a finalizer (`weakref.finalize`, `__del__`)
  runs is a KeyboardInterrupt Python cannot raise; it would print "Exception ignored ...
  Traceback" and drop the Ctrl-C (a sweep then trains on until its supervisor kills it).
  Interrupt the main thread again instead, silently, from a thread that waits until the main
  thread has left this hook: an interrupt raised in the hook would be dropped the same way
  (a fixed 10 ms delay lost it when the main thread was descheduled inside the hook)."""
  if issubclass(unraisable.exc_type, KeyboardInterrupt):
    import threading
    threading.Thread(target=_interrupt_main_once_out_of, args=(sys._getframe(),),
                     daemon=True).start()
    return
  default(unraisable)


def _interrupt_main_once_out_of(hook_frame):
  import contextlib
  import signal
  import threading
  import time
  main = threading.main_thread().ident

  def in_hook():
    frame = sys._current_frames().get(main)
    while frame is not None and frame is not hook_frame:
      frame = frame.f_back
    return frame is not None
  while in_hook():
    time.sleep(0.005)
  with contextlib.suppress(ProcessLookupError):  # the main thread may have ended meanwhile
    signal.pthread_kill(main, signal.SIGINT)  # a real signal, so a blocking call wakes up too
