"""Run directories: names, atomic files, metrics lines, checkpoints and summary validation.

<run dir>/config.json      the TrainConfig, written first
<run dir>/metrics.jsonl    one JSON line per logging step
<run dir>/events.out.*     TensorBoard scalars, the acc-vs-length curve, HParams
<run dir>/checkpoints/     orbax checkpoints of the whole train state
<run dir>/summary.json     written last and atomically; its presence means the run finished

Every file a table or a resume reads is written atomically (temporary file, then rename) or is
repaired on read (a metrics line cut by a kill is dropped), so a killed process never leaves a
file that a later launch would mistake for a result.
"""
from __future__ import annotations

import contextlib
import dataclasses
import glob
import hashlib
import json
import logging
import os
import platform
import subprocess
import time

from ssm_bench import evaluation
from ssm_bench import faults
from ssm_bench.config import EXECUTION_FIELDS, TrainConfig

SCHEMA_VERSION = 1
FINISHED = ("done", "diverged")
STATUSES = FINISHED + ("failed",)


class RunError(ValueError):
  """A run directory that cannot be used (it holds a different run, or is not writable)."""


class RunBusy(RunError):
  """A run directory another process is training right now."""


# A process that trains a run holds an exclusive flock on its directory (released by the kernel
# when the process dies, however it dies). A relaunch may find a killed predecessor's worker
# still exiting for a moment, so the lock is waited for this long before the run is refused.
LOCK_WAIT_S = 10.0  # SSM_BENCH_LOCK_WAIT_S overrides it (tests)


@contextlib.contextmanager
def training_lock(run_dirs):
  """Hold every run directory (created if missing) for this process while it trains them;
  RunBusy if another process holds one: two launches of one sweep (or a train into a sweep's
  run) would otherwise both train it, interleaving its metrics and checkpoints."""
  try:
    import fcntl
  except ImportError:  # no flock (Windows): unguarded, as before
    yield
    return
  fds, created = [], []
  try:
    for d in run_dirs:
      deadline = time.monotonic() + float(os.environ.get("SSM_BENCH_LOCK_WAIT_S", LOCK_WAIT_S))
      while True:
        try:
          made = not os.path.isdir(d)
          os.makedirs(d, exist_ok=True)
          fd = os.open(d, os.O_RDONLY)
        except OSError as e:
          raise RunError(f"cannot write run directory {d}: {e.strerror}") from None
        try:
          fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
          if _same_directory(fd, d):
            fds.append(fd)
            created += [d] * made
            break
          os.close(fd)  # a refused launch removed the empty directory meanwhile: make it again
        except BlockingIOError:
          os.close(fd)
          if time.monotonic() >= deadline:
            _remove_empty(created)  # a refused launch leaves none it made (and held) behind
            raise RunBusy(f"{d} is being trained by another process; wait for it to finish (or "
                          "stop it: its checkpoints resume), or use another workdir") from None
          time.sleep(0.2)
        except OSError:  # a file system without locks (some network or FUSE mounts): unguarded
          fds.append(fd)
          break
    yield
  finally:
    for fd in fds:
      os.close(fd)  # releases its lock


def _same_directory(fd, path) -> bool:
  try:
    return os.path.samestat(os.fstat(fd), os.stat(path))
  except OSError:
    return False


def _remove_empty(dirs):
  for d in reversed(dirs):
    try:
      os.rmdir(d)  # only if still empty: nothing of another process's is ever removed
    except OSError:
      pass


def config_dict(cfg) -> dict:
  """A TrainConfig (or a stored config dict) as a dict with every field: fields added after a
  run was stored take their defaults, so old runs still match their configs."""
  stored = cfg if isinstance(cfg, dict) else dataclasses.asdict(cfg)
  return {**dataclasses.asdict(TrainConfig()), **stored}


def identity(cfg) -> dict:
  """What defines a run: every field but the execution fields (config.EXECUTION_FIELDS). Two
  configs with one identity are one run, however each was (or is to be) executed."""
  return {k: v for k, v in config_dict(cfg).items() if k not in EXECUTION_FIELDS}


