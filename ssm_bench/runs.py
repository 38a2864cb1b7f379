"""Training a shape group end to end: resume, train in chunks, checkpoint, evaluate, summarise.

The pure trainer (train.py) does the arithmetic; this module holds the loop and its side effects,
through the run-directory helpers in rundir.py. A run ends exactly once: its summary is written
last and atomically, a finished run is never touched again, and a killed group resumes from the
latest checkpoint every unfinished run of it has.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

import jax
import numpy as np

from ssm_bench import causality
from ssm_bench import declaration
from ssm_bench import evaluation
from ssm_bench import faults
from ssm_bench import memory
from ssm_bench import models
from ssm_bench import rundir
from ssm_bench import train
from ssm_bench.config import TrainConfig
from tasks import registry
# The run-directory API, re-exported: callers think of these as properties of a run.
from ssm_bench.rundir import (FINISHED, RunError, is_finished, read_json, read_summary,  # noqa: F401
                              run_name, unfinished, validate_summary)


@contextlib.contextmanager
def _sigint_after():
  """A Ctrl-C during a checkpoint save takes effect when the save is done: orbax's save threads
  are not interruptible (it logs a failed save with a traceback otherwise)."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  got = []
  old = signal.signal(signal.SIGINT, lambda *_: got.append(True))
  try:
    yield
  finally:
    signal.signal(signal.SIGINT, old)
    if got:
      raise KeyboardInterrupt


def _close(managers):
  """Wait for the checkpoint saves in flight, then release the managers' threads."""
  for mgr in managers:
    mgr.wait_until_finished()
    mgr.close()


@jax.jit
def _take(tree, k):
  """Run k's slice of a group's stacked tree, as one compiled program: eagerly every leaf was its
  own dispatched op (1579 of them, 0.6 s of a 10.3 s tiny 2-run group with 10 checkpoints)."""
  return jax.tree.map(lambda x: x[k], tree)


def _stack(trees):
  return jax.tree.map(lambda *xs: np.stack(xs), *trees)


def _restore(dirs, state):
  """Resume from the latest checkpoint step every run of the group has and can read; 0 if none.

  Steps past the one resumed from (a kill between two runs' saves) and unreadable steps are
  deleted, so the resumed run can save them again.
  """
  import orbax.checkpoint as ocp
  managers = [rundir.checkpointer(d) for d in dirs]
  common = sorted(set.intersection(*(set(m.all_steps()) for m in managers)), reverse=True)
  # An abstract template: no eager op on the freshly initialised state (a group start once hung
  # in the eager slice here: results/pilots.md, "Incidents").
  template = jax.eval_shape(lambda s: _take(s, 0), state)
  start, restored = 0, None
  for step in common:
    try:
      restored = [m.restore(step, args=ocp.args.StandardRestore(template)) for m in managers]
      start = step
      break
    except Exception as e:  # a corrupt checkpoint: say so in one line, fall back to an older one
      print(f"warning: {dirs[0]}...: checkpoint at step {step} is unreadable "
            f"({type(e).__name__}: {str(e)[:120]}); trying an older one", file=sys.stderr)
  for m in managers:
    for s in m.all_steps():
      if s > start:
        m.delete(s)
  if restored is None:
    return state, 0, managers
  return jax.tree.map(jax.numpy.asarray, _stack(restored)), start, managers


def train_group(cfgs: list[TrainConfig], dirs: list[str], on_chunk=None, log=None,
                progress=None) -> list[dict]:
  """Train runs that share shapes in one compiled program; returns their summaries.

  Finished runs (summary with status done or diverged) are skipped; interrupted runs resume
  from the latest checkpoint they all have. `on_chunk(step)` is called after each chunk; `log`
  takes one-line messages; `progress(steps)` is told about steps done (for a progress bar).
  """
  keys = {c.shape_key() for c in cfgs}
  assert len(keys) == 1, "train_group needs configs that share shapes"
  todo = []
  for c, d in zip(cfgs, dirs):
    done = read_summary(d) or {}
    if "config" in done and rundir.identity(done["config"]) != rundir.identity(c):
      raise RunError(f"{d} already holds a different run "
                     f"({rundir.differences(done['config'], c)}); use another workdir")
    if done.get("status") not in FINISHED:
      todo.append((c, d))
  if todo:
    with rundir.training_lock([d for _, d in todo]):
      # a run the lock's previous holder finished meanwhile is not trained again
      todo = [(c, d) for c, d in todo if not is_finished(d)]
      if todo:
        _train_todo(todo, on_chunk, log, progress)
  return [read_summary(d) for d in dirs]


