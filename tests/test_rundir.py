"""Run directories (rundir.py): a directory holds one run's config, a run another process trains
is refused and left untouched, and stored runs keep their names."""
import dataclasses
import json
import os

import pytest

from ssm_bench import rundir
from ssm_bench import runs
from ssm_bench.config import TrainConfig
from test_runs import TINY

pytestmark = pytest.mark.heavy  # trains tiny runs: scheduled first (conftest.py)


def test_directory_with_a_different_run_is_refused(tmp_path):
  d = str(tmp_path / "run")
  runs.train_group([TINY], [d])
  with pytest.raises(runs.RunError, match=r"different run \(seed 0 there, 5 here\)"):
    runs.train_group([TINY.replace(seed=5)], [d])  # the field that differs, named


def test_a_run_another_process_is_training_is_refused_then_trained_once_free(tmp_path,
                                                                             monkeypatch):
  """Two launches of one sweep both trained its runs, interleaving their metrics lines (80 for
  40 steps): a run directory is held while it trains. Held here through another open file (as
  another process would hold it), train_group refuses the run and writes nothing; freed, it
  trains it."""
  monkeypatch.setenv("SSM_BENCH_LOCK_WAIT_S", "0.3")
  d = str(tmp_path / "run")
  with rundir.training_lock([d]):
    with pytest.raises(rundir.RunBusy, match="being trained by another process"):
      runs.train_group([TINY], [d])
    assert os.listdir(d) == [], f"a refused launch wrote into the run: {os.listdir(d)}"
  summary = runs.train_group([TINY], [d])[0]
  assert summary["status"] == "done"
  steps = [row["step"] for row in runs.rundir.read_metrics(d)]
  assert steps == sorted(set(steps)), f"metrics lines repeated: {steps}"


def test_a_run_held_for_a_moment_is_waited_for_not_refused(tmp_path, monkeypatch):
  """A relaunch may find its killed predecessor's worker still exiting for a moment: the lock
  is waited for (up to SSM_BENCH_LOCK_WAIT_S) and then held, not the run refused at once."""
  import threading
  import time
  monkeypatch.setenv("SSM_BENCH_LOCK_WAIT_S", "60")
  d = str(tmp_path / "run")
  held = threading.Event()

  def predecessor():
    with rundir.training_lock([d]):
      held.set()
      time.sleep(0.5)

  t = threading.Thread(target=predecessor)
  t.start()
  held.wait()
  try:
    with rundir.training_lock([d]):  # held once the predecessor lets go
      pass
  except rundir.RunBusy as e:
    pytest.fail(f"refused while the predecessor held it for 0.5 s: {e}")
  finally:
    t.join()


def test_a_refused_group_leaves_no_empty_run_directory_behind(tmp_path, monkeypatch):
  """A group refused at its second run (another process trains it) had already made its first
  run's directory: left empty, it looked like a run that never started. The directories a
  refused launch made are removed; one that waits on a removed directory makes it again."""
  monkeypatch.setenv("SSM_BENCH_LOCK_WAIT_S", "0.3")
  first, held = str(tmp_path / "first"), str(tmp_path / "held")
  with rundir.training_lock([held]):
    with pytest.raises(rundir.RunBusy, match="being trained by another process"):
      runs.train_group([TINY, TINY.replace(seed=1)], [first, held])
    assert not os.path.exists(first), "a refused launch left the run directory it made"
    assert os.listdir(held) == [], "a refused launch wrote into the held run"
  assert os.path.isdir(held), "the held run's directory (made by its holder) was removed"
  import fcntl
  flock, calls = fcntl.flock, []

  def removed_while_waiting(fd, operation):  # the first lock is won on a directory removed
    calls.append(fd)
    if len(calls) == 1:
      os.rmdir(first)
    return flock(fd, operation)

  os.makedirs(first)
  monkeypatch.setattr(fcntl, "flock", removed_while_waiting)
  with rundir.training_lock([first]):
    assert os.path.isdir(first), "the lock held a removed directory instead of making it again"
  assert len(calls) == 2, f"{len(calls)} lock attempts; expected one retry"


