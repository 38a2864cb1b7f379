"""The test run's own compilation cache (tests/conftest.py)."""
import os

import jax


def test_the_test_run_compiles_into_a_fresh_cache_of_its_own_not_the_users():
  path = os.environ.get("SSM_BENCH_CACHE", "")
  user = os.path.expanduser("~/.cache/ssm-bench")
  assert os.path.basename(path).startswith("ssm-bench-test-xla-") and os.path.isdir(path), (
      f"SSM_BENCH_CACHE is {path!r}: tests would reuse (and fill) a cache older than this run")
  assert not os.path.abspath(path).startswith(user), f"tests compile into the user's cache {path}"
  assert jax.config.jax_compilation_cache_dir == path, (
      f"in-process compiles go to {jax.config.jax_compilation_cache_dir!r}, not the run's cache")
