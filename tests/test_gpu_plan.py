"""The GPU plan's script (.ci/gpu_plan) runs only on a lent GPU, rarely: every command it would
run is checked here, so a session does not spend device minutes on a misspelled flag."""
import os
import shlex
import subprocess

from absl import flags
import pytest

from launch import bench

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAN = os.path.join(ROOT, ".ci", "gpu_plan")


def planned(step, *options) -> list[list[str]]:
  out = subprocess.run(["bash", PLAN, "--dry", *options, str(step)], capture_output=True,
                       text=True, check=True).stdout
  return [shlex.split(line) for line in out.splitlines() if line.strip()]


@pytest.mark.parametrize("step", [1, 2, 3])
def test_every_planned_command_is_one_the_bench_accepts(step):
  """Each bench command's flags parse and pass the bench's own checks (sections, models,
  methods, layouts); each pytest command names test files that exist."""
  commands = planned(step)
  assert commands, f"step {step} runs nothing"
  for argv in commands:
    while argv[0] == "env" or "=" in argv[0]:  # env VAR=value ...: the command after it
      argv = argv[1:]
    assert argv[:2] == ["python3", "-m"], argv
    if argv[2] == "pytest":
      files = [a for a in argv[3:] if a.endswith(".py")]
      assert files and all(os.path.exists(os.path.join(ROOT, f)) for f in files), argv
      continue
    assert argv[2] == "launch.bench", argv
    flags.FLAGS.unparse_flags()
    try:
      flags.FLAGS(["bench"] + argv[3:])  # an unknown flag or a bad enum value raises here
      bench.checked_flags()  # a wrong section, model, method or layout raises here
    finally:
      flags.FLAGS.unparse_flags()


def test_an_unknown_step_is_one_usage_line():
  done = subprocess.run(["bash", PLAN, "9"], capture_output=True, text=True)
  assert done.returncode == 2 and done.stderr.strip().startswith("usage:"), done.stderr


def parsed_bench_commands(*options, step):
  """Each bench command of `gpu_plan [options] STEP --dry`, its flags parsed; yields once per
  command, the flags reset after."""
  for argv in planned(step, *options):
    if argv[2] == "launch.bench":
      flags.FLAGS.unparse_flags()
      try:
        flags.FLAGS(["bench"] + argv[3:])
        yield argv
      finally:
        flags.FLAGS.unparse_flags()


@pytest.mark.parametrize("step", [1, 2])
def test_a_rehearsal_runs_the_gpu_methods_at_a_tiny_cell_here(step):
  """--rehearse: the step's own commands with flags after them that win (a tiny cell, K = 2,
  one repetition), and the bench then treats this CPU as a GPU for its methods and kernels."""
  plain, rehearsed = [], []
  for argv in parsed_bench_commands(step=step):
    plain.append(argv)
    assert not bench.as_on_a_gpu() and "pallas_chunked" not in bench.methods_for("mamba"), (
        f"without --rehearse this CPU is no GPU: {argv}")
  for argv in parsed_bench_commands("--rehearse", step=step):
    rehearsed.append(argv)
    assert bench.as_on_a_gpu() and "pallas_chunked" in bench.methods_for("mamba"), argv
    assert bench.sizes() == dict(batch=2, length=12, d_model=8, d_state=4), bench.sizes()
    assert bench.train_many_ks() == [2] and flags.FLAGS.reps == 1, argv
  own = lambda argv: [a for a in argv if not a.startswith("--out=")]  # its own directory
  assert [own(a[:a.index("--rehearse")]) for a in rehearsed] == [own(a) for a in plain], (
      "a rehearsal runs other commands than the step")