def differences(held, cfg, most: int = 4) -> str:
  """'task C2 there, C3 here; ...': the identity fields in which a stored config (`held`)
  differs from `cfg`, for the error that refuses a directory holding another run."""
  a, b = identity(held), identity(cfg)
  diff = [f"{k} {a.get(k)!r} there, {b.get(k)!r} here" for k in sorted(set(a) | set(b))
          if a.get(k) != b.get(k)]
  return "; ".join(diff[:most]) + (f"; {len(diff) - most} more" if len(diff) > most else "")


def run_name(cfg: TrainConfig) -> str:
  """Readable prefix plus a hash of the identity fields that differ from their defaults: the
  same run always maps here, and adding a field (with a default) renames no stored run."""
  defaults = dataclasses.asdict(TrainConfig())
  blob = json.dumps({k: v for k, v in identity(cfg).items() if defaults[k] != v},
                    sort_keys=True)
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
  """The run's summary if it is a valid one, else None (missing, truncated or corrupt)."""
  s = read_json(os.path.join(run_dir, "summary.json"))
  return s if s is not None and not validate_summary(s) else None


def is_finished(run_dir: str) -> bool:
  return (read_summary(run_dir) or {}).get("status") in FINISHED


def unfinished(run_dirs) -> int:
  """How many of these runs a launch would still train."""
  return sum(not is_finished(d) for d in run_dirs)


def write_json_atomic(path: str, obj, point: str | None = None):
  tmp = f"{path}.tmp-{os.getpid()}"
  with open(tmp, "w") as f:
    json.dump(obj, f, indent=1, sort_keys=False)
    f.write("\n")
    f.flush()
    os.fsync(f.fileno())
  if point:
    faults.point(point)
  os.replace(tmp, path)


def remove_stale_temporaries(run_dir: str):
  """Temporary files a killed writer left behind (never read; removed so nothing looks half done)."""
  for p in glob.glob(os.path.join(run_dir, "*.tmp-*")):
    try:
      os.remove(p)
    except OSError:
      pass


def _git_revision() -> str | None:
  try:
    return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                          cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip() or None
  except (OSError, subprocess.SubprocessError):
    return None


# Read once, when the process loads this module: the revision of the code it runs. Read when a
# summary is written, an hours-long sweep recorded whatever was committed meanwhile.
GIT_REVISION = _git_revision()


def environment() -> dict:
  import flax
  import jax
  import numpy as np
  import optax
  import orbax.checkpoint

  return {"versions": {"python": platform.python_version(), "jax": jax.__version__,
                       "flax": flax.__version__, "optax": optax.__version__,
                       "orbax_checkpoint": orbax.checkpoint.__version__, "numpy": np.__version__},
          "backend": jax.default_backend(), "device": jax.devices()[0].device_kind,
          # what a config's matmul_precision "default" defers to (None: the backend's choice)
          "jax_matmul_precision": jax.config.jax_default_matmul_precision,
          # XLA's options, e.g. a sweep worker's single-threaded CPU (its float32 sums are
          # ordered otherwise: the same run differs in the 7th digit from a multi-threaded one)
          "xla_flags": os.environ.get("XLA_FLAGS", ""),
          "git_revision": GIT_REVISION}


def prepare(cfg: TrainConfig, run_dir: str):
  """Create the directory and write config.json, refusing a directory that holds another run.

  A config.json that cannot be parsed (a kill while it was first written cannot cause one, but a
  disk or a hand can) is rewritten: the directory name already carries the config's hash.
  """
  path = os.path.join(run_dir, "config.json")
  existing = read_json(path)
  if existing is not None and identity(existing) != identity(cfg):
    raise RunError(f"{run_dir} already holds a different run ({differences(existing, cfg)}); "
                   "use another workdir")
  try:
    os.makedirs(run_dir, exist_ok=True)
    remove_stale_temporaries(run_dir)
    if existing is None:
      write_json_atomic(path, dataclasses.asdict(cfg))
  except OSError as e:
    raise RunError(f"cannot write run directory {run_dir}: {e.strerror}") from None


