"""The fused kernel's tiles, swept on the GPU: `python -m launch.bench --sections=tiles`.

Two passes per kernel kind (real: mamba/negmamba, phase: aussm, const: s4d), k runs under vmap
(the table2 regime): first the forward kernel alone over (channels per program, warps); then,
with the fastest forward tile fixed, forward + backward over the backward kernel's (channels,
warps) and the chunk (steps between saved states, shared by both kernels). The backward keeps
chunk + 1 states per program in registers, so its best tile need not be the forward's. Every
tile is checked against the associative scan (values, then gradients); only tiles that match
can be best. For the real kind the best tile is timed once more with the backward's reductions
joined (`pallas.JOIN_REDUCTIONS`); then, for every kind, the best tile at each of the grid's
prefetch chunks with the chunk's inputs read ahead (`pallas.PREFETCH`; the forward alone too, for
the record). The result ends with the values to write into `pallas.FORWARD`, `pallas.BACKWARD`,
`pallas.CHUNK`, `pallas.JOIN_REDUCTIONS` and `pallas.PREFETCH`.

`--sections=parallel_tiles` does the same for the time-parallel kernel (`pallas_parallel`, the
kinds of `--models`, over `PARALLEL_GRID`; no chunk, prefetch or joined reductions): forward
tiles, then forward + backward over the backward tiles with the best forward fixed, each against
the same references; then the best pair once more reading the layers' (batch, time, channels)
layout (`pallas_parallel.TIME_MAJOR`, no transposes outside the kernels) and with only the
per-state rows time-major ("rows"), then in the fastest layout with 2 to 16 channel blocks per
backward program (`pallas_parallel.CHANNEL_BLOCKS`);
its `best` line ends with `pallas.scan`'s time at its own best tile on the same factors, the
ratio to beat.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from launch import common
from launch.timing import timed
from ssm_bench import scan
from ssm_bench.scan import pallas_parallel

# The backward's tiles take 2 to 8 warps: at the paper cell every 1-warp backward spills (100 to
# 35,000 bytes per thread) and 8 warps let 16 channels fit (ptxas: results/bench/README.md,
# "Registers").
GRID = {"forward": [(bd, w) for bd in (4, 8, 16, 32) for w in (1, 2, 4, 8)],
        "backward": [(bd, w) for bd in (4, 8, 16) for w in (2, 4, 8)],
        "chunk": (4, 8),
        # prefetched, a chunk's reads are in flight together: longer chunks may pay off there
        "prefetch_chunk": (4, 8, 16)}
# The time-parallel kernel: the tiles where each thread holds 2 to 16 elements of the time axis
# its defaults are for (TILE_SPAN rows, the paper's length). From 32 on every backward spills
# (Triton 3.3.1, sm_90: results/bench/README.md, "Registers"); below 2 threads sit idle.
PARALLEL_GRID = [(c, w) for c, w in GRID["forward"]
                 if 2 <= c * pallas_parallel.TILE_SPAN // (32 * w) <= 16]
# Channel blocks per backward program (`pallas_parallel.CHANNEL_BLOCKS`) timed at the best pair;
# 16 blocks of 8 channels is the paper cell's 128 channels in one program: no partial sums at
# all, and still batch x runs programs (6912 at 27 runs).
PARALLEL_BLOCKS = (2, 4, 8, 16)
# The scan family whose factors stand for each kernel kind where no model says which (the
# registers section without --models; signed decay is the real kind's heavier backward in the
# time-parallel kernel: three scans per state against decay's two).
REPRESENTATIVE = {"real": "signed_decay", "phase": "rotation", "const": "constant",
                  "complex": "complex"}
# The largest relative error against the reference a tile may have to be timed as a candidate:
# every tile the H100 and H200 sweeps timed (256 rows in results/bench/h*/) read 2.3e-6 or less;
# a wrong kernel reads 1e-2 or more (the tests' 1% error).
TOLERANCE = 1e-4


def kinds_of(models) -> dict[str, str]:
  """The fused kernel kinds the models' layers run, in the models' order (none for a layer
  without a fused scan), each with the scan family of the first model that runs it: a tile
  sweep for `--models=mamba` times mamba's kernel, not negmamba's."""
  from ssm_bench import registry
  from ssm_bench.scan import pallas_chunked
  kinds = {}
  for family in (registry.get(m).scan_family for m in models):
    if family:  # pallas_chunked.KIND: the step-by-step kernel's kinds and the complex one
      kinds.setdefault(pallas_chunked.KIND[family], family)
  return kinds


def families_of(kinds) -> dict[str, str]:
  """{kind: family} from `kinds_of`'s dict, or from a list of kinds (REPRESENTATIVE's)."""
  return dict(kinds) if isinstance(kinds, dict) else {k: REPRESENTATIVE[k] for k in kinds}


def random_factors(family: str, b: int, t: int, d: int, n: int, key: int = 0) -> scan.Factors:
  """Factors of a scan family with the value ranges its layers produce, handed as they hand
  them (the real families' x and dt before Mamba's rule: `scan.Factors.discretize`)."""
  k = jax.random.split(jax.random.PRNGKey(key), 6)
  c = lambda kk, shape: jax.lax.complex(jax.random.normal(kk, shape),
                                        jax.random.normal(jax.random.fold_in(kk, 1), shape)) * 0.1
  x = jax.random.normal(k[0], (b, t, d))
  if family in ("decay", "signed_decay"):
    return scan.Factors(
        family, x=x, B=jax.random.normal(k[1], (b, t, n)), C=jax.random.normal(k[2], (b, t, n)),
        h0=jnp.full((b, d, n), n ** -0.5),
        dt=jax.random.normal(k[3], (b, t, d)) - 1, discretize="softplus",
        lam=-jnp.broadcast_to(jnp.arange(1, n + 1, dtype=jnp.float32), (d, n)))
  common_ = dict(x=x, B=c(k[1], (d, n)), C=c(k[2], (d, n)), h0=c(k[3], (b, d, n)))
  if family == "rotation":
    return scan.Factors("rotation", theta=jax.random.uniform(k[4], (b, t, n), minval=-3.0,
                                                          maxval=3.0), **common_)
  if family in ("constant", "complex"):  # a per (channel, state), or per (step, state)
    shape = (d, n) if family == "constant" else (b, t, n)
    radius = jax.random.uniform(k[4], shape, minval=0.5, maxval=0.999)
    angle = jax.random.uniform(k[5], shape, minval=-3.0, maxval=3.0)
    return scan.Factors(family, a=radius * jnp.exp(1j * angle), **common_)
  raise ValueError(f"no factors for {family!r}; choose one of {', '.join(scan.FAMILIES)}")


def _rel_err(got, want) -> float:
  return max(float(jnp.linalg.norm(a - r) / jnp.linalg.norm(r))
             for a, r in zip(jax.tree.leaves(got), jax.tree.leaves(want)))


def _matches(row: dict, got, want) -> bool:
  """Records a timed tile's error against the reference in its row: whether it may be best."""
  row["rel_err"] = float(f"{_rel_err(got, want):.2e}")
  row["matches_reference"] = row["rel_err"] <= TOLERANCE
  return row["matches_reference"]


