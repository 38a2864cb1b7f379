"""The cost of the paper's float32 matmuls against TF32 (jax's default on recent NVIDIA GPUs).

    python -m launch.bench --sections=precision --cell=paper
"""
from __future__ import annotations

import functools

from launch import common
from launch.timing import interleaved, prepare
from ssm_bench import train


def bench_precision(step_config, model_names, reps, precisions=("float32", "tensorfloat32")):
  """A training step per model at each matmul precision, timed in turn (the paper protocol
  computes in float32; jax's default on recent NVIDIA GPUs is TF32): the cost of float32 as a
  ratio. On a CPU both are float32 arithmetic, so the ratio is about 1."""
  rows = []
  for name in model_names:
    calls = {}
    for p in precisions:
      cfg = step_config(name, "auto", matmul_precision=p)
      trainer = train.Trainer(cfg)
      init, chunk = trainer.compiled(donate=False)
      hp = train.hparams([cfg])
      state = init(hp)
      compiled, _, _, _ = prepare(chunk, state, hp)
      calls[p] = functools.partial(compiled, state, hp)
    times = dict(zip(calls, interleaved(list(calls.values()), reps)))
    row = {"model": name, **{f"{p}_ms": round(t * 1e3, 3) for p, t in times.items()}}
    row["float32_over_tf32"] = round(times[precisions[0]] / times[precisions[1]], 3)
    common.progress(f"precision: {name}: " + ", ".join(f"{p} {t * 1e3:.2f} ms"
                                                         for p, t in times.items()))
    rows.append(row)
  return rows
