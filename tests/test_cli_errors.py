"""One error convention for every entry point: bad input is one `error:` line, exit status 2.

The cases run in parallel, each a process of its own forked by the tests' launcher (launcher.py:
the libraries' start-up paid once).
"""
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import launcher
import processes

pytestmark = pytest.mark.heavy  # a minute or more in all: scheduled first (conftest.py)

CASES = [  # (entry point, arguments, a word the message must contain)
    ("train", ["--task=S100000"], "5040"),
    ("train", ["--task=banana"], "tasks:"),
    ("train", ["--model=mambo"], "choose from mamba"),
    ("train", ["--model=transformer", "--d_model=6"], "d_model 6 is not a multiple of heads 4"),
    ("train", ["--model=transformer", '--config.layer_kwargs={"causal": false}'],
     "not causal at initialisation"),  # a built-in's kwargs: was trained, causal false
    ("train", ["--model=deltaproduct", '--config.layer_kwargs={"n_h": -1}'],
     "n_h must be at least 1"),  # was: unknown theory class 'householder:-1'
    ("train", ["--model=mamba,"], "empty name"),
    ("train", ["--model=negmamba,aussm", "--depth=3"], "depth is 3"),
    ("train", ["--lr=nan"], "lr must be a finite number"),
    ("train", ["--lr=-1"], "lr must be"),
    ("train", ["--depth=0"], "depth must be a positive integer"),
    ("train", ["--schedule=linear"], "constant"),
    ("train", ["--steps=5", "--config.steps=6"], "--steps and --config.steps both given"),
    ("train", ["--config.eval_seqs=100", "--preset=cpu"], "eval_chunk"),
    ("train", ["--config.stepz=3"], "config.steps"),
    ("train", ["--model=deltaproduct", '--config.layer_kwargs={"heads": 0}'], "n_h and heads must"),
    ("train", ["--model=transformer", '--config.layer_kwargs={"heads": 0}'], "heads and max_pos"),
    ("train", ["--model=transformer", "--d_model=4", '--config.layer_kwargs={"position": "rope"}'],
     "heads 4 leaves 1"),  # was: trained without positions
    # a table of learned positions shorter than the evaluation: refused before training
    ("train", ["--model=transformer", '--config.layer_kwargs={"position": "learned", '
               '"max_positions": 100}'], "length 1000 exceeds max_positions 100"),
    ("train", ["--config.steps=abc"], "invalid"),
    ("train", ["--norm=batchnorm"], "layernorm"),
    ("train", ["--preset=gpu"], "paper"),
    ("info", ["--group=S100000"], "5040"),
    ("info", ["--sample=100000x100000"], "at most"),
    ("info", ["--group=C2", "--sample=3"], "BxT"),
    ("info", ["--model=negmamba,"], "empty name"),
    ("info", ["--model=mamba", "--sample=2x4"], "has none"),  # was: the sample ignored
    ("info", ["--group=S3", "--language=tomita3"], "one of a group, a language, a layer or a"),
    ("info", ["--theory_class=signed_diagonal", "--model=mamba"], "describe one of a group"),
    ("info", ["--theory_class=signed"], "unknown theory class 'signed'; choose one of"),
    ("info", ["--theory_class=signed_diagonal:2"], "signed_diagonal takes no parameter"),
    ("info", ["--theory_class=signed_diagonal", "--layer_kwargs={}"], "it needs --model"),
    ("info", ["--group=S3", "--d_state=4"], "needs --model"),
    ("info", ["--model=mamba", "--groups=S3,S0"], "--groups: unknown group 'S0'"),
    ("info", ["--model=mamba", "--groups="], "--groups: no group given"),  # was: a card of none
    ("info", ["--group=S3", "--sample=0x4"], "positive integers"),
    ("info", ["--group=S3", "--sample=4x0"], "positive integers"),
    ("info", ["--group=S3", "--sample=1001x1000"], "1001000 tokens; print at most 1000000"),
    ("info", ["--groups=S3"], "it needs --model"),  # was: ignored, C2 described
    ("info", ["--plugins=examples.clock", "--model=clock", '--layer_kwargs={"m": 0}'],
     "m must be a positive integer, got 0"),  # was: a float division by zero
    ("analytic", ["--task=S100000"], "5040"),
    ("analytic", ["--task=A5", "--model=aussm"], "not solvable"),
    ("analytic", ["--length=0"], "length"),
    ("analytic", ["--task=A7"], "above order 720"),  # was: minutes in an eigenproblem
    ("analytic", ["--task=S4xC30", "--model=simple_aussm"], "parameters"),  # was: MemoryError
    ("sweep", ["--sweep=foo"], "table2"),
    ("sweep", ["--only=ZZZ"], "matches none"),
    ("sweep", ["--only=("], "regular expression"),
    ("sweep", ["--config.lr=0"], "lr must be"),
    ("sweep", ["--config.stepz=5"], "config.steps"),
    ("sweep", ["--sweep=tiny", "--config.model=transformer", '--config.layer_kwargs='
               '{"position": "learned", "max_positions": 100}'], "exceeds max_positions 100"),
    ("sweep", ["--config.steps=1.5"], "invalid"),
    ("sweep", ["--sweep=tiny", "--config.model=transformer", "--config.d_model=6"],
     "d_model 6 is not a multiple of heads 4"),  # a built-in stack: was its runs all failed
    ("sweep", ["--sweep=tiny", "--config.model=transformer",
               '--config.layer_kwargs={"causal": false}'], "not causal at initialisation"),
    ("sweep", ["--workdir=/proc/forbidden"], "workdir"),
    ("sweep", ["--model=mamba"], "--config.model=VALUE"),  # was only "see --help"
    ("sweep", ["--steps=5"], "spells it --config.steps=VALUE"),  # launch.train's spelling
    ("sweep", ["--sweep=tiny", "--config.pad_order=1"], "pad_order=1 needs"),  # was: failed runs
    # options of the local executor given with Ray, two plugin lists
    ("sweep", ["--sweep=tiny", "--workers=2", "--executor=ray"], "--workers is for the local"),
    ("sweep", ["--sweep=tiny", "--time_limit_s=60", "--executor=ray"],
     "--time_limit_s is for the local executor"),
    ("sweep", ["--sweep=tiny", "--plugins=examples.rotation", "--config.plugins=examples.clock"],
     "--plugins and --config.plugins differ"),
    ("profile", ["--model=mamba", "--task=C3"], "--groups=C2,S3"),
    ("profile", ["--model=mamba", "--layer_kwargs={}"], "spells it --config.layer_kwargs=VALUE"),
    ("profile", ["--model=mamba", "--groups=C2,S0"], "--groups: unknown group 'S0'"),
    ("profile", ["--model=mamba", "--groups="], "--groups: no group given"),
    ("profile", ["--model=mamba", "--compare_with=/no/such/dir"], "--compare_with: no directory"),
    ("profile", ["--model=mamba,mamba"], "is mamba at depth 2: --model=mamba --depths=2"),
    ("profile", ["--model=negmamba,aussm", "--depths=1"], "a hybrid stack's depth is the length"),
    ("profile", ["--model=mamba", "--depths=1,4"], "--depths must be among 1, 2, 3, got 1,4"),
    ("tables", ["--runs=/nonexistent"], "not a directory"),
    ("tables", ["--out=/proc/x"], "cannot write"),
    ("tables", ["--paper=/nonexistent.json"], "not a file"),
    ("tables", ["--paper=MALFORMED"], "cannot read paper table"),
    ("tables", ["--format=xml"], "markdown"),
    ("bench", ["--models=mambo"], "choose from"),
    ("bench", ["--sections=nope"], "choose from"),
    ("bench", ["--methods=palas"], "choose from sequential"),
    ("bench", ["--train_many_k=0"], "positive integers"),
    ("bench", ["--train_many_k=1,,2"], "''; choose from"),  # the empty entry named
    ("bench", ["--sections=workers", "--bench_workers=1,two"], "'two'; choose from positive"),
    ("bench", ["--projection_sweeps=table3"], "choose from table2"),
    ("bench", ["--sections=compiled", "--target=h300"], "choose from a100, b200, h100, h200, rtx_4090"),
]