def _stacked_factors(family, sizes, k):
  return jax.tree.map(lambda *v: jnp.stack(v), *[
      random_factors(family, sizes["batch"], sizes["length"], sizes["d_model"],
                     sizes["d_state"], key=i) for i in range(k)])


def _references(f):
  """The associative scan's y and gradients, run by run (lax.map): k materialized states at
  once would not fit a GPU."""
  reference = lambda f: scan.diagonal_scan(f, "associative")
  one_grad = jax.grad(lambda f: jnp.sum(jnp.sin(reference(f))))
  return (jax.jit(lambda f: jax.lax.map(reference, f))(f),
          jax.jit(lambda f: jax.lax.map(one_grad, f))(f))


def _fwd(fn):
  return jax.jit(jax.vmap(fn))


def _grad(fn):
  return jax.jit(jax.vmap(jax.grad(lambda f: jnp.sum(jnp.sin(fn(f))))))


def _time(fn, f, reps, k, row):
  """Times fn on f (k runs), fills row; (ms per run, output) or (None, None) if it failed."""
  try:
    _, run_s, out, _ = timed(fn, f, reps=reps)
  except Exception as e:  # a tile Triton cannot compile (registers, shared memory): a result
    row["error"] = f"{type(e).__name__}: {str(e)[:120]}"
    return None, None
  row["ms_per_run"] = round(run_s / k * 1e3, 4)
  return row["ms_per_run"], out


def checked_row(section, kind, family, kernel, tile, fn, f, want, reps, k, timings, **extra):
  """One timed tile, checked against the reference output `want`: its row; a tile that matches
  goes into timings[kernel] (where the caller keeps that kernel's candidates)."""
  row = {"kind": kind, "family": family, "kernel": kernel, "tile": list(tile), "chunk": None,
         **extra}
  ms, out = _time(fn, f, reps, k, row)
  if ms is not None and _matches(row, out, want) and kernel in timings:
    timings[kernel][tuple(tile)] = ms
  common.progress(f"{section}: {kind} {kernel} {tile}: {row.get('ms_per_run', row.get('error'))}")
  return row


