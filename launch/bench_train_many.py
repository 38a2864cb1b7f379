"""The per-run cost of K runs in one vmapped training program (`launch.bench --sections=
train_many`), and whether a run in the group ends where it ends alone.

A sweep trains a shape group's runs as one program under `vmap`; this times K = 1, 9, 27 of them
per run-step (the GPU targets are stated at K = 27), checks run 0 of each group against run 0
trained alone, and runs each group's program twice on one state (bit-identical or not).
"""
from __future__ import annotations

import jax
import numpy as np

from launch.timing import interleaved
from launch.timing import prepare
from ssm_bench import train
from ssm_bench.config import TrainConfig


def run0_difference(alone, group) -> tuple[bool, float, str]:
  """Run 0 of two stacked parameter trees: whether they agree to rounding, the largest
  difference of a leaf relative to that leaf's largest value (rounding reads 1e-6, a wrong
  program 1), and which leaf (one that starts at zero measures its first updates against
  themselves, so a flipped sign there reads near 1)."""
  named = jax.tree_util.tree_flatten_with_path(alone)[0]
  pairs = [(np.asarray(a)[0], np.asarray(b)[0]) for (_, a), b in zip(named, jax.tree.leaves(group))]
  same = all(np.allclose(a, b, rtol=1e-4, atol=1e-6) for a, b in pairs)
  diffs = [float(np.abs(a - b).max() / max(np.abs(a).max(), 1e-30)) for a, b in pairs]
  worst = int(np.argmax(diffs))
  return same, diffs[worst], jax.tree_util.keystr(named[worst][0])


def bench_train_many(reps, base: TrainConfig, methods, ks=(1, 9, 27)):
  """Seconds per run for K configs of `base` (learning rates and seeds apart) in one vmapped
  program versus K separate runs, per scan method, with the compiled program's memory; run 0's
  parameters in the group against run 0 alone (`max_rel_diff`), and the group's program run
  twice on one state (`repeat_bit_identical`)."""
  lrs = np.geomspace(1e-4, 3e-2, 27)
  out = {}
  for method in methods:
    cfg0 = base.replace(scan_method=method)
    trainer = train.Trainer(cfg0)
    init, chunk = trainer.compiled(donate=False)
    rows, single, alone = [], None, None
    for k in ks:
      cfgs = [cfg0.replace(lr=float(lr), seed=i % 3) for i, lr in enumerate(lrs[:k])]
      hp = train.hparams(cfgs)
      state = init(hp)
      try:
        program, compile_s, (res, _), mem = prepare(chunk, state, hp)
        (run_s,) = interleaved([lambda: program(state, hp)], reps)
        again = program(state, hp)[0]
      except Exception as e:  # out of memory: a result, not a crash
        rows.append({"K": k, "error": f"{type(e).__name__}: {str(e)[:160]}"})
        continue
      repeat = all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(res["params"]),
                                                        jax.tree.leaves(again["params"])))
      per_run = run_s / k / cfg0.log_every
      alone = alone or res  # K = 1 comes first: run 0 trained alone
      same, diff, worst_leaf = run0_difference(alone["params"], res["params"])
      single = single or per_run
      rows.append({"K": k, "ms_per_run_step": round(per_run * 1e3, 3),
                   "compile_s": round(compile_s, 2), "vs_alone": round(per_run / single, 3),
                   "matches_separate": bool(same), "max_rel_diff": float(f"{diff:.2e}"),
                   "max_rel_diff_leaf": worst_leaf,
                   "repeat_bit_identical": repeat, **mem})
    out[method] = rows
  return {"config": f"{base.model} C2, batch {base.batch_size}, length {base.train_length}, "
                    f"d_model {base.d_model}, d_state {base.d_state}", "methods": out}
