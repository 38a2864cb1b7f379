"""A researcher's code that raised, said in one line: the error, and where in their code it was.

The suite turns a plugin's failure (its import, its layer's build, its construction, its class or
width function) into one `error:` line, never a traceback. So that line names the innermost
frame of the researcher's own code (the plugin's module, not jax's, flax's or the suite's) where
the error passed, which is usually the line to fix; for a built-in layer, the suite's own frame.
With SSM_BENCH_TRACEBACK=1 in the environment the whole traceback is printed to stderr first.
"""
from __future__ import annotations

import os
import sys
import sysconfig
import traceback

ENV = "SSM_BENCH_TRACEBACK"
_SUITE = tuple(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), d) + os.sep
               for d in ("ssm_bench", "tasks", "launch"))
# the standard library and installed packages (jax, flax, numpy, ...): never the frame to fix
# (a plugin installed as a package, not in editable mode, is among them: its frames go unnamed)
_LIBRARIES = tuple(dict.fromkeys(os.path.abspath(p) + os.sep for k in ("stdlib", "platstdlib",
                                                                      "purelib", "platlib")
                                 if (p := sysconfig.get_paths().get(k))))


def origin(e: BaseException) -> str:
  """'path:line in function' of the innermost frame the error passed in the researcher's code
  (the suite's own where none is theirs); '' where every frame is a library's."""
  theirs = ours = None
  for frame in traceback.extract_tb(e.__traceback__):
    path = os.path.abspath(frame.filename)
    if frame.filename.startswith("<"):
      continue
    if path.startswith(_SUITE):  # (before the libraries: the suite may be installed among them)
      ours = frame
    elif not path.startswith(_LIBRARIES):
      theirs = frame
  frame = theirs or ours
  if frame is None:
    return ""
  path = os.path.abspath(frame.filename)
  shown = os.path.relpath(path) if path.startswith(os.getcwd() + os.sep) else path
  return f"{shown}:{frame.lineno} in {frame.name}"


def one_line(e: BaseException, limit: int = 300) -> str:
  """'Type: message (at path:line in function)' on one line, the message cut at `limit`
  characters; with SSM_BENCH_TRACEBACK=1 the traceback goes to stderr first."""
  printed = os.environ.get(ENV, "") not in ("", "0")
  if printed:
    traceback.print_exception(e, file=sys.stderr)
  where = origin(e)
  text = " ".join(f"{type(e).__name__}: {e}".split())[:limit]
  hint = "" if printed else f"; {ENV}=1 prints the traceback"
  return text + (f" (at {where}{hint})" if where else "")
