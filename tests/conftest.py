"""One compilation cache per test run, shared by its workers and the entry points they launch;
modules marked heavy run first.

Fresh each run, never the user's ~/.cache/ssm-bench: a test run on this machine then costs what it
costs on a fresh CI machine, and no entry left by an older checkout can answer for the code under
test. Shared within the run, so the many tests that train the same tiny programs (in process or
through `python -m launch...`) compile each one once.

Compiled lighter than users' programs where jax has only its CPU backend and XLA_FLAGS names no
level (`TESTS_COMPILE`): LLVM's lowest level, XLA's older loop emitters for fusions and one LLVM
module per program (no split for parallel codegen, which two busy workers only pay for). The same
HLO and fusions as users' programs, with machine code that takes about half the time to generate
and rounds like another machine's (BUILD_NOTES, "Tests and CI"; test_models checks each layer's
training step against `USERS_COMPILE`). It also rounds two equal programs (a layout, a group of
one) differently where users' compile gives the same bits: tests that compare two programs bit
for bit compile both with `USERS_COMPILE`. With an accelerator plugin installed the tests compile
as users do.
"""
import importlib.metadata
import os
import re
import shutil
import tempfile

import compile_profile
from launch import common

_OWNED = []  # the directory this process made, removed when it ends
# XLA's options for the tests' compiles, and the defaults users' programs compile with
TESTS_COMPILE = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False,
                 "xla_cpu_parallel_codegen_split_count": 1}
USERS_COMPILE = {"xla_backend_optimization_level": 3, "xla_cpu_use_fusion_emitters": True}


def tests_compile_flags() -> list[str]:
  """`TESTS_COMPILE` as XLA_FLAGS entries."""
  return [f"--{k}={str(v).lower()}" for k, v in TESTS_COMPILE.items()]


def accelerator_plugins() -> list[str]:
  """jax's installed GPU/TPU plugins, found without starting a backend (XLA_FLAGS is read then)."""
  names = (d.metadata["Name"] or "" for d in importlib.metadata.distributions())
  return sorted(n for n in names if re.match(r"(jax[-_](cuda|rocm)|libtpu)", n, re.I))


def pytest_configure(config):
  if "PYTEST_XDIST_WORKER" not in os.environ:  # the controller (or the only process with -n 0)
    path = tempfile.mkdtemp(prefix="ssm-bench-test-xla-")
    os.environ["SSM_BENCH_CACHE"] = path  # inherited by the workers and every subprocess
    # every program stored: launches recompile the same small ones (7-8% of a launch-heavy module)
    os.environ["SSM_BENCH_CACHE_MIN_S"] = "0"
    _OWNED.append(path)
    flags = os.environ.get("XLA_FLAGS", "")
    # before any backend starts; workers and subprocesses inherit it
    if "--xla_backend_optimization_level" not in flags and not accelerator_plugins():
      os.environ["XLA_FLAGS"] = " ".join([flags] + tests_compile_flags()).strip()
  common.enable_compilation_cache()
  compile_profile.register(config)  # SSM_BENCH_COMPILE_PROFILE=DIR: jax's time per test


def pytest_unconfigure(config):
  for path in _OWNED:
    shutil.rmtree(path, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
  """Modules marked `heavy` first, each keeping its own order (a stable sort). xdist's loadscope
  hands modules to the two workers in this order (setup.cfg: --no-loadscope-reorder; its own
  reorder, by number of tests, left the few-test fault module for last, one worker busy for
  ~110 s after the other was done)."""
  items.sort(key=lambda item: item.get_closest_marker("heavy") is None)
