"""Ctrl-C in the entry points, from their first line: `python -m launch.X` installs these hooks
as it imports the package (launch/__init__.py), so a Ctrl-C during start-up (importing jax takes
a second or two) is neither lost nor a traceback nor a crash.

A KeyboardInterrupt raised while modules import went wrong in four ways before the entry point's
own handler (`common.run_main`) ran, each seen here (2026-12-06):
- jax's garbage-collection callback (run often while modules import) swallowed it as an
  "Exception ignored" and the command trained on (3 of 4 Ctrl-Cs sent 0.3-1.2 s in);
- C code that calls back into Python dropped it silently: NumPy building a dtype, a Cython
  module registering its types (numpy.random): 3 of about 315 sent 0.6-3 s in under load,
  and once in CI;
- it crashed jaxlib's extension module while it loaded (SIGSEGV, 9 of 30 sent 35-75 ms in);
- it printed the import's traceback.
So until the entry point's main begins (`arm`), a Ctrl-C is only noted, and raised there.
After that it raises at once as usual; should C code drop it, `check` (called once per chunk of
training steps) raises it again.
"""
from __future__ import annotations

import os
import signal
import sys
import threading

INTERRUPTED = "interrupted: finished runs and checkpoints are kept; the same command resumes"
# received: a Ctrl-C came (seen by `_on_sigint`); armed: it raises (False only while a
# `python -m launch.X` starts, from `defer_until_armed` to `arm`)
_state = {"received": False, "armed": True}


def install():
  """The hooks below, for this process (idempotent)."""
  sys.unraisablehook = _redeliver_lost_interrupt
  sys.excepthook = _interrupted_line


def defer_until_armed():
  """Note a Ctrl-C instead of raising it, until `arm()`: for `python -m launch.X` as it starts.
  Not where SIGINT is ignored (a background job) or handled by someone else already."""
  if (threading.current_thread() is threading.main_thread()
      and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
    _state["armed"] = False
    signal.signal(signal.SIGINT, _on_sigint)


def arm():
  """From here on a Ctrl-C raises KeyboardInterrupt; one noted during start-up raises now.
  Each entry point's main calls this first (`common.run_main`, launch.worker)."""
  _state["armed"] = True
  check()


def check(*_):
  """Raise the KeyboardInterrupt of a Ctrl-C that came and was dropped (C code that calls back
  into Python clears the error); nothing otherwise. Takes and ignores `on_chunk`'s step."""
  if _state["received"] and _state["armed"]:
    raise KeyboardInterrupt


def _on_sigint(signum, frame):
  _state["received"] = True
  if _state["armed"]:
    raise KeyboardInterrupt


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
    threading.Thread(target=_interrupt_main_once_out_of, args=(sys._getframe(),),
                     daemon=True).start()
    return
  default(unraisable)


def _interrupt_main_once_out_of(hook_frame):
  import contextlib
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
