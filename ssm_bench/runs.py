"""Run directories: the side effects around the pure trainer.

<run dir>/config.json      the TrainConfig, written first
<run dir>/metrics.jsonl    one JSON line per logging step
<run dir>/events.out.*     TensorBoard scalars, the acc-vs-length curve, HParams
<run dir>/checkpoints/     orbax checkpoints of the whole train state
<run dir>/summary.json     written last and atomically; its presence means the run finished
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import subprocess
import time

import jax
import numpy as np

from ssm_bench import evaluation
from ssm_bench import tb
from ssm_bench import train
from ssm_bench.config import TrainConfig

SCHEMA_VERSION = 1
FINISHED = ("done", "diverged")


class RunError(ValueError):
  """A run directory that cannot be used (it holds a different run, or is not writable)."""


def run_name(cfg: TrainConfig) -> str:
  """Readable prefix plus a hash of the whole config: the same config always maps here."""
  blob = json.dumps(dataclasses.asdict(cfg), sort_keys=True)
  digest = hashlib.sha1(blob.encode()).hexdigest()[:8]
  return (f"{cfg.task}-{cfg.model.replace(',', '+')}-L{cfg.depth}-n{cfg.d_state}-lr{cfg.lr:g}-"
          f"{cfg.schedule}-s{cfg.seed}-{digest}")


def read_json(path: str):
  try:
    with open(path) as f:
      return json.load(f)
  except (OSError, ValueError):
    return None


def read_summary(run_dir: str):
  return read_json(os.path.join(run_dir, "summary.json"))


def write_json_atomic(path: str, obj):
  tmp = f"{path}.tmp-{os.getpid()}"
  with open(tmp, "w") as f:
    json.dump(obj, f, indent=1, sort_keys=False)
    f.write("\n")
  os.replace(tmp, path)


def environment() -> dict:
  import flax
  import optax
  import orbax.checkpoint
  try:
    rev = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                         cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip() or None
  except OSError:
    rev = None
  return {"versions": {"python": platform.python_version(), "jax": jax.__version__,
                       "jaxlib": jax.lib.__version__ if hasattr(jax.lib, "__version__") else None,
                       "flax": flax.__version__, "optax": optax.__version__,
                       "orbax_checkpoint": orbax.checkpoint.__version__, "numpy": np.__version__},
          "backend": jax.default_backend(), "device": jax.devices()[0].device_kind,
          "git_revision": rev}


def _checkpointer(run_dir: str):
  import orbax.checkpoint as ocp
  return ocp.CheckpointManager(os.path.abspath(os.path.join(run_dir, "checkpoints")),
                               options=ocp.CheckpointManagerOptions(max_to_keep=2, create=True))


def _prepare(cfg: TrainConfig, run_dir: str):
  """Create the directory and write config.json, refusing a directory that holds another run."""
  path = os.path.join(run_dir, "config.json")
  existing = read_json(path)
  if existing is not None and existing != dataclasses.asdict(cfg):
    raise RunError(f"{run_dir} already holds a different run (its config.json differs); "
                   "use another workdir")
  try:
    os.makedirs(run_dir, exist_ok=True)
    if existing is None:
      write_json_atomic(path, dataclasses.asdict(cfg))
  except OSError as e:
    raise RunError(f"cannot write run directory {run_dir}: {e.strerror}") from None


def _take(tree, k):
  return jax.tree.map(lambda x: x[k], tree)


def _stack(trees):
  return jax.tree.map(lambda *xs: np.stack(xs), *trees)


def _restore(cfgs, dirs, state):
  """Resume from the latest checkpoint step that every run of the group has; 0 if none."""
  managers = [_checkpointer(d) for d in dirs]
  common = set.intersection(*(set(m.all_steps()) for m in managers))
  if not common:
    return state, 0, managers
  import orbax.checkpoint as ocp
  step = max(common)
  template = _take(state, 0)
  restored = [m.restore(step, args=ocp.args.StandardRestore(template)) for m in managers]
  return jax.tree.map(jax.numpy.asarray, _stack(restored)), step, managers


def _truncate_metrics(path: str, step: int):
  """Drop metric lines past the checkpoint we resume from, so each step is logged once."""
  if not os.path.exists(path):
    return
  with open(path) as f:
    keep = [l for l in f if l.strip() and json.loads(l).get("step", 0) <= step]
  with open(path, "w") as f:
    f.writelines(keep)


def train_group(cfgs: list[TrainConfig], dirs: list[str], on_chunk=None, log=None) -> list[dict]:
  """Train runs that share shapes in one compiled program; returns their summaries.

  Finished runs (summary.json with status done or diverged) are skipped; interrupted runs resume
  from the group's latest common checkpoint. `on_chunk(step)` is called after each chunk.
  """
  keys = {c.shape_key() for c in cfgs}
  assert len(keys) == 1, "train_group needs configs that share shapes"
  todo = []
  for c, d in zip(cfgs, dirs):
    done = read_summary(d) or {}
    if done.get("config", dataclasses.asdict(c)) != dataclasses.asdict(c):
      raise RunError(f"{d} already holds a different run (its summary's config differs); "
                     "use another workdir")
    if done.get("status") not in FINISHED:
      todo.append((c, d))
  if not todo:
    return [read_summary(d) for d in dirs]
  cfgs_todo, dirs_todo = [c for c, _ in todo], [d for _, d in todo]
  for c, d in todo:
    _prepare(c, d)
  t0 = time.time()
  trainer = train.Trainer(cfgs_todo[0])
  try:
    _train_and_summarise(trainer, cfgs_todo, dirs_todo, on_chunk, log, t0)
  except (KeyboardInterrupt, SystemExit):
    raise  # a kill: leave the checkpoints for the next launch to resume from
  except Exception as e:  # recorded, so a sweep goes on and tables list the failure
    for c, d in todo:
      _write_summary(c, d, {"status": "failed", "error": f"{type(e).__name__}: {e}"}, t0)
    raise
  return [read_summary(d) for d in dirs]


def _train_and_summarise(trainer, cfgs, dirs, on_chunk, log, t0):
  cfg = cfgs[0]
  init_many, chunk_many = trainer.compiled()
  hp = train.hparams(cfgs)
  state, start, managers = _restore(cfgs, dirs, init_many(hp))
  writers = [tb.Writer(d) for d in dirs]
  metric_paths = [os.path.join(d, "metrics.jsonl") for d in dirs]
  for p in metric_paths:
    _truncate_metrics(p, start)
  import orbax.checkpoint as ocp
  t_train = time.time()
  for step in range(start + cfg.log_every, cfg.steps + 1, cfg.log_every):
    state, m = chunk_many(state, hp)
    m = jax.device_get(m)
    now = time.time() - t0
    for k, (path, w) in enumerate(zip(metric_paths, writers)):
      row = {"step": step, "loss": float(m["loss"][k]), "acc": float(m["acc"][k]),
             "length": int(m["length"][k]), "lr": float(m["lr"][k]), "wall_s": round(now, 3)}
      with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
      w.scalars(step, {"train/loss": row["loss"], "train/acc": row["acc"],
                       "train/length": row["length"], "train/lr": row["lr"]})
    if step % cfg.checkpoint_every == 0 or step == cfg.steps:
      for k, mgr in enumerate(managers):
        mgr.save(step, args=ocp.args.StandardSave(_take(state, k)))
      for mgr in managers:
        mgr.wait_until_finished()
    if log:
      log(step, m)
    if on_chunk:
      on_chunk(step)
    if bool(np.all(np.asarray(state["diverged_at"]) >= 0)):
      break
  train_s = time.time() - t_train
  for mgr in managers:
    mgr.wait_until_finished()
    mgr.close()

  t_eval = time.time()
  task = trainer.task
  chunk = min(cfg.eval_chunk, cfg.eval_seqs)
  correct_fn = evaluation.make_correctness_fn(trainer.model.apply, chunk)
  eval_sets = {name: evaluation.eval_set(task, cfg.eval_seqs, evaluation.EVAL_LENGTH, name)
               for name in task.eval_streams}
  final_state = jax.device_get(state)
  for k, (c, d, w) in enumerate(zip(cfgs, dirs, writers)):
    diverged_at = int(final_state["diverged_at"][k])
    last = {"steps": int(final_state["step"][k]), "final_train_length": int(final_state["length"][k]),
            "final_train_acc": float(m["acc"][k]), "final_loss": float(m["loss"][k]),
            "train_time_s": round(train_s, 3), "group_size": len(cfgs),
            "compile_count": trainer.traces + 1}  # + the evaluation function, compiled once
    if diverged_at >= 0:
      result = {"status": "diverged", "diverged_at": diverged_at, "max_len": 0,
                "acc_curve": None, "seq_acc_curve": None, **last}
    else:
      params = _take(final_state["params"], k)
      streams = {}
      for name, (tokens, labels) in eval_sets.items():
        per_pos, seq = evaluation.curves(correct_fn(params, tokens, labels))
        acc = evaluation.on_grid(per_pos)
        streams[name] = {"max_len": evaluation.max_len(acc), "acc_curve": acc,
                         "seq_acc_curve": evaluation.on_grid(seq),
                         "full_seq_acc": float(seq[-1]),
                         "acc_at_train_length": float(per_pos[c.train_length - 1])}
      main = streams.pop("uniform")
      result = {"status": "done", "diverged_at": None, **main, **last}
      if streams:
        result["other_streams"] = streams
      w.curve("eval/acc_vs_length", main["acc_curve"])
      w.curve("eval/seq_acc_vs_length", main["seq_acc_curve"])
    result["eval"] = {"num_seqs": c.eval_seqs, "length": evaluation.EVAL_LENGTH,
                      "seed": evaluation.EVAL_SEED, "grid": [evaluation.GRID[0], evaluation.GRID[-1]],
                      "threshold": evaluation.THRESHOLD}
    result["eval_time_s"] = round(time.time() - t_eval, 3)
    w.scalars(result["steps"], {"eval/max_len": result["max_len"]})
    w.hparams(_hparams(c), ["eval/max_len"])
    w.end_session(result["status"] == "done")
    w.close()
    _write_summary(c, d, result, t0)


def _hparams(cfg: TrainConfig) -> dict:
  keys = ("task", "model", "depth", "d_model", "d_state", "lr", "schedule", "seed", "batch_size",
          "steps")
  return {k: getattr(cfg, k) for k in keys}


def _write_summary(cfg: TrainConfig, run_dir: str, result: dict, t0: float):
  summary = {"schema_version": SCHEMA_VERSION, "run": os.path.basename(os.path.normpath(run_dir)),
             "config": dataclasses.asdict(cfg), **result,
             "wall_time_s": round(time.time() - t0, 3), **environment(),
             "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
  os.makedirs(run_dir, exist_ok=True)
  write_json_atomic(os.path.join(run_dir, "summary.json"), summary)


_REQUIRED = {"schema_version": int, "run": str, "config": dict, "status": str, "max_len": int,
             "steps": int, "wall_time_s": (int, float), "versions": dict, "backend": str,
             "device": str}


def validate_summary(summary) -> list[str]:
  """Problems with a summary (empty list if it is valid); tables use this to list bad runs."""
  if not isinstance(summary, dict):
    return ["not a JSON object"]
  problems = [f"missing or mistyped {k!r}" for k, t in _REQUIRED.items()
              if not isinstance(summary.get(k), t)]
  if summary.get("status") not in ("done", "diverged", "failed"):
    problems.append(f"unknown status {summary.get('status')!r}")
  if summary.get("status") == "done":
    for key in ("acc_curve", "seq_acc_curve"):
      c = summary.get(key)
      if not isinstance(c, dict) or [int(k) for k in c] != list(evaluation.GRID):
        problems.append(f"{key} must map every grid length '20'..'1000' to an accuracy")
  return problems
