"""The per-run cost of K runs in one vmapped training program (`launch.bench --sections=
train_many`), and whether a run in the group ends where it ends alone.

A sweep trains a shape group's runs as one program under `vmap`; this times K = 1, 9, 27 of them
per run-step (the GPU targets are stated at K = 27), checks run 0 of each group against run 0
trained alone, and runs each group's program twice on one state (bit-identical or not). Where
the time-parallel kernel runs, it can time both layouts the layers build its factors in
(`--layer_layouts`), and counts the megabytes a step transposes outside the kernels.
"""
from __future__ import annotations

import contextlib

import jax
import jax.extend
import numpy as np

from launch.timing import interleaved
from launch.timing import prepare
from ssm_bench import scan
from ssm_bench import train
from ssm_bench.config import TrainConfig
from ssm_bench.scan import pallas_parallel

# --layer_layouts: the values of `pallas_parallel.CHANNELS_FIRST_LAYERS` they time
LAYER_LAYOUTS = {"batch": False, "channels": True}


@contextlib.contextmanager
def layer_layout(name: str | None):
  """`pallas_parallel.CHANNELS_FIRST_LAYERS` set to the layout `name` inside (None: as it is)."""
  before = pallas_parallel.CHANNELS_FIRST_LAYERS
  if name is not None:
    pallas_parallel.CHANNELS_FIRST_LAYERS = LAYER_LAYOUTS[name]
  try:
    yield
  finally:
    pallas_parallel.CHANNELS_FIRST_LAYERS = before


def outside_kernels(jaxpr):
  """Equations of a jaxpr and its sub-jaxprs, the bodies of Pallas kernels excepted: what XLA
  runs around the kernels."""
  for e in jaxpr.eqns:
    yield e
    if e.primitive.name != "pallas_call":
      for sub in jax.extend.core.jaxprs_in_params(e.params):
        yield from outside_kernels(sub)


def transposed_mb(trainer, hp) -> tuple[int, float]:
  """(count, MB) of the arrays one run's training step transposes outside the Pallas kernels,
  from its jaxpr: each is a pass that reads and writes them (on an H100 the time-minor kernels'
  transposes were 27.6% of a 27-run mamba step; results/bench/README.md)."""
  one = jax.tree.map(lambda x: x[0], hp)
  jaxpr = jax.make_jaxpr(trainer.step)(jax.eval_shape(trainer.init, one), one).jaxpr
  moved = [e.invars[0].aval for e in outside_kernels(jaxpr) if e.primitive.name == "transpose"]
  return len(moved), sum(a.size * a.dtype.itemsize for a in moved) / 2 ** 20


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


def bench_train_many(reps, base: TrainConfig, methods, ks=(1, 9, 27), layer_layouts=()):
  """Seconds per run for K configs of `base` (learning rates and seeds apart) in one vmapped
  program versus K separate runs, per scan method, with the compiled program's memory; run 0's
  parameters in the group against run 0 alone (`max_rel_diff`), and the group's program run
  twice on one state (`repeat_bit_identical`). A method whose kernel reads channels-first
  factors is timed once per layer layout in `layer_layouts` (`LAYER_LAYOUTS`; none: as set),
  keyed "<method>, <layout> layers"; the first group of each later layout is checked against the
  first layout's (`vs_first_layout`, the same runs and steps: on CPU the layouts agree to
  3.3e-6 in parameters and exactly in mean losses at the tiny preset, where B and C swapped in
  one layout read 2.0 and 8e-3; TF32 rounding adds its own, most on zero-initialized leaves)."""
  out = {}
  for method in methods:
    runs_kernel = scan.resolve(method) in scan.READS_CHANNELS_FIRST
    first = None
    for name in (layer_layouts if runs_kernel and layer_layouts else (None,)):
      with layer_layout(name):
        rows, result = _time_groups(reps, base.replace(scan_method=method), ks)
      if first is None:
        first = result
      elif result is not None:
        rows[0]["vs_first_layout"] = _layouts_differ(first, result)
      out[method if name is None else f"{method}, {name} layers"] = rows
  return {"config": f"{base.model} C2, batch {base.batch_size}, length {base.train_length}, "
                    f"d_model {base.d_model}, d_state {base.d_state}", "methods": out}


def _layouts_differ(first, other) -> dict:
  """Two layouts' first groups (the same runs and steps): run 0's largest relative parameter
  difference and its leaf, and the largest relative difference of a run's mean loss."""
  _, diff, leaf = run0_difference(first[0], other[0])
  loss = np.max(np.abs(other[1] - first[1]) / np.maximum(np.abs(first[1]), 1e-30))
  return {"max_rel_diff": float(f"{diff:.2e}"), "max_rel_diff_leaf": leaf,
          "loss_max_rel_diff": float(f"{loss:.2e}")}