def workdir(tmp, k):
  return tmp / CASES[k][0] / f"w{k}"


def run(k, tmp):
  entry, args, _ = CASES[k]
  args = [a.replace("MALFORMED", str(tmp / "bad.json")) for a in args]
  if entry in ("train", "sweep") and not any(a.startswith("--workdir") for a in args):
    args.append(f"--workdir={workdir(tmp, k)}")
  if entry == "tables" and not any(a.startswith("--runs") for a in args):
    args.append(f"--runs={tmp}")
  try:
    return launcher.run([f"launch.{entry}", *args], timeout=120)
  except subprocess.TimeoutExpired:  # it went on to work instead of refusing the input
    return subprocess.CompletedProcess(args, -1, "", "timed out: the input was not refused")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("cli")
  (tmp / "bad.json").write_text("{not json")
  with concurrent.futures.ThreadPoolExecutor(4) as pool:
    futures = [pool.submit(run, k, tmp) for k in range(len(CASES))]
    return [f.result() for f in futures], tmp


@pytest.mark.parametrize("k", range(len(CASES)), ids=[f"{e} {' '.join(a)}" for e, a, _ in CASES])
def test_bad_input_is_one_error_line_with_status_2(results, k):
  outs, tmp = results
  entry, args, needle = CASES[k]
  out = outs[k]
  lines = [l for l in out.stderr.splitlines() if l.strip()]
  assert out.returncode == 2, f"exit {out.returncode}; stderr:\n{out.stderr[-1500:]}"
  assert len(lines) == 1 and lines[0].startswith("error: "), f"not one error line:\n{out.stderr}"
  assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
  if entry in ("train", "sweep"):  # a run's directory (train) or the sweep's runs' (sweep)
    left = list(workdir(tmp, k).rglob("config.json"))
    assert not left, f"a refused run left files: {left}"