def test_a_run_its_lock_holder_finished_meanwhile_is_not_trained_again(tmp_path, monkeypatch):
  """Two launches of one sweep: the second waits for the first's lock, and by the time it holds
  it the first has finished the run. It must read the summary again, not train a second time."""
  import contextlib
  d = str(tmp_path / "run")
  real_lock = rundir.training_lock
  summary = []

  @contextlib.contextmanager
  def after_the_other_launch(dirs):
    monkeypatch.setattr(rundir, "training_lock", real_lock)
    runs.train_group([TINY], [d])  # the other launch, finishing while this one waits
    summary.append(open(os.path.join(d, "summary.json")).read())
    with real_lock(dirs):
      yield

  monkeypatch.setattr(rundir, "training_lock", after_the_other_launch)
  runs.train_group([TINY], [d])
  assert open(os.path.join(d, "summary.json")).read() == summary[0], (
      "the run its lock holder finished was trained or scored again (its summary rewritten)")


def test_a_file_system_without_locks_still_trains(tmp_path, monkeypatch):
  """flock fails with ENOLCK on some network and FUSE mounts: the run trains unguarded, as
  before the lock, rather than failing."""
  import errno
  import fcntl

  def no_locks(fd, operation):
    raise OSError(errno.ENOLCK, "No locks available")

  monkeypatch.setattr(fcntl, "flock", no_locks)
  assert runs.train_group([TINY], [str(tmp_path / "run")])[0]["status"] == "done"


def test_committed_runs_are_named_by_their_configs():
  """A field added with a default must not rename stored runs (nor make them 'different')."""
  root = os.path.join(os.path.dirname(__file__), "..", "results", "runs")
  names = sorted(os.listdir(root))[:40]
  assert names, "no committed runs"
  for name in names:
    stored = json.load(open(os.path.join(root, name, "config.json")))
    assert runs.run_name(TrainConfig(**stored)) == name
    assert rundir.config_dict(stored) == rundir.config_dict(TrainConfig(**stored))


def test_a_hybrid_stacks_run_name_has_no_comma():
  """A run's name is a directory name that `--only` and a shell read as one word: the layers of
  a hybrid stack are joined by '+', in their order."""
  name = runs.run_name(TrainConfig(model="s4d,mamba", depth=2))
  assert name.startswith("C2-s4d+mamba-L2-") and "," not in name, name


def test_the_refusal_of_another_runs_directory_names_at_most_four_fields(tmp_path):
  """The one error line stays one line: four differing fields named, the rest counted."""
  d = str(tmp_path / "run")
  rundir.prepare(TINY, d)
  other = TINY.replace(seed=5, lr=0.5, d_state=3, depth=2, batch_size=3, steps=70)
  with pytest.raises(runs.RunError) as e:
    rundir.prepare(other, d)
  assert str(e.value).count(" there, ") == 4 and "; 2 more)" in str(e.value), str(e.value)


def test_equal_layer_kwargs_name_the_same_run_however_written():
  """Key order and spacing are not part of a run's identity: the same kwargs written two ways
  resume the same directory instead of training a second copy."""
  a = TrainConfig(model="deltaproduct", layer_kwargs='{"n_h": 3, "beta_max": 1.0}')
  b = TrainConfig(model="deltaproduct", layer_kwargs='{"beta_max":1.0,"n_h":3}')
  assert runs.run_name(a) == runs.run_name(b), (runs.run_name(a), runs.run_name(b))
  assert runs.run_name(a) != runs.run_name(TrainConfig(model="deltaproduct",
                                                        layer_kwargs='{"n_h": 2}'))


def test_an_unfinished_directory_of_another_run_is_refused_and_execution_fields_are_not_identity(
    tmp_path):
  """prepare() guards a directory with a config and no summary (a run that was stopped): another
  run is refused there, while the same run executed otherwise (log and checkpoint intervals,
  evaluation chunk) resumes in it with its stored config kept."""
  d = str(tmp_path / "run")
  rundir.prepare(TINY, d)
  with pytest.raises(runs.RunError, match=r"different run \(seed 0 there, 5 here\)"):
    rundir.prepare(TINY.replace(seed=5), d)
  rundir.prepare(TINY.replace(log_every=20, checkpoint_every=40, eval_chunk=4), d)
  assert json.load(open(os.path.join(d, "config.json")))["log_every"] == TINY.log_every


def test_preparing_a_run_rewrites_a_config_that_cannot_be_read(tmp_path):
  """A config.json that is not JSON (a disk or a hand) is rewritten from the run's config: the
  directory's name carries the config's hash, and a resume needs a readable record."""
  d = tmp_path / "run"
  d.mkdir()
  (d / "config.json").write_text('{"task": "C')
  rundir.prepare(TINY, str(d))
  assert json.loads((d / "config.json").read_text()) == dataclasses.asdict(TINY)


