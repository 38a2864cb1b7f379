# Before anything else an entry point imports (jax takes seconds): a Ctrl-C from the first
# line on stops the command with one line (launch/interrupts.py). Only where a launch module
# runs as `python -m` (argv[0] is "-m" while its package imports, as the docs of -m say): an
# interpreter that imports launch for its functions (a notebook, pytest) keeps its own hooks.
import sys as _sys

if _sys.argv[:1] == ["-m"]:
  from launch import interrupts as _interrupts
  _interrupts.install()
  _interrupts.defer_until_armed()