def _interrupted_sweep(tmp_path, env=None, wait_for_stderr=None):
  """A long sweep sent one SIGINT after its plan line (and a stderr line containing
  `wait_for_stderr`, if given); (process, stderr)."""
  proc = processes.popen_from_a_shell(
      [sys.executable, "-m", "launch.sweep", "--sweep=tiny", f"--workdir={tmp_path}",
       "--config.steps=1000000"],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
  proc.stdout.readline()  # the plan line: main() is running and groups are next
  seen = []
  while wait_for_stderr:
    seen.append(proc.stderr.readline())
    if not seen[-1] or wait_for_stderr in seen[-1]:  # end of output, or the line
      break
  proc.send_signal(signal.SIGINT)
  _, err = proc.communicate(timeout=120)
  return proc, "".join(seen) + err


def test_ctrl_c_stops_a_sweep_with_one_line_and_status_130(tmp_path):
  """Ctrl-C is how a long sweep is stopped: one line saying the same command resumes, no
  traceback, exit 130 (128 + SIGINT)."""
  proc, err = _interrupted_sweep(tmp_path)
  _assert_interrupted(proc, err)


@pytest.mark.parametrize("after_s", [0.3, 0.7, 1.1])
def test_ctrl_c_while_an_entry_point_starts_stops_it_with_one_line(tmp_path, after_s):
  """A Ctrl-C in the first second or two, while jax imports: jax's garbage-collection callback
  swallowed it ("Exception ignored") and the run trained on in 3 of 4 tries, or it printed an
  import's traceback. `python -m launch.X` now installs the hooks first and notes a Ctrl-C
  until main begins (launch/interrupts.py)."""
  proc = processes.popen_from_a_shell(
      [sys.executable, "-m", "launch.train", "--task=C2", "--model=mamba", "--preset=tiny",
       "--steps=1000000", f"--workdir={tmp_path / 'run'}"],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  time.sleep(after_s)
  proc.send_signal(signal.SIGINT)
  try:
    _, err = proc.communicate(timeout=60)
  except subprocess.TimeoutExpired:
    proc.kill()
    _, err = proc.communicate()
    pytest.fail(f"a Ctrl-C {after_s} s after the start was lost: it trained on\n{err[-1500:]}")
  _assert_interrupted(proc, err)


@pytest.mark.parametrize("to", ["the terminal's process group", "the workers alone",
                                "the sweep alone"])
def test_ctrl_c_stops_a_sweep_with_workers_and_leaves_none_running(tmp_path, to):
  """`--workers=2`: a Ctrl-C at the terminal reaches the sweep and its worker processes; one
  that reaches only the workers (a scheduler stopping them) must stop the sweep too, not read as
  two failed groups after which it goes on; one that reaches only the sweep (launch.profile
  stopping its sweep) is passed on to the workers. Each way: one line, 130, no worker left."""
  proc = processes.popen_from_a_shell(
      [sys.executable, "-m", "launch.sweep", "--sweep=tiny", f"--workdir={tmp_path}",
       "--config.steps=1000000", "--workers=2", "--stall_s=0", "--quiet"],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
  proc.stdout.readline()  # the plan line: the workers start next
  workers, deadline = [], time.time() + 120
  while len(workers) < 2 and time.time() < deadline and proc.poll() is None:
    time.sleep(0.2)
    workers = processes.children(proc.pid)
  assert len(workers) == 2, f"no two workers started: {workers}"
  time.sleep(3)  # the SIGINT lands while the workers compile (where their teardown crashed)
  if to == "the workers alone":
    for w in workers:
      os.kill(w, signal.SIGINT)
  elif to == "the sweep alone":  # as launch.profile stops its sweep: the sweep stops its workers
    os.kill(proc.pid, signal.SIGINT)
  else:
    os.killpg(proc.pid, signal.SIGINT)
  sent = time.time()
  _, err = proc.communicate(timeout=120)
  _assert_interrupted(proc, err)
  # stopped by the SIGINT, not by the kill 30 s later that backs it (executors.processes)
  assert time.time() - sent < 25, f"the workers stopped {time.time() - sent:.0f} s after the SIGINT"
  left = processes.still_running(workers)
  assert not left, f"workers {left} still run after the sweep stopped"


_FINALIZER_SWALLOWS_CTRL_C = """
import time, weakref
from launch import common

class Held:
  pass

def main(argv):
  def on_collect():  # a Ctrl-C arriving inside a finalizer, as during jax's garbage collection
    raise KeyboardInterrupt
  held = Held()
  weakref.finalize(held, on_collect)
  del held
  time.sleep(30)  # training on: the Ctrl-C must still stop it here
  print("the Ctrl-C was lost")

common.run_main(main)
"""


# A loaded machine: the main thread loses the CPU for 0.3 s right after the hook starts its
# thread, still inside the hook (a fixed 10 ms delay then re-sent the Ctrl-C into the hook, where
# it was dropped again).
_DESCHEDULED_IN_THE_HOOK = """
import threading, time
start = threading.Thread.start
threading.Thread.start = lambda self: (start(self), time.sleep(0.3))[0]
"""


@pytest.mark.parametrize("load", ["idle", "main thread descheduled in the hook"])
def test_ctrl_c_caught_by_a_finalizer_still_stops_with_one_line(tmp_path, load):
  """Python cannot raise a KeyboardInterrupt out of a finalizer: it prints "Exception ignored
  ... Traceback" and drops it (seen in CI: a Ctrl-C 'lost' by a sweep). Every entry point
  interrupts its main thread again, once it is out of the hook, so the Ctrl-C stops the
  command with the one line and 130."""
  code = (_DESCHEDULED_IN_THE_HOOK if load != "idle" else "") + _FINALIZER_SWALLOWS_CTRL_C
  try:  # the command sleeps 30 s: a Ctrl-C that waits for the blocking call to end is too late
    proc = processes.run_from_a_shell([sys.executable, "-c", code], capture_output=True,
                                      text=True, timeout=20,
                                      cwd=os.path.dirname(os.path.dirname(__file__)))
  except subprocess.TimeoutExpired as e:
    pytest.fail(f"the Ctrl-C did not stop the command within {e.timeout:g} s")
  assert "lost" not in proc.stdout, f"the Ctrl-C was dropped; stderr:\n{proc.stderr[-1500:]}"
  _assert_interrupted(proc, proc.stderr)


# `python -m launch.X` as it starts: a Ctrl-C while the modules import, whose KeyboardInterrupt
# C code that calls back into Python drops (NumPy building a dtype, a Cython module registering
# its types: a run trained on in CI), then the entry point's main.
_CTRL_C_DROPPED_AT_START = """
import sys
sys.argv[:1] = ["-m"]  # as while `python -m launch.X` imports its package
import launch
sys.argv = ["launch.x"]
import os, signal, time
try:
  os.kill(os.getpid(), signal.SIGINT)
  time.sleep(1)
except BaseException:
  pass
"""
_START_MAIN = {
    "run_main": "from launch import common\ncommon.run_main(lambda argv: print('main ran'))\n",
    "launch.worker": "import runpy\nrunpy.run_module('launch.worker', run_name='__main__')\n"}


@pytest.mark.parametrize("main", sorted(_START_MAIN))
def test_ctrl_c_dropped_while_an_entry_point_imports_still_stops_it(tmp_path, main):
  """A Ctrl-C during start-up is noted, not raised where C code could drop it (or crash, as
  jaxlib's extension did while it loaded), and raised as the entry point's main begins: 130 and
  the one line (none from a sweep's worker, whose sweep prints it), the main not run."""
  proc = processes.run_from_a_shell(
      [sys.executable, "-c", _CTRL_C_DROPPED_AT_START + _START_MAIN[main]],
      input='{"configs": [], "dirs": []}', capture_output=True, text=True, timeout=120,
      cwd=os.path.dirname(os.path.dirname(__file__)))
  assert "main ran" not in proc.stdout, f"the Ctrl-C was dropped: main ran\n{proc.stderr[-1500:]}"
  if main == "launch.worker":
    assert proc.returncode == 130 and not proc.stderr, (
        f"exit {proc.returncode}, not 130 without a line; stderr:\n{proc.stderr[-1500:]}")
  else:
    _assert_interrupted(proc, proc.stderr)


_BLOCKED_IN_MAIN = """
import sys
sys.argv[:1] = ["-m"]  # as while `python -m launch.X` imports its package
import launch
sys.argv = ["launch.x"]
import time
from launch import common

def main(argv):
  print("main began", flush=True)
  time.sleep(30)  # compiling, evaluating: no chunk ends for a long while
  print("the Ctrl-C waited for the call to end")

common.run_main(main)
"""


def test_ctrl_c_once_main_began_stops_a_blocking_call_at_once(tmp_path):
  """After start-up a Ctrl-C raises at once, as usual: not noted for the next chunk of steps
  (a compilation or an evaluation can take minutes)."""
  proc = processes.popen_from_a_shell(
      [sys.executable, "-c", _BLOCKED_IN_MAIN], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      text=True, cwd=os.path.dirname(os.path.dirname(__file__)))
  assert proc.stdout.readline() == "main began\n"
  proc.send_signal(signal.SIGINT)
  try:
    out, err = proc.communicate(timeout=15)
  except subprocess.TimeoutExpired:
    proc.kill()
    pytest.fail("the Ctrl-C did not stop the command within 15 s")
  assert "waited" not in out, f"the Ctrl-C waited for the call to end; stderr:\n{err[-1500:]}"
  _assert_interrupted(proc, err)


def test_a_command_started_with_sigint_ignored_keeps_ignoring_it(tmp_path):
  """Started in the background by a script (`cmd &`, nohup: SIGINT ignored), a command is not
  stopped by a SIGINT, as any program there: the start-up deferral takes over only a SIGINT at
  its default."""
  proc = subprocess.Popen(
      ["sh", "-c", 'trap "" INT; exec "$0" "$@"', sys.executable, "-m", "launch.train",
       "--task=C2", "--model=mamba", "--preset=tiny", f"--workdir={tmp_path / 'run'}"],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  time.sleep(0.5)  # while it imports
  proc.send_signal(signal.SIGINT)
  out, err = proc.communicate(timeout=120)
  assert proc.returncode == 0 and out.startswith("step"), (
      f"exit {proc.returncode}; stdout:\n{out[-500:]}\nstderr:\n{err[-1500:]}")


_TRAINING = {
    "launch.train": ["-m", "launch.train", "--task=C2", "--model=mamba", "--preset=tiny",
                     "--steps=2000"],
    "launch.sweep": ["-m", "launch.sweep", "--sweep=tiny", "--config.steps=2000", "--quiet"],
    "launch.sweep --workers=2": ["-m", "launch.sweep", "--sweep=tiny", "--config.steps=2000",
                                 "--quiet", "--workers=2"]}


@pytest.mark.parametrize("command", sorted(_TRAINING))
def test_ctrl_c_dropped_while_training_stops_at_the_next_chunk(tmp_path, command):
  """A Ctrl-C whose KeyboardInterrupt C code drops during training (fault drop_sigint, in the
  process that trains: launch.train, the sweep's child, each worker) stops the command at the
  end of that chunk of steps (step 20 of 2000), with the one line and 130."""
  env = {**os.environ, "SSM_BENCH_FAULT": "chunk:2:drop_sigint"}
  proc = processes.run_from_a_shell(
      [sys.executable, *_TRAINING[command], f"--workdir={tmp_path / 'run'}"],
      capture_output=True, text=True, timeout=300, env=env)
  _assert_interrupted(proc, proc.stderr)
  # A run the other worker had just begun may hold an empty metrics.jsonl when the sweep stops.
  steps = {str(p.parent.relative_to(tmp_path)):
           max((json.loads(line)["step"] for line in p.open()), default=0)
           for p in (tmp_path / "run").rglob("metrics.jsonl")}
  assert steps and max(steps.values()) == 20, f"trained on after the Ctrl-C at step 20: {steps}"


def test_ctrl_c_stops_a_sweep_whose_process_lost_the_sigint(tmp_path):
  """A sweep process that never acts on its SIGINT (as when C code drops the KeyboardInterrupt
  where no `interrupts.check` follows, or a process hangs in XLA) is
  killed by its supervisor after the grace period, which still ends with the one line and 130."""
  env = {**os.environ, "SSM_BENCH_FAULT": "group_start:1:deaf", "SSM_BENCH_STOP_GRACE_S": "5"}
  proc, err = _interrupted_sweep(tmp_path, env, wait_for_stderr="ignoring SIGINT")
  _assert_interrupted(proc, err)
  assert "had not stopped 5 s after its Ctrl-C, so it was killed" in err, (
      f"the sweep stopped without its supervisor's kill:\n{err[-1500:]}")


def _training_profile(tmp_path):
  """A launch.profile whose sweep child is training (its plan line read), SIGINT at default."""
  proc = processes.popen_from_a_shell(
      [sys.executable, "-m", "launch.profile", "--model=mamba", "--preset=tiny", "--groups=C2",
       "--depths=1", f"--workdir={tmp_path}", "--config.steps=1000000", "--quiet"],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  proc.stdout.readline()  # the sweep's plan line: the child is training
  return proc


def test_sigint_to_the_profile_alone_stops_its_sweep(tmp_path):
  """launch.profile runs the sweep as a child: a SIGINT sent to the profile process only (not
  its process group) still stops the sweep, with the one line and 130, and leaves no process."""
  proc = _training_profile(tmp_path)
  proc.send_signal(signal.SIGINT)
  _, err = proc.communicate(timeout=120)
  _assert_interrupted(proc, err)
  left = processes.running_with(str(tmp_path))
  assert not left, f"the sweep still runs after the profile stopped: pids {left}"


def test_killing_the_profile_alone_stops_its_sweep(tmp_path):
  """A SIGTERM (kill, a job scheduler) to launch.profile only: the sweep it started must not go on
  training unsupervised, or a relaunch would race it over the same runs."""
  proc = _training_profile(tmp_path)
  proc.send_signal(signal.SIGTERM)
  proc.wait(timeout=60)  # not communicate(): a sweep left behind would hold its pipes open
  left = processes.running_with(str(tmp_path), wait_s=20)
  assert not left, f"the sweep still runs after the profile was killed: pids {left}"


def _assert_interrupted(proc, err):
  lines = [l for l in err.splitlines() if l.strip()]
  assert proc.returncode == 130, f"exit {proc.returncode}; stderr:\n{err[-1500:]}"
  assert lines and lines[-1].startswith("interrupted:"), f"no interrupted line:\n{err[-1500:]}"
  assert "Traceback" not in err, f"Ctrl-C printed a traceback:\n{err[-1500:]}"


def test_a_reader_that_stops_reading_ends_the_output_without_a_traceback():
  """`launch.sweep --dry_run | head`: the plan is 390 KB, far past a pipe's buffer, so the
  writes meet the closed pipe mid-way; the entry point ends as a shell tool does (status 141,
  128 + SIGPIPE), quietly."""
  proc = subprocess.Popen([sys.executable, "-m", "launch.sweep", "--sweep=table2", "--dry_run"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  assert proc.stdout.readline().startswith("group 0:")
  proc.stdout.close()
  err = proc.stderr.read()
  proc.wait(timeout=60)
  assert proc.returncode == 141 and not err.strip(), f"exit {proc.returncode}; stderr:\n{err}"


_OUT_OF_MEMORY = """
import sys
import jax
from launch import common

def main(argv):
  if sys.argv[1] == "numpy":
    import numpy as np
    np.empty((2 ** 25, 2 ** 25))  # 8 PiB: NumPy's MemoryError at once
  raise (jax.errors.JaxRuntimeError if sys.argv[1] == "oom" else RuntimeError)(
      "RESOURCE_EXHAUSTED: Out of memory allocating 36960098904 bytes." if sys.argv[1] == "oom"
      else "INTERNAL: something else")

common.run_main(main)
"""


@pytest.mark.parametrize("kind", ["oom", "numpy", "other"])
def test_out_of_memory_is_one_error_line_and_other_failures_keep_their_traceback(kind):
  proc = subprocess.run([sys.executable, "-c", _OUT_OF_MEMORY, kind], capture_output=True,
                        text=True, timeout=120, cwd=os.path.dirname(os.path.dirname(__file__)))
  if kind == "oom":
    assert proc.returncode == 2 and proc.stderr.startswith("error: out of memory (Out of memory "
                                                           "allocating 36960098904 bytes.)"), (
        proc.returncode, proc.stderr[-1500:])
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr[-1500:]
  elif kind == "numpy":  # was a MemoryError's traceback (a 28 GiB construction kernel)
    assert proc.returncode == 2 and proc.stderr.startswith("error: out of memory (Unable to "
                                                           "allocate"), proc.stderr[-1500:]
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr[-1500:]
  else:
    assert proc.returncode == 1 and "Traceback" in proc.stderr, (proc.returncode, proc.stderr)
