"""A CPU sweep's throughput with worker processes against one process: the same shape groups
trained by the local executor in-process (`--workers=1`) and by N worker processes, wall time as a
ratio, with the runs' results compared.

    python -m launch.bench --sections=workers --bench_workers=1,2 --models=mamba
"""
from __future__ import annotations

import contextlib
import os
import tempfile
import time

import jax

from launch import common
from launch import executors
from ssm_bench import runs
from ssm_bench.config import PRESETS, TrainConfig

# Four groups of two runs: the profile's Abelian groups at the cpu preset (lr as the profile's).
TASKS = ("C2", "C3", "C2xC2", "C6")


def groups_for(model: str, steps: int, preset: str = "cpu") -> list[list[TrainConfig]]:
  base = TrainConfig(**PRESETS[preset]).replace(model=model, steps=steps, log_every=min(
      100, steps), checkpoint_every=steps, eval_seqs=64)
  return [[base.replace(task=t, lr=lr) for lr in (3e-3, 3e-2)] for t in TASKS]


@contextlib.contextmanager
def _no_compilation_cache():
  """Both sides compile everything: in-process (jax's persistent cache off) and in the workers
  (SSM_BENCH_CACHE=off, which they inherit)."""
  old_env = os.environ.get("SSM_BENCH_CACHE")
  old_cfg = jax.config.jax_enable_compilation_cache
  os.environ["SSM_BENCH_CACHE"] = "off"
  jax.config.update("jax_enable_compilation_cache", False)
  try:
    yield
  finally:
    jax.config.update("jax_enable_compilation_cache", old_cfg)
    if old_env is None:
      os.environ.pop("SSM_BENCH_CACHE", None)
    else:
      os.environ["SSM_BENCH_CACHE"] = old_env


def bench_workers(models, workers=(1, 2), steps: int = 1000) -> list[dict]:
  """Per model: wall seconds of the groups at each worker count (1: in this process) and the
  speed-up over the first count, with how far the runs' results moved."""
  rows = []
  for model in models:
    cfg_groups = groups_for(model, steps)
    walls, results = {}, {}
    for n in workers:
      with tempfile.TemporaryDirectory() as work, _no_compilation_cache():
        groups = [(cfgs, [os.path.join(work, runs.run_name(c)) for c in cfgs])
                  for cfgs in cfg_groups]
        t = time.perf_counter()
        failed = executors.local(groups, workers=n)
        walls[n] = time.perf_counter() - t
        results[n] = {}
        for _, dirs in groups:
          for d in dirs:
            s = runs.read_summary(d) or {}
            results[n][os.path.basename(d)] = (s.get("status"), s.get("max_len"),
                                               s.get("final_loss") or float("nan"))
      common.progress(f"workers: {model} {n} worker(s): {walls[n]:.1f} s for {len(groups)} "
                      f"groups ({failed} failed)")
    ref = workers[0]
    rows.append({"model": model, "groups": len(cfg_groups), "steps": steps,
                 "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                 else os.cpu_count(),
                 **{f"wall_s_{n}": round(walls[n], 1) for n in workers},
                 **{f"speedup_{n}": round(walls[ref] / walls[n], 2) for n in workers[1:]},
                 # single- vs multi-threaded XLA orders float32 sums otherwise: runs agree to
                 # about the 7th digit, which training can amplify (README, reproducibility)
                 "same_status_and_max_len": all(results[n][k][:2] == r[:2] for n in workers
                                                for k, r in results[ref].items()),
                 "max_final_loss_diff": max(abs(results[n][k][2] - r[2]) for n in workers
                                            for k, r in results[ref].items())})
  return rows
