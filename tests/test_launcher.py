"""The tests' launcher (launcher.py) runs a module as `python -m` does, from a forked child of
a server that has imported the libraries and started no backend."""
import json
import os
import subprocess
import sys
import time

import pytest

import launcher

HERE = os.path.dirname(os.path.abspath(__file__))


def report(cwd, env):
  out = launcher.run(["launcher_probe", "report", "3"], cwd=cwd, env=env, timeout=60)
  assert out.returncode == 3 and out.stderr == "to stderr\n", (out.returncode, out.stderr)
  return json.loads(out.stdout)


def test_a_module_sees_what_python_m_gives_it(tmp_path):
  env = {**os.environ, "PROBE": "x", "PYTHONPATH": HERE}
  seen = report(tmp_path, env)
  plain = subprocess.run([sys.executable, "-m", "launcher_probe", "report", "3"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=60)
  assert plain.returncode == 3 and plain.stderr == "to stderr\n", plain.stderr
  fresh = json.loads(plain.stdout)
  assert seen["jax_imported"] and not fresh["jax_imported"], "the command was not forked"
  assert not seen["backends"], "the server started a backend its children inherit"
  # the libraries' objects are left out of the child's collections (its exit took 0.43 s more)
  assert seen["frozen"] > 10_000 and not fresh["frozen"], (seen["frozen"], fresh["frozen"])
  assert seen["gc"], "the child's own garbage is never collected"
  for key in ("argv", "file", "cwd", "path0", "probe"):
    assert seen[key] == fresh[key], f"{key}: {seen[key]!r} forked, {fresh[key]!r} from python -m"


def test_a_variable_read_at_import_is_the_commands_own(tmp_path):
  """JAX_PLATFORMS is read when jax is imported, in the server: each value has its own."""
  for platforms in ("cpu", "cpu,other"):
    env = {**os.environ, "PYTHONPATH": HERE, "JAX_PLATFORMS": platforms}
    assert report(tmp_path, env)["jax_platforms"] == platforms, f"JAX_PLATFORMS={platforms}"


def test_an_exception_is_a_traceback_and_status_1():
  out = launcher.run(["launcher_probe", "raise"], cwd=HERE, timeout=60)
  assert out.returncode == 1 and "Traceback" in out.stderr, out
  assert out.stderr.strip().endswith("ValueError: probe failed"), out.stderr


def test_a_timeout_kills_the_command_and_raises_as_subprocess_does(tmp_path):
  pid_file = tmp_path / "pid"
  with pytest.raises(subprocess.TimeoutExpired) as e:
    launcher.run(["launcher_probe", "hang", str(pid_file)], cwd=HERE, timeout=3)
  assert e.value.stdout == "hanging\n", e.value.stdout
  pid = int(pid_file.read_text())
  deadline = time.time() + 5
  while os.path.exists(f"/proc/{pid}") and time.time() < deadline:
    time.sleep(0.05)
  assert not os.path.exists(f"/proc/{pid}"), "the timed-out command is still running"
