"""Where shape groups run: in this process, or as Ray tasks (one task per group).

Every executor writes into the same run directories, so skipping, resuming and tables work the
same whichever ran the group.
"""
from __future__ import annotations

import dataclasses
import os


class ExecutorUnavailable(RuntimeError):
  """The executor's dependency is missing; the message says how to install it."""


def local(groups, progress=None, **_) -> int:
  """Train groups one after another in this process; returns the number of failed groups."""
  from ssm_bench import runs
  failures, runs_done = 0, 0
  for i, (cfgs, dirs) in enumerate(groups):
    try:
      runs.train_group(cfgs, dirs)
    except runs.RunError:
      raise
    except Exception:  # recorded as 'failed' in each run's summary by train_group
      failures += 1
    runs_done += len(cfgs)
    if progress:
      progress(i + 1, runs_done)
  return failures


# Several workers may share one GPU: none may grab all of its memory at start-up. These must be
# in the environment before the worker imports jax, hence Ray's runtime_env, not os.environ.
WORKER_ENV = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "XLA_PYTHON_CLIENT_ALLOCATOR": "platform",
              "TF_CPP_MIN_LOG_LEVEL": "2"}


def _ray_group(cfg_dicts, dirs):
  for k, v in WORKER_ENV.items():  # belt and braces for a worker that starts jax fresh
    os.environ.setdefault(k, v)
  from launch import common
  from ssm_bench import runs
  from ssm_bench.config import TrainConfig
  common.enable_compilation_cache()
  try:
    runs.train_group([TrainConfig(**c) for c in cfg_dicts], dirs)
    return True
  except Exception:  # the summaries already say 'failed'
    return False


def ray(groups, progress=None, gpus_per_group: float = 0.0, address: str | None = None, **_) -> int:
  """One Ray task per group, on a cluster at `address` or a local Ray instance."""
  try:
    import ray as ray_lib
  except ImportError:
    raise ExecutorUnavailable('the ray executor needs Ray: pip install -e ".[ray]"') from None
  started_here = not ray_lib.is_initialized()
  if started_here:
    ray_lib.init(address=address, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": WORKER_ENV})
  try:
    task = ray_lib.remote(num_cpus=1, num_gpus=gpus_per_group)(_ray_group)
    pending = {task.remote([dataclasses.asdict(c) for c in cfgs], [os.path.abspath(d) for d in dirs]):
               len(cfgs) for cfgs, dirs in groups}
    failures, done, runs_done = 0, 0, 0
    while pending:
      ready, _ = ray_lib.wait(list(pending), num_returns=1)
      for ref in ready:
        runs_done += pending.pop(ref)
        failures += 0 if ray_lib.get(ref) else 1
        done += 1
        if progress:
          progress(done, runs_done)
    return failures
  finally:
    if started_here:
      ray_lib.shutdown()


EXECUTORS = {"local": local, "ray": ray}
