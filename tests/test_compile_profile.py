"""The compile profile (compile_profile.py) sums jax's compile time per test module."""
import os
import subprocess
import sys

import compile_profile

HERE = os.path.dirname(os.path.abspath(__file__))
COMPILES = """
import jax, jax.numpy as jnp

def test_compiles_a_program():
  assert float(jax.jit(lambda x: jnp.sin(x) * 2)(1.0)) != 0
"""


def test_a_test_that_compiles_is_in_the_table_with_its_compile_time(tmp_path):
  (tmp_path / "test_one.py").write_text(COMPILES)
  out_dir = tmp_path / "profile"
  env = {**os.environ, compile_profile.ENV: str(out_dir), "PYTHONPATH": HERE,
         "SSM_BENCH_CACHE": "off"}
  run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "compile_profile",
                        "-p", "no:cacheprovider", "-n", "0", "test_one.py"], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=120)
  assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
  row = compile_profile.by_module(str(out_dir))["test_one.py"]
  assert row["wall"] > 0 and row["compile"] > 0 and row["trace"] > 0, (
      f"the test's compile was not recorded: {dict(row)}")
  table = compile_profile.render(compile_profile.by_module(str(out_dir)))
  assert "test_one.py" in table and "(all)" in table, table