def _time_groups(reps, cfg0: TrainConfig, ks):
  """`bench_train_many`'s rows for one method and layout, one per K, and the first group's
  (parameters, per-run mean losses), None if it failed."""
  lrs = np.geomspace(1e-4, 3e-2, 27)
  trainer = train.Trainer(cfg0)
  init, chunk = trainer.compiled(donate=False)
  rows, single, alone, first = [], None, None, None
  count, mb = transposed_mb(trainer, train.hparams([cfg0]))
  for k in ks:
    cfgs = [cfg0.replace(lr=float(lr), seed=i % 3) for i, lr in enumerate(lrs[:k])]
    hp = train.hparams(cfgs)
    state = init(hp)
    try:
      program, compile_s, (res, metrics), mem = prepare(chunk, state, hp)
      (run_s,) = interleaved([lambda: program(state, hp)], reps)
      again = program(state, hp)[0]
    except Exception as e:  # out of memory: a result, not a crash
      rows.append({"K": k, "error": f"{type(e).__name__}: {str(e)[:160]}"})
      continue
    repeat = all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(res["params"]),
                                                      jax.tree.leaves(again["params"])))
    per_run = run_s / k / cfg0.log_every
    if k == 1:  # run 0 trained alone; without K = 1 no group is checked against it
      alone = res
    first = first or (res["params"], np.asarray(metrics["loss"]))
    same, diff, worst_leaf = (run0_difference(alone["params"], res["params"]) if alone
                              else (None, None, None))
    single = single or per_run
    rows.append({"K": k, "ms_per_run_step": round(per_run * 1e3, 3),
                 "compile_s": round(compile_s, 2), "vs_alone": round(per_run / single, 3),
                 "matches_separate": same,
                 "max_rel_diff": None if diff is None else float(f"{diff:.2e}"),
                 "max_rel_diff_leaf": worst_leaf, "repeat_bit_identical": repeat,
                 "transposes_per_run_step": count, "transposed_MB_per_run_step": round(mb, 2),
                 **mem})
  return rows, first


def apply_layer_layout(results: list) -> dict | None:
  """`--apply_tiles` after a train_many that timed both layer layouts: the one with the smaller
  sum of ms per run-step (each model and method at the largest K both timed) becomes
  `CHANNELS_FIRST_LAYERS` for the sections after it in this process; returns what was set and
  the sums (None when no layout pair was timed)."""
  sums = dict.fromkeys(LAYER_LAYOUTS, 0.0)
  paired = False
  for one in results:
    timed = {}  # method -> layout -> {K: ms}
    for key, rows in one.get("methods", {}).items():
      method, _, layers = key.partition(", ")
      name = layers.removesuffix(" layers")
      if name in LAYER_LAYOUTS:
        timed.setdefault(method, {})[name] = {r["K"]: r["ms_per_run_step"] for r in rows
                                              if "error" not in r}
    for by_layout in timed.values():
      common_ks = set.intersection(*(set(v) for v in by_layout.values()))
      if len(by_layout) == len(LAYER_LAYOUTS) and common_ks:
        paired = True
        for name, ms in by_layout.items():
          sums[name] += ms[max(common_ks)]
  if not paired:
    return None
  best = min(sums, key=sums.get)
  pallas_parallel.CHANNELS_FIRST_LAYERS = LAYER_LAYOUTS[best]
  return {"CHANNELS_FIRST_LAYERS": LAYER_LAYOUTS[best], "layers": best,
          "ms_per_run_step_summed": {k: round(v, 3) for k, v in sums.items()}}


def render(result: list) -> str:
  """The section as text: ms per run-step per K, the transposes outside the kernels, and each
  group against its runs alone and against itself."""
  lines = []
  for one in result:
    if "skipped" in one:
      lines.append(f"train_many ({one['config']}): {one['skipped']}")
      continue
    lines.append(f"train_many ({one['config']}): ms per run-step per group size K (MB)")
    for m, rows in one["methods"].items():
      lines.append(f"  {m}: " + ", ".join(
          f"K={r['K']} {r['ms_per_run_step']:.3f} ({r.get('estimate_MB', '?')} MB)"
          if "error" not in r else f"K={r['K']} {r['error'][:60]}" for r in rows))
      moved = next((r for r in rows if "transposed_MB_per_run_step" in r), None)
      if moved:
        lines.append(f"  {m}: {moved['transposes_per_run_step']} transposes outside the "
                     f"kernels per run-step, {moved['transposed_MB_per_run_step']:.1f} MB")
      vs = rows[0].get("vs_first_layout") if rows else None
      if vs:
        lines.append(f"  {m} against the first layout, the same runs: parameters "
                     f"{vs['max_rel_diff']:.1e} ({vs['max_rel_diff_leaf']}), mean losses "
                     f"{vs['loss_max_rel_diff']:.1e}")
      lines.append(f"  {m}, run 0 in the group against alone (max relative difference) and the "
                   "group run twice: " + ", ".join(
                       f"K={r['K']} " + ("(run 0 not trained alone: K = 1 not timed)"
                                         if r["max_rel_diff"] is None else
                                         f"{r['max_rel_diff']:.1e}")
                       + (f" ({r['max_rel_diff_leaf']})" if r["max_rel_diff"] else "")
                       + ("" if r["repeat_bit_identical"] else " NOT bit-identical twice")
                       for r in rows if "error" not in r))
  return "\n".join(lines)