def metrics_path(run_dir: str) -> str:
  return os.path.join(run_dir, "metrics.jsonl")


def read_metrics(run_dir: str) -> list[dict]:
  """Metric rows in file order; a line cut short by a kill is skipped."""
  rows = []
  try:
    with open(metrics_path(run_dir)) as f:
      for line in f:
        try:
          row = json.loads(line)
        except ValueError:
          continue
        if isinstance(row, dict) and isinstance(row.get("step"), int):
          rows.append(row)
  except OSError:
    pass
  return rows


def truncate_metrics(run_dir: str, step: int):
  """Keep only whole rows up to `step`, once each: the resumed run logs the rest again."""
  seen, keep = set(), []
  for row in read_metrics(run_dir):
    if row["step"] <= step and row["step"] not in seen:
      seen.add(row["step"])
      keep.append(json.dumps(row) + "\n")
  tmp = metrics_path(run_dir) + f".tmp-{os.getpid()}"
  with open(tmp, "w") as f:
    f.writelines(keep)
  os.replace(tmp, metrics_path(run_dir))


def append_metrics(run_dir: str, row: dict):
  with open(metrics_path(run_dir), "a") as f:
    f.write(json.dumps(row) + "\n")


def _not_our_own_wait(record: logging.LogRecord) -> bool:
  """Drops orbax's "Waiting for previous save to complete took X seconds ... consider
  checkpointing less frequently". runs.py waits for each checkpoint as soon as its saves are
  made (it is complete before training goes on), and orbax counts that wait, in its manager's
  `wait_until_finished`, as time the next save waited: the warning reported our own wait at
  every checkpoint that took a second, never a backlog of saves."""
  return not str(record.msg).startswith("Waiting for previous save to complete")


def checkpointer(run_dir: str):
  import orbax.checkpoint as ocp
  logging.getLogger("absl").addFilter(_not_our_own_wait)  # orbax logs through absl; once
  return ocp.CheckpointManager(os.path.abspath(os.path.join(run_dir, "checkpoints")),
                               options=ocp.CheckpointManagerOptions(
                                   max_to_keep=2, create=True, cleanup_tmp_directories=True))


def write_summary(cfg: TrainConfig, run_dir: str, result: dict, wall_s: float):
  import time
  summary = {"schema_version": SCHEMA_VERSION, "run": os.path.basename(os.path.normpath(run_dir)),
             "config": dataclasses.asdict(cfg), **result, "wall_time_s": round(wall_s, 3),
             **environment(), "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
  os.makedirs(run_dir, exist_ok=True)
  write_json_atomic(os.path.join(run_dir, "summary.json"), summary, point="summary_write")
  faults.point("summary_done")


_REQUIRED = {"schema_version": int, "run": str, "config": dict, "status": str, "max_len": int,
             "steps": int, "wall_time_s": (int, float), "versions": dict, "backend": str,
             "device": str}


def validate_summary(summary) -> list[str]:
  """Problems with a summary (empty list if it is valid); tables use this to list bad runs."""
  if not isinstance(summary, dict):
    return ["not a JSON object"]
  problems = [f"missing or mistyped {k!r}" for k, t in _REQUIRED.items()
              if not isinstance(summary.get(k), t)]
  if summary.get("status") not in STATUSES:
    problems.append(f"unknown status {summary.get('status')!r}")
  if summary.get("status") == "done":
    cfg = summary.get("config") if isinstance(summary.get("config"), dict) else {}
    length = cfg.get("eval_length", evaluation.EVAL_LENGTH)
    want = [str(L) for L in evaluation.grid(length)] if isinstance(length, int) else None
    for key in ("acc_curve", "seq_acc_curve"):
      c = summary.get(key)
      if not isinstance(c, dict) or list(c) != want:
        problems.append(f"{key} must map every grid length '20'..'{length}' to an accuracy")
  return problems
