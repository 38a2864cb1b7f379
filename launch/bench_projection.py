"""Device-hours of whole sweeps on this backend: `python -m launch.bench --sections=projection`."""
from __future__ import annotations

import jax

from launch import common
from launch.timing import timed
from ssm_bench import train
from ssm_bench.config import PRESETS


def bench_projection(reps, sweep_names=("table2", "table2_lite"), k_sample=None, models=None):
  """Device-hours of whole sweeps from measured step times of each distinct program shape.

  A shape is a group's config with the task left out (the task only sets the vocabulary); one
  training step is timed for a group of min(K, k_sample) runs and scaled linearly to K (on a
  GPU the default samples the whole group). Compilation time is counted once per group."""
  from launch import sweeps
  if k_sample is None:
    k_sample = 27 if jax.default_backend() != "cpu" else 1
  timings, out = {}, {}
  for name in sweep_names:
    groups = {}
    for c in sweeps.expand(name, PRESETS[sweeps.SWEEPS[name].preset]):
      if models is None or c.model in models:  # --models narrows a long projection
        groups.setdefault(c.shape_key(), []).append(c)
    seconds, compile_total = 0.0, 0.0
    for cfgs in groups.values():
      probe = cfgs[0].replace(task="C2", log_every=1, steps=1, checkpoint_every=1)
      k = min(len(cfgs), k_sample)
      key = (probe.shape_key(), k)
      if key not in timings:
        trainer = train.Trainer(probe)
        init, chunk = trainer.compiled(donate=False)
        hp = train.hparams([probe.replace(seed=i) for i in range(k)])
        try:
          compile_s, step_s, _, _ = timed(chunk, init(hp), hp, reps=reps)
          timings[key] = (step_s, compile_s)
        except Exception as e:  # out of memory at this K: report, do not guess
          timings[key] = (float("nan"), float("nan"))
          common.progress(f"projection: {probe.model} x{probe.depth} n{probe.d_state} K={k}: "
                f"{type(e).__name__}")
        common.progress(f"projection: {name} {probe.model} x{probe.depth} n{probe.d_state} K={k}: "
              f"{timings[key][0] * 1e3:.3f} ms per step, compile {timings[key][1]:.1f} s")
      step_s, compile_s = timings[key]
      seconds += cfgs[0].steps * step_s * len(cfgs) / k
      compile_total += compile_s
    out[name] = {"runs": sum(len(g) for g in groups.values()), "groups": len(groups),
                 "train_hours": round(seconds / 3600, 2),
                 "compile_hours": round(compile_total / 3600, 3),
                 "device_hours": round((seconds + compile_total) / 3600, 2),
                 "device_seconds": round(seconds + compile_total, 2)}
  return {"k_sample": k_sample, "device": jax.devices()[0].device_kind, "sweeps": out,
          "models": sorted(models) if models is not None else "all",
          "shapes_timed": len(timings)}