def _train_todo(todo, on_chunk, log, progress):
  """Train the unfinished runs of a group (their directories held by this process)."""
  cfgs_todo, dirs_todo = [c for c, _ in todo], [d for _, d in todo]
  for c, d in todo:
    rundir.prepare(c, d)
  t0 = time.time()
  try:
    trainer = train.Trainer(cfgs_todo[0])
    _train_and_summarise(trainer, cfgs_todo, dirs_todo, on_chunk, log, progress, t0)
  except (KeyboardInterrupt, SystemExit):
    raise  # a kill: leave the checkpoints for the next launch to resume from
  except Exception as e:  # recorded, so a sweep goes on and tables list the failure
    for c, d in todo:
      if not is_finished(d):  # a group-mate that already finished keeps its result
        rundir.write_summary(c, d, {"status": "failed", "error": f"{type(e).__name__}: {e}",
                                    "max_len": 0, "steps": 0}, time.time() - t0)
    raise


def _train_and_summarise(trainer, cfgs, dirs, on_chunk, log, progress, t0):
  cfg = cfgs[0]
  init_many = trainer.compiled()[0]
  hp = train.hparams(cfgs)
  faults.point("group_start")
  state, start, managers = _restore(dirs, init_many(hp))
  from ssm_bench import tb  # tensorboard's writer and protos (0.2-0.4 s, boto3 among them):
  writers = [tb.Writer(d) for d in dirs]  # paid by the processes that train, not every import
  for d, w in zip(dirs, writers):
    rundir.truncate_metrics(d, start)
    if start:
      w.restart(start + 1)  # TensorBoard keeps what was logged before this step
  if progress:
    progress(start)
  import orbax.checkpoint as ocp
  t_train = time.time()
  try:
    for step in range(start + cfg.log_every, cfg.steps + 1, cfg.log_every):
      state, m = trainer.advance(state, hp)
      m = jax.device_get(m)
      faults.point("chunk")
      now = time.time() - t0
      for k, (d, w) in enumerate(zip(dirs, writers)):
        row = {"step": step, "loss": float(m["loss"][k]), "acc": float(m["acc"][k]),
               "length": int(m["length"][k]), "lr": float(m["lr"][k]), "wall_s": round(now, 3)}
        rundir.append_metrics(d, row)
        faults.point("metrics")
        w.scalars(step, {"train/loss": row["loss"], "train/acc": row["acc"],
                         "train/length": row["length"], "train/lr": row["lr"]})
      if step % cfg.checkpoint_every == 0 or step == cfg.steps:
        with _sigint_after():
          for k, mgr in enumerate(managers):
            mgr.save(step, args=ocp.args.StandardSave(_take(state, k)))
            faults.point("checkpoint_save")
          for mgr in managers:
            mgr.wait_until_finished()
        faults.point("checkpoint_done")
      if log:
        log(f"step {step:6d}  loss {float(m['loss'][0]):.4f}  acc {float(m['acc'][0]):.3f}  "
            f"length {int(m['length'][0])}")
      if progress:
        progress(step)
      if on_chunk:
        on_chunk(step)
      if bool(np.all(np.asarray(state["diverged_at"]) >= 0)):
        break
  except KeyboardInterrupt:  # Ctrl-C: let a checkpoint save in flight finish, then stop cleanly
    _close(managers)
    for w in writers:  # the entry point exits without teardown: flush the event files now
      w.close()
    raise
  train_s = time.time() - t_train
  with _sigint_after():
    _close(managers)
  _evaluate_and_summarise(trainer, cfgs, dirs, writers, jax.device_get(
      {k: state[k] for k in ("step", "length", "diverged_at")}), state["params"], train_s, t0,
      start)


def evaluation_program(trainer, cfg: TrainConfig):
  """(program, extra): the group's one compiled correctness function, program(params, tokens,
  labels, *extra(run_cfg)) -> bool (seqs, length), sized to the device (`memory.eval_chunk`)."""
  # A padded group (all its runs or none: pad_order is part of the shape) predicts each run
  # among its own task's classes, the count a traced argument of one program: as a constant it
  # compiled the length-1000 forward once per order (6 programs for Table 2's nine tasks,
  # 1.5-2.6 s each on the H100 and H200; results/bench/README.md, "Evaluation of a mixed group").
  masked = bool(cfg.pad_order)
  apply = trainer.model.apply if not masked else (
      lambda p, x, order: train.mask_classes(trainer.model.apply(p, x), order))
  extra = lambda c: (np.int32(registry.get_task(c.task).num_classes),) if masked else ()
  # on an accelerator, the largest chunk (<= eval_chunk) that fits, sized on this very program
  # (the persistent cache then serves its compilation again); per-sequence results do not
  # depend on it
  budget = memory.device_bytes() if jax.default_backend() != "cpu" else None
  return evaluation.make_correctness_fn(
      apply, memory.eval_chunk(trainer, budget, apply, extra(cfg))), extra