def sweep_pair(run, scan_with, grid, want_y, want_g, timings, default_forward):
  """The forward tiles alone, then forward + backward over the backward tiles with the fastest
  forward fixed (`run(kernel, fn, want, tile, **extra)` times and checks one; scan_with(**tiles)
  is the scan at those tiles); returns that forward tile (`default_forward` if none matched)."""
  for tile in grid["forward"]:
    run("forward", _fwd(scan_with(forward=tile)), want_y, tile)
  best_fwd = min(timings["forward"], key=timings["forward"].get, default=default_forward)
  for tile in grid["backward"]:
    run("backward", _grad(scan_with(forward=best_fwd, backward=tile)), want_g, tile,
        forward_tile=list(best_fwd))
  return best_fwd


def check_channels_first(run, rows, scan_at_best, want_g, key, best_fwd) -> dict:
  """The best pair once more on channels-first factors, as the layers build them when
  `CHANNELS_FIRST_LAYERS` is on (the sweep itself reads batch-major ones), checked against the
  same reference (values through the gradient of sin y, then gradients); its time includes the
  transposes in and out and is not compared. On an H200 the two layer layouts trained the same
  runs 2.5e-2 apart at one swept tile and 2.3e-7 at the committed ones: this says whether the
  kernel or rounding was the cause. The fields for the kind's `best`."""
  moved = lambda f: jnp.moveaxis(scan_at_best(f.to_channels_first()), 0, -1)
  run("backward, channels first", _grad(moved), want_g, key, forward_tile=list(best_fwd))
  return {"channels_first_rel_err": rows[-1].get("rel_err"),
          "channels_first_matches": bool(rows[-1].get("matches_reference"))}


def sweep_blocks(run_blocks, rows, key, d_model: int, fastest: float):
  """The best backward tile `key` again with 2 to 16 channel blocks per program
  (`PARALLEL_BLOCKS`: fewer partial sums of the gradients shared over channels), as many as the
  channels hold; run_blocks(n) appends the timed row. ({n: ms or None}, the fastest count: 1
  unless one beats `fastest`)."""
  blocks, per_blocks = 1, {}
  for n in PARALLEL_BLOCKS:
    if key[0] * n > d_model:
      break
    run_blocks(n)
    per_blocks[n] = rows[-1].get("ms_per_run") if rows[-1].get("matches_reference") else None
    if per_blocks[n] is not None and per_blocks[n] < fastest:
      fastest, blocks = per_blocks[n], n
  return per_blocks, blocks


def bench_tiles(reps, sizes: dict, k: int = 27, models=("negmamba", "aussm", "s4d"), grid=None,
                need_gpu: bool = True):
  """Rows per (kind, kernel, tile) and the best tiles per kind. Off a GPU (need_gpu=False,
  tests) the kernel runs in interpret mode: checks, not timings."""
  if need_gpu and jax.default_backend() != "gpu":
    raise common.UsageError("the tiles section times the Triton kernel and needs a GPU")
  from ssm_bench.scan import pallas
  grid = grid or GRID
  z = sizes
  rows, best = [], {}
  for kind, family in kinds_of(models).items():
    f = _stacked_factors(family, z, k)
    fused = lambda **kw: (lambda f: pallas.scan(f, **kw))
    want_y, want_g = _references(f)
    timings = {"forward": {}, "backward": {}}

    def forward(tile, prefetch=False):
      row = {"kind": kind, "family": family, "tile": list(tile), "chunk": pallas.CHUNK[kind],
             "kernel": "forward" + ("+prefetch" if prefetch else "")}
      ms, y = _time(_fwd(fused(forward=tile, prefetch=prefetch)), f, reps, k, row)
      if ms is not None and _matches(row, y, want_y) and not prefetch:
        timings["forward"][tuple(tile)] = ms
      rows.append(row)
      common.progress(f"tiles: {kind} {row['kernel']} {tile}: "
                      f"{row.get('ms_per_run', row.get('error'))}")

    for tile in grid["forward"]:
      forward(tile)
    best_fwd = min(timings["forward"], key=timings["forward"].get, default=pallas.FORWARD[kind])

    def backward(tile, chunk, join=False, prefetch=False):
      """Times forward + backward with this backward tile; its key if it matches."""
      row = {"kind": kind, "family": family, "kernel": "backward" + ("+join" if join else "")
             + ("+prefetch" if prefetch else ""), "tile": list(tile), "chunk": chunk,
             "forward_tile": list(best_fwd)}
      ms, g = _time(_grad(fused(forward=best_fwd, backward=tile, chunk=chunk, join=join,
                               prefetch=prefetch)), f, reps, k, row)
      if ms is not None and _matches(row, g, want_g):
        timings["backward"][(tuple(tile), chunk, join, prefetch)] = ms
      rows.append(row)
      common.progress(f"tiles: {kind} forward+{row['kernel']} {tile} chunk {chunk}: "
            f"{row.get('ms_per_run', row.get('error'))}")

    fastest = lambda: min(timings["backward"], key=timings["backward"].get)
    for chunk in grid["chunk"]:
      for tile in grid["backward"]:
        backward(tile, chunk)
    if timings["backward"] and kind == "real":  # the best tile again, reductions joined
      backward(*fastest()[:2], join=True)
    if timings["backward"]:  # the best so far with each chunk, its inputs prefetched
      forward(best_fwd, prefetch=True)
      tile, _, join, _ = fastest()
      for chunk in grid.get("prefetch_chunk", grid["chunk"]):
        backward(tile, chunk, join=join, prefetch=True)
      key = fastest()
      best[kind] = {"family": family, "forward": list(best_fwd), "backward": list(key[0]),
                    "chunk": key[1], "join": key[2], "prefetch": key[3],
                    "fwd_bwd_ms_per_run": timings["backward"][key]}
  return {"k": k, "sizes": dict(z), "defaults": {"forward": pallas.FORWARD,
                                                 "backward": pallas.BACKWARD,
                                                 "chunk": pallas.CHUNK,
                                                 "prefetch": pallas.PREFETCH},
          "rows": rows, "best": best}


