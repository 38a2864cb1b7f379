"""The chunked kernel's tiles (`pallas_chunked`), swept on the GPU:
`python -m launch.bench --sections=chunked_tiles`.

For each kernel kind of `--models` the chunked kernel has (real: mamba, negmamba; phase: aussm),
k runs under vmap: the forward kernel alone over `GRID["forward"]`, then forward + backward over
`GRID["backward"]` with the fastest forward fixed, every tile checked against the associative
scan (values, then gradients), and the best pair with 2 to 16 channel blocks per backward
program (`pallas_chunked.CHANNEL_BLOCKS`); for the real kind also the backward that loops over
channels (`GRID["channel_loop"]`, `pallas_chunked.BACKWARD_LOOP`); then `pallas_parallel` at
its own tiles on the same factors (as `parallel_tiles --apply_tiles` left them, if it ran
first): the ratio that decides whether `scan.AUTO` takes the chunked kernel for that family.
The best pair is timed again at 8 steps per chunk where its own L is not a power of two
(`pallas_chunked.STEPS`), and then with each pass of the kernels' loops taking the next
state's inputs ahead, or two states (`pallas_chunked.PASS`). For the real kind the forward
tiles include the forward that loops over time (tiles marked "time" in `GRID["forward"]`,
`pallas_chunked.FORWARD_LOOP`). The `best` line gives the values for `pallas_chunked.FORWARD`
(or `FORWARD_BY_TIME`), `FORWARD_LOOP`, `BACKWARD`, `CHANNEL_BLOCKS`, `BACKWARD_LOOP`, `STEPS`
and `PASS`; `--apply_tiles` makes them the defaults for the sections after it in the same run.
"""
from __future__ import annotations

import jax

from launch import common
from launch.bench_tiles import (_fwd, _grad, _references, _stacked_factors,
                                check_channels_first, checked_row, families_of, sweep_blocks,
                                sweep_pair)

# Around the tiles PTX counts rank best at the paper cell (results/bench/README.md, "Instruction
# counts"): 1 or 2 warps; (16, 1) backward spills a little (240-260 bytes) but counts fewest.
# A third entry is the forward's own steps per chunk (`pallas_chunked.FORWARD`): at 16, fewer
# instructions counted for (8, 1) and (16, 1) of both kinds (results/bench/README.md). Left
# out, as both H200 sweeps (h200/8_*, 9_*) timed them 11-58% slower than the fastest tile of
# each kind: forward (32, 1) and (32, 2), backward (8, 2) and (16, 2).
# A forward tile marked TIME is the real kind's forward looping over time (one channel a lane:
# (32, 1) counted fewest per run at the paper cell, (64, 2) and (128, 4) the same code in fewer
# programs; results/bench/README.md, "The forward walking time").
TIME = "time"
GRID = {"forward": [(8, 1), (16, 1), (16, 2), (8, 1, 16), (16, 1, 16), (16, 2, 16),
                    (32, 1, TIME), (64, 2, TIME), (128, 4, TIME)],
        "backward": [(4, 1), (8, 1), (16, 1)],
        # the real kind's backward looping over channels (`pallas_chunked.BACKWARD_LOOP`): the
        # tiles PTX counts without spills at the paper cell, (128, 4) the fewest instructions
        "channel_loop": [(32, 4), (64, 4), (128, 4), (128, 8)]}


def _ms(row):
  """A timed row's ms per run, if it matched the reference."""
  return row.get("ms_per_run") if row.get("matches_reference") else None


def _scan_args(forward=None, **kw) -> dict:
  """`pallas_chunked.scan`'s (or `plan`'s) arguments for a sweep's forward tile: one marked
  TIME is the time loop's (channels, warps)."""
  if forward is not None and forward[-1] == TIME:
    return dict(kw, forward=tuple(forward[:-1]), forward_loop="time")
  return dict(kw, forward=forward)


def forward_tiles(grid: dict, kind: str) -> list:
  """The grid's forward tiles the kind has: the time loop's (marked TIME) are the real kind's."""
  return [t for t in grid["forward"] if t[-1] != TIME or kind == "real"]