def test_preparing_a_run_removes_the_temporaries_a_killed_writer_left(tmp_path):
  d = tmp_path / "run"
  d.mkdir()
  (d / "summary.json.tmp-4242").write_text('{"status": "do')
  rundir.prepare(TINY, str(d))
  assert sorted(os.listdir(d)) == ["config.json"], os.listdir(d)


def test_resuming_keeps_each_logged_step_once_up_to_the_checkpoint(tmp_path):
  """truncate_metrics: the rows past the checkpoint resumed from go (they are logged again), a
  step logged twice (a kill between a row and the checkpoint) is kept once, a cut line goes."""
  d = str(tmp_path)
  with open(rundir.metrics_path(d), "w") as f:
    for step in (10, 20, 20, 30, 40):
      f.write(json.dumps({"step": step, "loss": float(step)}) + "\n")
      if step == 10:  # a line that is JSON but no row (an edited file): not a step of any run
        f.write(json.dumps({"loss": 1.0}) + "\n" + json.dumps({"step": "20"}) + "\n")
    f.write('{"step": 50, "lo')
  rundir.truncate_metrics(d, 20)
  assert [r["step"] for r in rundir.read_metrics(d)] == [10, 20]


def test_a_run_whose_summary_is_not_valid_is_trained_again(tmp_path):
  """A summary.json that says done but is no valid summary (no curves, no steps: a hand or a
  disk, since a kill cannot leave one) is not a result: the run trains again and writes one."""
  d = str(tmp_path / "run")
  rundir.prepare(TINY, d)
  with open(os.path.join(d, "summary.json"), "w") as f:
    json.dump({"status": "done", "max_len": 1000}, f)
  assert not rundir.is_finished(d), "an invalid summary was read as a finished run"
  s = runs.train_group([TINY], [d])[0]
  assert s["status"] == "done" and s["steps"] == TINY.steps and not runs.validate_summary(s), s


def test_a_done_summary_needs_both_curves_on_the_whole_grid():
  """A summary that says done but lacks a curve (or has one cut short) is not a result: tables
  list it as invalid rather than read a max_len without its evidence."""
  from ssm_bench import evaluation
  full = {str(L): 1.0 for L in evaluation.grid(TINY.eval_length)}
  s = {"schema_version": 1, "run": "r", "config": dataclasses.asdict(TINY), "status": "done",
       "max_len": 1000, "steps": 40, "wall_time_s": 1.0, "versions": {}, "backend": "cpu",
       "device": "cpu", "acc_curve": full, "seq_acc_curve": full}
  assert runs.validate_summary(s) == []
  for key in ("acc_curve", "seq_acc_curve"):
    assert runs.validate_summary({**s, key: None}), f"a done summary without {key} passed"
    cut = dict(list(full.items())[:-1])
    assert runs.validate_summary({**s, key: cut}), f"a done summary with {key} cut short passed"
    shuffled = dict(sorted(full.items()))  # '100' < '1000' < '20': a figure would zigzag
    assert runs.validate_summary({**s, key: shuffled}), f"{key} out of length order passed"
  assert runs.validate_summary({**s, "status": "finished"}) == ["unknown status 'finished'"]
  assert runs.validate_summary({**s, "max_len": "1000"}) == ["missing or mistyped 'max_len'"]
  assert runs.validate_summary({**s, "status": "diverged", "acc_curve": None,
                                "seq_acc_curve": None}) == []


def test_our_own_wait_for_each_checkpoint_is_not_reported_as_a_backlog(tmp_path, monkeypatch,
                                                                       caplog):
  """orbax warns "Waiting for previous save to complete took X seconds ... consider
  checkpointing less frequently" when the waits it counted exceed a second; it counts the wait
  runs.py makes after every save, so a user saw it at each checkpoint of a slow save. With
  orbax's threshold at 0 every wait would warn: none reaches the log, and other warnings do."""
  from absl import logging as absl_logging
  from orbax.checkpoint import checkpoint_manager
  monkeypatch.setattr(checkpoint_manager, "_WAIT_FOR_PREV_SAVE_WARNING_THRESHOLD_SECS", -1.0)
  with caplog.at_level("WARNING"):
    runs.train_group([TINY.replace(steps=60)], [str(tmp_path / "run")])  # saves at 20, 40, 60
    absl_logging.warning("another warning through absl")
  messages = [r.getMessage() for r in caplog.records]
  assert not [m for m in messages if "Waiting for previous save" in m], messages
  assert "another warning through absl" in messages, messages
