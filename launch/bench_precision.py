"""The cost of the paper's float32 matmuls against TF32 (jax's default on recent NVIDIA GPUs), and
of float32 from three TF32 passes (`matmul_precision=tf32x3`), with each one's gradients.

    python -m launch.bench --sections=precision --cell=paper
"""
from __future__ import annotations

import functools

from launch import bench_step
from launch import common
from launch.timing import interleaved, prepare
from ssm_bench import train


def bench_precision(step_config, model_names, reps,
                    precisions=("float32", "tensorfloat32", "tf32x3")):
  """A training step per model at each matmul precision, timed in turn (the paper protocol
  computes in float32; jax's default on recent NVIDIA GPUs is TF32; tf32x3 is float32 from three
  TF32 passes on the tensor cores), each as a ratio to TF32's time, and each one's gradients
  (run 0, one fixed batch) against float32's. On a CPU every one is float32 arithmetic: ratios
  about 1, errors 0."""
  rows = []
  for name in model_names:
    calls, grads, errors = {}, {}, {}
    for p in precisions:
      cfg = step_config(name, "auto", matmul_precision=p)
      trainer = train.Trainer(cfg)
      init, chunk = trainer.compiled(donate=False)
      hp = train.hparams([cfg])
      try:  # init traces the network at this precision too
        state = init(hp)
        compiled, _, _, _ = prepare(chunk, state, hp)
        grads[p] = bench_step.reference_grads(trainer, state)
      except Exception as e:  # an algorithm this device's compiler rejects: a result
        errors[f"{p}_error"] = f"{type(e).__name__}: {str(e)[:200]}"
        continue
      calls[p] = functools.partial(compiled, state, hp)
    times = dict(zip(calls, interleaved(list(calls.values()), reps)))
    row = {"model": name, **{f"{p}_ms": round(t * 1e3, 3) for p, t in times.items()}, **errors}
    tf32 = times.get("tensorfloat32")
    for p in times:
      if p != "tensorfloat32" and tf32:
        row[f"{_short(p)}_over_tf32"] = round(times[p] / tf32, 3)
    row["grad_rel_err_vs_float32"] = {
        p: float(f"{bench_step.relative_error(grads[p], grads['float32']):.2e}")
        for p in grads if p != "float32" and "float32" in grads}
    common.progress(f"precision: {name}: " + ", ".join(f"{p} {t * 1e3:.2f} ms"
                                                         for p, t in times.items()))
    rows.append(row)
  return rows


def _short(precision: str) -> str:
  return {"tensorfloat32": "tf32"}.get(precision, precision)