def _fastest(ms_by_pass: dict) -> str:
  """The pass whose row timed fastest ("one" if none matched the reference)."""
  timed = {p: ms for p, ms in ms_by_pass.items() if ms is not None}
  return min(timed, key=timed.get, default="one")


def bench_chunked_tiles(reps, sizes: dict, k: int = 27, kinds=("real", "phase"), grid=None,
                        need_gpu: bool = True):
  """Rows per (kind, kernel, tile) and the best pair per kind. `kinds`: a list of kinds or
  `bench_tiles.kinds_of`'s {kind: family}; kinds without chunked kernels are left out. Off a
  GPU (need_gpu=False, tests) the kernels run in interpret mode: checks, not timings."""
  if need_gpu and jax.default_backend() != "gpu":
    raise common.UsageError("the chunked_tiles section times the Triton kernel and needs a GPU")
  from ssm_bench.scan import pallas, pallas_chunked, pallas_parallel
  grid = grid or GRID
  rows, best = [], {}
  for kind, family in families_of(kinds).items():
    if family not in pallas_chunked.FAMILIES:
      continue
    f = _stacked_factors(family, sizes, k)
    want_y, want_g = _references(f)
    timings = {"forward": {}, "backward": {}, "backward, channel loop": {}}
    # one state a pass of the kernels' loops unless a row says otherwise (`pallas_chunked.PASS`
    # is chosen last, below)
    chunked = lambda **kw: (lambda f: pallas_chunked.scan(f, **_scan_args(
        **{"per_pass": "one", **kw})))
    kind_grid = dict(grid, forward=forward_tiles(grid, kind))

    def run(kernel, fn, want, tile, **extra):
      rows.append(checked_row("chunked_tiles", kind, family, kernel, tile, fn, f, want, reps, k,
                              timings, **extra))

    best_fwd = sweep_pair(run, chunked, kind_grid, want_y, want_g, timings,
                          pallas_chunked.FORWARD[kind])
    by_time = best_fwd[-1] == TIME
    if timings["backward"]:
      key = min(timings["backward"], key=timings["backward"].get)
      per_blocks, blocks = sweep_blocks(
          lambda n: run(f"backward, {n} blocks", _grad(chunked(
              forward=best_fwd, backward=key, blocks=n)), want_g, key,
              forward_tile=list(best_fwd), blocks=n),
          rows, key, sizes["d_model"], timings["backward"][key])
      loop, fastest = "states", per_blocks.get(blocks) or timings["backward"][key]
      if kind == "real":  # the backward looping over channels: no partial sums of dB, dC
        per_tile = timings["backward, channel loop"]
        for tile in grid.get("channel_loop", ()):
          run("backward, channel loop", _grad(chunked(forward=best_fwd, backward=tile,
                                                      loop="channels")), want_g, tile,
              forward_tile=list(best_fwd), loop="channels")
        if per_tile and min(per_tile.values()) < fastest:
          key = min(per_tile, key=per_tile.get)
          loop, fastest, blocks = "channels", per_tile[key], 1
      cf = check_channels_first(run, rows, chunked(forward=best_fwd, backward=key,
                                                   blocks=blocks, loop=loop), want_g, key,
                                best_fwd)
      # the best pair at L = 8 too, where its L is not a power of two: time padded to a power
      # of two, as before `pallas_chunked.STEPS` took the L that pads least; if faster, the
      # kind's STEPS becomes (8, 9)
      steps, steps_range = pallas_chunked.plan(
          kind, sizes["length"], sizes["d_model"], sizes["d_state"], **_scan_args(
              forward=best_fwd, backward=key, blocks=blocks, loop=loop)).steps[1], list(
                  pallas_chunked.STEPS[kind])
      if steps & (steps - 1):
        run("backward, L = 8", _grad(chunked(forward=best_fwd, backward=key, blocks=blocks,
                                             loop=loop, steps=8)), want_g, key,
            forward_tile=list(best_fwd), steps=8)
        ms = cf["steps_8_fwd_bwd_ms_per_run"] = _ms(rows[-1])
        if ms is not None and ms < fastest:
          steps, steps_range, fastest = 8, [8, 9], ms
      # the chosen kernels again with each pass of their loops taking the next state's inputs
      # ahead, or two states (`pallas_chunked.PASS`): the forward alone against its time as
      # chosen, then forward + backward with the faster forward
      at = dict(blocks=blocks, loop=loop, steps=8 if steps_range == [8, 9] else None)
      forward_ms = {"one": timings["forward"].get(tuple(best_fwd))}
      if at["steps"] or forward_ms["one"] is None:  # not timed at these steps
        run("forward, per pass: one", _fwd(chunked(forward=best_fwd, per_pass="one", **at)),
            want_y, best_fwd)
        forward_ms["one"] = _ms(rows[-1])
      passes = pallas_chunked.kernels.PASSES
      for style in passes[1:]:  # states a pass, or the time loop's steps
        run(f"forward, per pass: {style}", _fwd(chunked(forward=best_fwd, per_pass=style, **at)),
            want_y, best_fwd, per_pass=style)
        forward_ms[style] = _ms(rows[-1])
      fwd_pass = _fastest(forward_ms)
      both_ms = {"one": fastest}
      if fwd_pass != "one":  # the backward's baseline with the forward as it will run
        run("backward, per pass: one", _grad(chunked(
            forward=best_fwd, backward=key, per_pass=(fwd_pass, "one"), **at)), want_g, key,
            forward_tile=list(best_fwd), per_pass=[fwd_pass, "one"])
        both_ms["one"] = _ms(rows[-1])
      # two channels a pass would spill: the channel loop's tiles are at 255 registers already
      for style in passes[1:] if loop == "states" else passes[1:2]:
        run(f"backward, per pass: {style}", _grad(chunked(
            forward=best_fwd, backward=key, per_pass=(fwd_pass, style), **at)), want_g, key,
            forward_tile=list(best_fwd), per_pass=[fwd_pass, style])
        both_ms[style] = _ms(rows[-1])
      bwd_pass = _fastest(both_ms)
      fastest = both_ms.get(bwd_pass) or fastest
      cf.update(per_pass_fwd_ms_per_run=forward_ms, per_pass_fwd_bwd_ms_per_run=both_ms)
      best[kind] = {"family": family, "forward": list(best_fwd[:2] if by_time else best_fwd),
                    "forward_loop": TIME if by_time else "states", "backward": list(key),
                    "steps_per_chunk": steps, "steps": steps_range,
                    "fwd_bwd_ms_per_run": fastest, "per_pass": [fwd_pass, bwd_pass], **cf,
                    "blocks_fwd_bwd_ms_per_run": per_blocks, "blocks": blocks, "loop": loop,
                    "channel_loop_fwd_bwd_ms_per_run": {
                        str(t): ms for t, ms in timings["backward, channel loop"].items()}}
    if family not in pallas.KINDS:  # the complex family: no time-parallel kernel to beat
      continue
    run("pallas_parallel", _grad(pallas_parallel.scan), want_g,
        pallas_parallel.BACKWARD[pallas.KINDS[family]])
    if kind in best:
      best[kind]["pallas_parallel_fwd_bwd_ms_per_run"] = rows[-1].get("ms_per_run")
  return {"k": k, "sizes": dict(sizes), "defaults": {"forward": pallas_chunked.FORWARD,
                                                     "forward_loop": pallas_chunked.FORWARD_LOOP,
                                                     "forward_by_time":
                                                         pallas_chunked.FORWARD_BY_TIME,
                                                     "backward": pallas_chunked.BACKWARD,
                                                     "blocks": pallas_chunked.CHANNEL_BLOCKS,
                                                     "loop": pallas_chunked.BACKWARD_LOOP,
                                                     "per_pass": pallas_chunked.PASS},
          "rows": rows, "best": {"chunked": best} if best else {}}