def bench_parallel_tiles(reps, sizes: dict, k: int = 27, kinds=("real", "phase", "const"),
                         grid=None, need_gpu: bool = True):
  """The time-parallel kernel's tiles per kind: rows per (kernel, tile), the best pair, and
  `pallas.scan` at its own tiles on the same factors for the ratio. `kinds`: a list of kinds
  (REPRESENTATIVE's factors) or `kinds_of`'s {kind: family}."""
  if need_gpu and jax.default_backend() != "gpu":
    raise common.UsageError("the parallel_tiles section times the Triton kernel and needs a GPU")
  from ssm_bench.scan import pallas
  grid = grid or {"forward": PARALLEL_GRID, "backward": PARALLEL_GRID}
  parallel = lambda **kw: (lambda f: pallas_parallel.scan(f, **kw))
  rows, best = [], {}
  for kind, family in families_of(kinds).items():
    f = _stacked_factors(family, sizes, k)
    want_y, want_g = _references(f)
    timings = {"forward": {}, "backward": {}}

    def run(kernel, fn, want, tile, **extra):
      rows.append(checked_row("parallel_tiles", kind, family, kernel, tile, fn, f, want, reps,
                              k, timings, **extra))

    best_fwd = sweep_pair(run, parallel, grid, want_y, want_g, timings,
                          pallas_parallel.FORWARD[kind])
    # the step-by-step kernel at its own tiles, same factors: what the new layout must beat
    run("pallas (step by step)", _grad(pallas.scan), want_g, pallas.BACKWARD[kind])
    pallas_ms = rows[-1].get("ms_per_run")
    if timings["backward"]:
      key = min(timings["backward"], key=timings["backward"].get)
      # the best pair again in the other layouts: per-state rows time-major, then everything
      # (the layers' own (batch, time, channels) layout; `pallas_parallel.LAYOUTS`)
      per_layout = {False: timings["backward"][key]}
      for name, value in (("rows time-major", "rows"), ("time-major", True)):
        run(f"backward, {name}", _grad(parallel(forward=best_fwd, backward=key,
                                                time_major=value)), want_g, key,
            forward_tile=list(best_fwd))
        if rows[-1].get("matches_reference"):
          per_layout[value] = rows[-1]["ms_per_run"]
      time_major = min(per_layout, key=per_layout.get)
      # then, in the fastest layout, several channel blocks per backward program
      per_blocks, blocks = sweep_blocks(
          lambda n: run(f"backward, {n} blocks", _grad(parallel(
              forward=best_fwd, backward=key, time_major=time_major, blocks=n)), want_g, key,
              forward_tile=list(best_fwd), blocks=n),
          rows, key, sizes["d_model"], per_layout[time_major])
      cf = check_channels_first(run, rows, parallel(forward=best_fwd, backward=key,
                                                    blocks=blocks), want_g, key, best_fwd)
      best[kind] = {"family": family, "forward": list(best_fwd), "backward": list(key),
                    "fwd_bwd_ms_per_run": timings["backward"][key], **cf,
                    "pallas_fwd_bwd_ms_per_run": pallas_ms,
                    "rows_time_major_fwd_bwd_ms_per_run": per_layout.get("rows"),
                    "time_major_fwd_bwd_ms_per_run": per_layout.get(True),
                    "time_major": time_major,
                    "blocks_fwd_bwd_ms_per_run": per_blocks, "blocks": blocks}
  return {"k": k, "sizes": dict(sizes), "defaults": {
      "forward": pallas_parallel.FORWARD, "backward": pallas_parallel.BACKWARD,
      "time_major": pallas_parallel.TIME_MAJOR, "blocks": pallas_parallel.CHANNEL_BLOCKS},
          "rows": rows, "best": {"parallel": best} if best else {}}
