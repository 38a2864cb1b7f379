"""The whole training step and the scan alone: `python -m launch.bench --sections=step,scan`.

`step` times one AdamW step per model and scan method at the bench's cell, every method's
gradients checked against the first's; `scan` times negmamba's scan alone against the bytes a
fused layer must move (its memory floor), checked against float64 NumPy.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from launch import bench_tiles
from launch import common
from launch.timing import interleaved
from launch.timing import prepare
from launch.timing import timed
from ssm_bench import scan
from ssm_bench import train


def reference_grads(trainer, state):
  """Loss gradients of run 0 on one fixed batch (the check behind every step timing)."""
  cfg = trainer.cfg
  params = jax.tree.map(lambda x: x[0], state["params"])
  tokens, labels = trainer.task.sample(jax.random.PRNGKey(1), cfg.batch_size, cfg.train_length)
  mask = jnp.ones(tokens.shape, bool)
  # jitted: eager, the gradient dispatched ~150 ops that each compiled (12 of a tiny cell's 22 s)
  grads = jax.jit(jax.grad(lambda p: trainer.loss_fn(p, tokens, labels, mask)[0]))(params)
  return [np.asarray(g, np.float64) for g in jax.tree.leaves(grads)]


def relative_error(got, ref) -> float:
  err = np.sqrt(sum(np.sum((a - b) ** 2) for a, b in zip(ref, got)))
  return float(err / max(np.sqrt(sum(np.sum(a ** 2) for a in ref)), 1e-30))


def bench_step(model_names, reps, step_config, methods_for, auto_method, methods=None):
  """One training step (forward, backward, update) per model and scan method; gradients of
  every method checked against the sequential scan's (relative L2 error <= 1e-3). A model's
  methods are compiled first and then timed in turn, repetition by repetition (interleaved).
  step_config(model, method), methods_for(model) and auto_method(model): the bench's cell, the
  methods the model has here and the one its `auto` runs."""
  rows = []
  for name in model_names:
    per_method, ref, calls = {}, None, {}
    for method in [m for m in methods_for(name) if m in (methods or methods_for(name))]:
      cfg = step_config(name, method)
      trainer = train.Trainer(cfg)
      init, chunk = trainer.compiled(donate=False)  # timing calls it on the same state again
      hp = train.hparams([cfg])
      state = init(hp)
      try:
        compiled, compile_s, _, mem = prepare(chunk, state, hp)
      except Exception as e:  # out of memory or a kernel that does not compile: a result
        per_method[method] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
        common.progress(f"step: {name} {method}: {per_method[method]['error']}")
        continue
      grads = reference_grads(trainer, state)
      ref = ref or grads
      err = relative_error(grads, ref)
      per_method[method] = {"compile_s": round(compile_s, 3), "grad_rel_err": float(f"{err:.2e}"),
                            "matches_reference": err <= 1e-3, **mem}
      calls[method] = functools.partial(compiled, state, hp)
    for method, run_s in zip(calls, interleaved(list(calls.values()), reps)):
      per_method[method]["step_ms"] = round(run_s * 1e3, 2)
      common.progress(f"step: {name} {method}: {run_s * 1e3:.2f} ms, grad error "
            f"{per_method[method]['grad_rel_err']:.1e}")
    ran = {k: v for k, v in per_method.items() if "step_ms" in v}
    fastest = min(ran, key=lambda k: ran[k]["step_ms"]) if ran else None
    default = auto_method(name)
    ratio = (ran[default]["step_ms"] / ran[fastest]["step_ms"]) if default in ran else float("nan")
    rows.append({"model": name, "methods": per_method, "fastest": fastest, "default": default,
                 "default_over_fastest": round(ratio, 3),
                 "all_match": bool(ran) and all(v.get("matches_reference") for v in
                                                per_method.values())})
  return rows


def bench_scan(reps, sizes: dict, methods):
  """The scan alone (negmamba factors, forward + backward) by each of `methods` against the
  physical floor: the bytes a fused layer must move (x, dt, B, C in; y out; and their gradients)
  over the bandwidth of an elementwise pass. The values are checked against a float64 NumPy
  loop on the first row."""
  z = sizes
  b, t, d, n = z["batch"], z["length"], z["d_model"], z["d_state"]
  f = bench_tiles.random_factors("signed_decay", b, t, d, n)
  big = jnp.ones((b, t, d, max(n, 16)), jnp.float32)
  _, copy_s, _, _ = timed(jax.jit(lambda x: x * 1.0001 + 1.0), big, reps=reps)
  bandwidth = 2 * big.size * 4 / copy_s  # read + write
  moved = 2 * 4 * (3 * b * t * d + 2 * b * t * n)  # forward and backward: x, dt, y; B, C
  floor_s = moved / bandwidth
  want = _numpy_negmamba(jax.tree.map(lambda v: np.asarray(v[:1], np.float64), f.discretized()))
  rows = []
  for method in methods:
    fwd = jax.jit(lambda f, m=method: scan.diagonal_scan(f, m))
    grad = jax.jit(jax.grad(lambda f, m=method: jnp.sum(jnp.sin(scan.diagonal_scan(f, m)))))
    y = np.asarray(fwd(f))[:1]
    _, run_s, _, mem = timed(grad, f, reps=reps)
    err = float(np.abs(y - want).max() / np.abs(want).max())
    rows.append({"method": method, "fwd_bwd_ms": round(run_s * 1e3, 3),
                 "floor_ms": round(floor_s * 1e3, 4), "fraction_of_floor": round(floor_s / run_s, 5),
                 "rel_err_vs_float64": float(f"{err:.2e}"), "matches_reference": err <= 1e-4,
                 **mem})
  return {"shape": [b, t, d, n], "bandwidth_GBps": round(bandwidth / 1e9, 2), "methods": rows}


def _numpy_negmamba(f):
  h, ys = f.h0, []
  for s in range(f.x.shape[1]):
    a = 2 * np.exp(f.dt[:, s, :, None] * f.lam) - 1
    h = a * h + f.x[:, s, :, None] * f.B[:, s, None, :]
    ys.append(np.sum(f.C[:, s, None, :] * h, -1))
  return np.stack(ys, 1)


METHOD_COLUMNS = [m for m in scan.METHODS if m != "auto"]  # the step table's, in scan's order


def render(result) -> str:
  """The step section as a table: ms per step (XLA's MB estimate) per method, default marked."""
  lines = ["step (ms per training step; MB: XLA estimate; * = default)",
           "| model | " + " | ".join(METHOD_COLUMNS) + " | default / fastest | all match |",
           "|---|" + "---|" * (len(METHOD_COLUMNS) + 2)]
  for r in result:
    cells = [("error" if "error" in r["methods"][m] else
              f"{r['methods'][m]['step_ms']:.2f} ({r['methods'][m].get('estimate_MB', '?')} MB)"
              + ("*" if m == r["default"] else "")) if m in r["methods"] else "–"
             for m in METHOD_COLUMNS]
    lines.append(f"| {r['model']} | " + " | ".join(cells)
                 + f" | {r['default_over_fastest']:.2f} | {r['all_match']} |")
  return "\n".join(lines)