def score(trainer, params, task, sets: dict, correct, reached: int) -> dict:
  """A trained run's evaluation, no side effects: every stream's curves and max_len (the main
  stream's at the top level, the others under "other_streams") and the declaration check.
  `params`: the run's own; `sets`: `eval_sets`'s; `correct(params, tokens, labels)` its
  correctness function; `reached`: the longest training length its curriculum reached."""
  streams = {}
  for name, (tokens, labels) in sets.items():
    hits = correct(params, tokens, labels)
    s = evaluation.scored(task, hits)
    per_pos, seq = s["per_pos"], s["seq"]
    streams[name] = {"max_len": s["max_len"], "acc_curve": s["acc_curve"],
                     "seq_acc_curve": s["seq_acc_curve"],
                     "full_seq_acc": float(seq[-1]),
                     # at the longest length the curriculum reached, not at its cap
                     "acc_at_train_length": float(
                         per_pos[max(0, reached - task.acc_window):reached].mean()),
                     "seq_acc_at_train_length": float(seq[reached - 1])}
    if task.events is not None:  # tasks whose positions differ in kind (offset prediction)
      streams[name].update(
          acc_per_position=[round(float(a), 4) for a in per_pos],
          event_acc=evaluation.event_accuracy(hits, task.events(tokens, labels)),
          example=evaluation.example_output(trainer.model.apply, params, tokens, labels))
  main = streams.pop(task.main_stream)
  result = {"eval_stream": task.main_stream, **main}
  if task.acc_window > 1:
    result["acc_window"] = task.acc_window
  if task.whole_strings:
    result["max_len_of"] = "whole strings"  # seq_acc_curve's, not acc_curve's
  # the trained layers' transitions on a few evaluation sequences, against their classes
  few = sets[task.main_stream][0][:4, :64]
  result["declaration"] = declaration.check(trainer.model, params, few)
  # the trained network reads no token ahead of the position it answers for
  result["causal"] = causality.check(trainer.model, params, few)
  if streams:
    result["other_streams"] = streams
  return result


def eval_sets(task, cfg: TrainConfig) -> dict:
  """{stream: (tokens, labels)}: the task's fixed evaluation sets at cfg's size and length."""
  return {name: evaluation.eval_set(task, cfg.eval_seqs, cfg.eval_length, name)
          for name in task.eval_streams}


def _evaluate_and_summarise(trainer, cfgs, dirs, writers, final, params, train_s, t0, start):
  """Evaluate each run (parameters stay on the device; optimizer state is never fetched)."""
  cfg = cfgs[0]
  t_eval = time.time()
  program, extra = evaluation_program(trainer, cfg)
  sets = {}  # per task, shared by its runs
  # what the config's scan_method "auto" ran for this network (the same for the whole group)
  scan_auto = models.scan_auto(trainer.mcfg)
  for k, (c, d, w) in enumerate(zip(cfgs, dirs, writers)):
    faults.point("eval")
    task = registry.get_task(c.task)
    if c.task not in sets:
      sets[c.task] = eval_sets(task, cfg)
    rows = rundir.read_metrics(d)
    last = rows[-1] if rows else {}
    diverged_at = int(final["diverged_at"][k])
    reached = int(final["length"][k])
    common = {"steps": int(final["step"][k]), "final_train_length": reached,
              "final_train_acc": last.get("acc"), "final_loss": last.get("loss"),
              # train_time_s is this launch's: a run resumed at its last step (re-scored from its
              # checkpoint) spent ~0 s here, and resumed_from_step says so
              "train_time_s": round(train_s, 3), "resumed_from_step": int(start),
              "group_size": len(cfgs),
              # the program's members, in order: what a bit-identical rerun needs (README,
              # "What is reproducible")
              "group_runs": [os.path.basename(os.path.normpath(x)) for x in dirs],
              "compile_count": trainer.traces + 1,  # + the evaluation function, compiled once
              "scan_auto": scan_auto,
              # the sequence lengths its training compiled at (length_buckets' choice)
              "train_lengths": list(trainer.lengths())}
    if diverged_at >= 0:
      result = {"status": "diverged", "diverged_at": diverged_at, "max_len": 0,
                "acc_curve": None, "seq_acc_curve": None, **common}
    else:
      correct = lambda p, tokens, labels, c=c: program(p, tokens, labels, *extra(c))
      scored = score(trainer, _take(params, k), task, sets[c.task], correct, reached)
      result = {"status": "done", "diverged_at": None, **scored, **common}
      w.curve("eval/acc_vs_length", result["acc_curve"])
      w.curve("eval/seq_acc_vs_length", result["seq_acc_curve"])
    lengths = evaluation.grid(c.eval_length)
    result["eval"] = {"num_seqs": c.eval_seqs, "length": c.eval_length,
                      "seed": evaluation.EVAL_SEED, "grid": [lengths[0], lengths[-1]],
                      "threshold": evaluation.THRESHOLD}
    result["eval_time_s"] = round(time.time() - t_eval, 3)
    w.scalars(result["steps"], {"eval/max_len": result["max_len"]})
    w.hparams(_hparams(c), ["eval/max_len"])
    w.end_session(result["status"] == "done")
    w.close()
    rundir.write_summary(c, d, result, time.time() - t0)


def _hparams(cfg: TrainConfig) -> dict:
  keys = ("task", "model", "depth", "d_model", "d_state", "lr", "schedule", "seed", "batch_size",
          "steps")
  return {k: getattr(cfg, k) for k in keys}
