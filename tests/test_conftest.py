"""The test run itself (tests/conftest.py): its own compilation cache and compile level, heavy modules
first."""
import os
import subprocess
import sys

import jax
import pytest

import conftest


def test_the_test_run_compiles_into_a_fresh_cache_of_its_own_not_the_users():
  path = os.environ.get("SSM_BENCH_CACHE", "")
  user = os.path.expanduser("~/.cache/ssm-bench")
  assert os.path.basename(path).startswith("ssm-bench-test-xla-") and os.path.isdir(path), (
      f"SSM_BENCH_CACHE is {path!r}: tests would reuse (and fill) a cache older than this run")
  assert not os.path.abspath(path).startswith(user), f"tests compile into the user's cache {path}"
  assert jax.config.jax_compilation_cache_dir == path, (
      f"in-process compiles go to {jax.config.jax_compilation_cache_dir!r}, not the run's cache")


def test_the_test_run_stores_every_program_and_users_only_those_over_half_a_second(monkeypatch):
  assert jax.config.jax_persistent_cache_min_compile_time_secs == 0, (
      "the test run's cache skips small programs: its launches recompile them")
  from launch import common
  updates = []
  monkeypatch.setattr(jax.config, "update", lambda *a: updates.append(a))
  monkeypatch.delenv("SSM_BENCH_CACHE_MIN_S")
  common.enable_compilation_cache()
  assert ("jax_persistent_cache_min_compile_time_secs", 0.5) in updates, updates
  monkeypatch.setenv("SSM_BENCH_CACHE_MIN_S", "soon")
  with pytest.raises(common.UsageError, match="SSM_BENCH_CACHE_MIN_S='soon': give a number"):
    common.enable_compilation_cache()


def test_ssm_bench_cache_off_leaves_the_compilation_cache_untouched(monkeypatch):
  """SSM_BENCH_CACHE=off (a read-only home, a shared machine): nothing is persisted, so no
  cache directory is set, not even the default one."""
  from launch import common
  updates = []
  monkeypatch.setattr(jax.config, "update", lambda *a: updates.append(a))
  monkeypatch.setenv("SSM_BENCH_CACHE", "off")
  common.enable_compilation_cache()
  assert updates == [], f"SSM_BENCH_CACHE=off still set {updates}"


def test_the_test_run_compiles_lighter_than_users_on_a_cpu_only_install():
  flags = os.environ.get("XLA_FLAGS", "")
  if conftest.accelerator_plugins():
    pytest.skip(f"accelerator plugins {conftest.accelerator_plugins()}: compiled as users do")
  missing = [flag for flag in conftest.tests_compile_flags() if flag not in flags.split()]
  assert not missing, (
      f"XLA_FLAGS is {flags!r}: the tests (and the entry points they start) compile without "
      f"{missing}, as users' programs do: about twice the time (BUILD_NOTES, \"Tests and CI\")")


@pytest.mark.parametrize("installed,want", [
    (["jax", "jaxlib", "numpy"], []),
    (["jax", "jax-cuda13-plugin", "jax-cuda13-pjrt"], ["jax-cuda13-pjrt", "jax-cuda13-plugin"]),
    (["jax", "jax_rocm60_plugin"], ["jax_rocm60_plugin"]), (["jax", "libtpu"], ["libtpu"])])
def test_accelerator_plugins_are_found_by_their_distribution_names(monkeypatch, installed, want):
  fake = [type("Dist", (), {"metadata": {"Name": n}})() for n in installed]
  monkeypatch.setattr(conftest.importlib.metadata, "distributions", lambda: fake)
  assert conftest.accelerator_plugins() == want, f"{installed}: the plugins found are not {want}"


def test_heavy_modules_are_handed_out_first(request):
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  # a light module named first on the command line, a heavy one second
  out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0",
                        "tests/test_groups.py", "tests/test_faults.py"], cwd=root,
                       capture_output=True, text=True, timeout=300)
  ids = [line for line in out.stdout.splitlines() if "::" in line]
  assert ids, out.stdout[-2000:] + out.stderr[-2000:]
  assert ids[0].startswith("tests/test_faults.py"), (
      f"the heavy module is not collected first: {ids[0]} comes first")
  assert request.config.option.loadscopereorder is False, (
      "xdist reorders modules by their number of tests, undoing the heavy-first order")
