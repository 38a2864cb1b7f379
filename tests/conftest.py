"""One compilation cache per test run, shared by its workers and the entry points they launch;
modules marked heavy run first.

Fresh each run, never the user's ~/.cache/ssm-bench: a test run on this machine then costs what it
costs on a fresh CI machine, and no entry left by an older checkout can answer for the code under
test. Shared within the run, so the many tests that train the same tiny programs (in process or
through `python -m launch...`) compile each one once.

Compiled at LLVM's lowest level (`--xla_backend_optimization_level=0`) where jax has only its CPU
backend and XLA_FLAGS names no level: the same HLO as users' programs, fusions and buffers
included, with machine code that takes a third less time to generate and rounds like another
machine's (BUILD_NOTES, "Tests and CI"; test_models checks each layer's training step against the
default level). With an accelerator plugin installed the tests compile as users do.
"""
import importlib.metadata
import os
import re
import shutil
import tempfile

from launch import common

_OWNED = []  # the directory this process made, removed when it ends
OPT_LEVEL = "--xla_backend_optimization_level"


def accelerator_plugins() -> list[str]:
  """jax's installed GPU/TPU plugins, found without starting a backend (XLA_FLAGS is read then)."""
  names = (d.metadata["Name"] or "" for d in importlib.metadata.distributions())
  return sorted(n for n in names if re.match(r"(jax[-_](cuda|rocm)|libtpu)", n, re.I))


def pytest_configure(config):
  if "PYTEST_XDIST_WORKER" not in os.environ:  # the controller (or the only process with -n 0)
    path = tempfile.mkdtemp(prefix="ssm-bench-test-xla-")
    os.environ["SSM_BENCH_CACHE"] = path  # inherited by the workers and every subprocess
    _OWNED.append(path)
    flags = os.environ.get("XLA_FLAGS", "")
    # before any backend starts; workers and subprocesses inherit it
    if OPT_LEVEL not in flags and not accelerator_plugins():
      os.environ["XLA_FLAGS"] = f"{flags} {OPT_LEVEL}=0".strip()
  common.enable_compilation_cache()


def pytest_unconfigure(config):
  for path in _OWNED:
    shutil.rmtree(path, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
  """Modules marked `heavy` first, each keeping its own order (a stable sort). xdist's loadscope
  hands modules to the two workers in this order (setup.cfg: --no-loadscope-reorder; its own
  reorder, by number of tests, left the few-test fault module for last, one worker busy for
  ~110 s after the other was done)."""
  items.sort(key=lambda item: item.get_closest_marker("heavy") is None)
