"""The step-by-step kernel's tiles where it runs now:
`python -m launch.bench --sections=eval_tiles`.

Since the time-parallel kernels became the GPU's `auto`, training (every protocol's lengths are
<= `pallas_parallel.MAX_LENGTH`) never runs `pallas.scan`; evaluation does, past that length:
the forward alone (no chunk-boundary states written), one run's parameters (no run axis), on a
chunk of `eval_chunk` sequences of `eval_length` steps. The `tiles` section sweeps the kernel in
training's regime (27 runs, forward + backward at the cell's length), which is no longer where
its time goes; this section sweeps it in evaluation's, per kind of `--models`: the forward tiles
(`bench_tiles.GRID["forward"]`) at the kind's chunk, then the fastest tile with each of
`CHUNKS` steps per unrolled chunk, inputs read ahead (`pallas.PREFETCH`) or not, and the best
once more on the whole evaluation set in one call (would a bigger `eval_chunk` pay here?). Every
row is checked against the sequential scan on the same factors (the whole set's first rows).
The `best eval` line gives the values for `pallas.FORWARD`, `CHUNK` and `PREFETCH`
(`--apply_tiles` makes them the defaults for the sections after it); the chunk is shared with
the backward, which no protocol runs. Rows give ms per call and ms per evaluated run and layer
(`eval_seqs / eval_chunk` calls).
"""
from __future__ import annotations

import jax

from launch import common
from launch.bench_tiles import GRID, checked_row, kinds_of, random_factors
from ssm_bench.config import TrainConfig

CHUNKS = (4, 8, 16)  # steps per unrolled chunk; prefetched, a chunk's reads are in flight together


def regime(sizes: dict, batch: int | None = None, length: int | None = None) -> dict:
  """Evaluation's sizes: the cell's width and states, a chunk of `eval_chunk` sequences of
  `eval_length` steps (TrainConfig's defaults, every preset's) unless given."""
  cfg = TrainConfig()
  return {"batch": batch or cfg.eval_chunk, "length": length or cfg.eval_length,
          "d_model": sizes["d_model"], "d_state": sizes["d_state"], "eval_seqs": cfg.eval_seqs}


def bench_eval_tiles(reps, sizes: dict, models=("mamba", "aussm", "s4d"), grid=None,
                     chunks=CHUNKS, need_gpu: bool = True):
  """Rows per (kind, tile, chunk, prefetch) and the best per kind, in `regime(...)`'s sizes.
  Off a GPU (need_gpu=False, tests) the kernel runs in interpret mode: checks, not timings."""
  if need_gpu and jax.default_backend() != "gpu":
    raise common.UsageError("the eval_tiles section times the Triton kernel and needs a GPU")
  from ssm_bench.scan import pallas
  from ssm_bench import scan
  z = sizes
  calls = z["eval_seqs"] / z["batch"]  # per evaluated run, per layer
  rows, best = [], {}
  for kind, family in kinds_of(models).items():
    whole = random_factors(family, z["eval_seqs"], z["length"], z["d_model"], z["d_state"])
    f = first_rows(whole, z["batch"])  # one call's chunk of the evaluation set
    # the sequential reference: the associative one's log-depth temporaries of (batch, length,
    # channels, states) would be several GB here
    want = jax.jit(lambda f: scan.diagonal_scan(f, "sequential"))(f)
    timings = {}

    def run(tile, chunk, prefetch):
      kernel = "forward" + ("+prefetch" if prefetch else "")
      row = checked_row("eval_tiles", kind, family, kernel, tile, jax.jit(
          lambda f: pallas.scan(f, forward=tile, chunk=chunk, prefetch=prefetch)), f, want,
          reps, 1, {})
      row["chunk"] = chunk
      if row.get("matches_reference"):
        row["ms_per_run_layer"] = round(row["ms_per_run"] * calls, 3)
        timings[(tuple(tile), chunk, prefetch)] = row["ms_per_run"]
      rows.append(row)

    for tile in grid["forward"] if grid else GRID["forward"]:
      run(tile, pallas.CHUNK[kind], False)
    if not timings:
      continue
    tile = min(timings, key=timings.get)[0]
    for chunk in chunks:
      for prefetch in (False, True):
        if (tile, chunk, prefetch) not in timings:
          run(tile, chunk, prefetch)
    key = min(timings, key=timings.get)
    # the best again on the whole evaluation set in one call (eval_chunk = eval_seqs): does a
    # bigger chunk, more programs in flight per call, pay on this device? (its first rows checked)
    row = checked_row("eval_tiles", kind, family, "forward, whole set" + "+prefetch" * key[2],
                      key[0], jax.jit(lambda f: first_rows(pallas.scan(
                          f, forward=key[0], chunk=key[1], prefetch=key[2]), z["batch"])),
                      whole, want, reps, 1, {}, batch=z["eval_seqs"])
    row["chunk"], row["ms_per_run_layer"] = key[1], row.get("ms_per_run")  # one call per layer
    rows.append(row)
    best[kind] = {"family": family, "forward": list(key[0]), "chunk": key[1],
                  "prefetch": key[2], "ms_per_call": timings[key],
                  "ms_per_run_layer": round(timings[key] * calls, 3),
                  "whole_set_ms_per_run_layer": (row["ms_per_run"] if row.get(
                      "matches_reference") else None),
                  "default_ms_per_call": timings.get(
                      (tuple(pallas.FORWARD[kind]), pallas.CHUNK[kind], pallas.PREFETCH[kind]))}
  return {"k": 1, "sizes": dict(z),
          "regime": (f"eval_tiles: pallas.scan forward, one run, {z['batch']} sequences x "
                     f"{z['length']} steps per call, then the best on all {z['eval_seqs']} "
                     "(ms per call; tile = channels per program, warps)"),
          "defaults": {"forward": pallas.FORWARD, "chunk": pallas.CHUNK,
                       "prefetch": pallas.PREFETCH},
          "rows": rows, "best": {"evaluation": best} if best else {}}


def first_rows(tree, n: int):
  """The first n batch rows of factors (their 3-D fields: per step, or h0 per row) or of y."""
  return jax.tree.map(lambda v: v[:n] if v.ndim == 3 else v, tree)


def apply(best: dict) -> dict:
  """Make an `eval_tiles` result's best the step-by-step kernel's defaults; what was set."""
  from ssm_bench.scan import pallas
  applied = {}
  for kind, b in best.items():
    pallas.FORWARD[kind], pallas.CHUNK[kind] = tuple(b["forward"]), b["chunk"]
    pallas.PREFETCH[kind] = b["prefetch"]
    applied[kind] = {k: b[k] for k in ("forward", "chunk", "prefetch")}
  return {"pallas": applied}


def render_best(best: dict) -> list[str]:
  return [f"  best eval {kind} ({b['family']}): pallas.FORWARD {tuple(b['forward'])}, CHUNK "
          f"{b['chunk']}, PREFETCH {b['prefetch']} ({b['ms_per_call']} ms per call, "
          f"{b['ms_per_run_layer']} ms per evaluated run and layer, "
          f"{b['whole_set_ms_per_run_layer']} in one call of the whole set; the defaults "
          f"{b['default_ms_per_call']} ms per call)" for kind, b in best.items()]
