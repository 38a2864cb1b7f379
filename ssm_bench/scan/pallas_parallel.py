"""Fused diagonal-SSM scan in Pallas, parallel over time inside each program (the `pallas_parallel`
method): the layout of Mamba's CUDA selective scan, for every scan family.

`pallas.py` walks time step by step with the whole (channels, states) state in registers, so
each step pays a cross-thread reduction over the states for y_t (the backward, four per step)
and every program is a chain of T dependent steps. On an H100 it ran at 1.8% of its memory
floor and was 73% of a mamba training step (BUILD_NOTES, Performance). Here a program holds a
(channels, time) tile of the whole sequence and loops over the states n instead, one hardware
scan over time per state (the kernels' bodies: `pallas_parallel_kernels`): no reduction over
the states at all, and the steps of a state run in parallel across threads.

This module is the call: tiles and layouts, block specs, the custom VJP. Time sits on the tile's
minor axis, so a scan stays inside a warp's lanes where it can: the per-step arrays are
transposed outside, read in the layers' layout (`TIME_MAJOR`, `LAYOUTS`), or written by
channels-first layers as the kernels read them (`CHANNELS_FIRST_LAYERS`). The phase kind's
kernels read cos and sin of theta, not theta. The whole sequence must fit a program's
registers: longer than `MAX_LENGTH` steps (evaluation) go to `pallas.scan` (same contract).

The GPU's `auto` since its H100 timing (BUILD_NOTES, "Scan core"). Off GPU it runs in Pallas's
interpret mode (tests).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from ssm_bench.scan import factors as F
from ssm_bench.scan import pallas as sequential_kernel
from ssm_bench.scan import pallas_kernels
from ssm_bench.scan import pallas_parallel_kernels as kernels

# (channels per program, warps) of each kernel, per kernel kind (`pallas.KINDS`), for a time
# axis of up to TILE_SPAN rows (63 steps: the paper trains at 60). The fastest forward +
# backward of `launch.bench --sections=parallel_tiles` at the paper cell, 27 runs: real on an
# H100 (mamba's decay family 0.635 ms per run; on an H200 the sweep's (8, 1) / (4, 1) was 0.587
# against these tiles' 0.590, kept), phase on an H200 (0.970 ms; its aussm step 1.143 -> 1.042;
# results/bench/README.md, "H200, fifth session"), const on an H200 (s4d, 1.114 ms per run
# against the earlier guess (16, 4)'s 1.209; the step-by-step kernel took 0.556, so s4d's GPU
# `auto` is that one: `scan.AUTO_BY_FAMILY`; "H200, sixth session").
FORWARD = {"real": (8, 2), "phase": (32, 4), "const": (8, 1)}
BACKWARD = {"real": (8, 1), "phase": (8, 1), "const": (4, 1)}
# Which per-step arrays reach the kernels in the layers' own (batch, time, channels) layout, a
# `LAYOUTS` key: time-minor ones are transposed by XLA outside (27.6% of a 27-run mamba step on
# an H100), time-major ones read as they are. Timed on an H200 (`--sections=parallel_tiles`):
# both time-major layouts lost (real 3.3-3.5 ms per run against 0.59, phase 1.5-2.0 against
# 0.97), so False; channels-first layers removed the transposes instead.
TIME_MAJOR = {"real": False, "phase": False, "const": False}
# (channel tiles, per-state rows) time-major: nothing (False); the rows alone ("rows": B, C,
# theta and their gradients, strided row reads and writes, no instruction more); everything
# (True: the tiles transposed in registers, 1.4-1.6x the instructions of the real kernels).
LAYOUTS = {False: (False, False), "rows": (False, True), True: (True, True)}
# Channel blocks of BACKWARD's width that one backward program walks in turn. The gradients of
# arrays shared over channels (B and C of the real kind, theta of phase) are written as one
# partial sum per program, summed outside by XLA: at 1 block per program, (8, 1) tiles and the
# paper cell that is 16 partials of (N, T) per batch row, 134 MB per mamba run-step written and
# read again (its sum, with a transpose, was the costliest op outside the kernel in an H100
# profile: 1.32 ms of a 27-run step of 29.3). With k blocks a program adds its blocks' sums in
# place (a barrier between blocks; no atomics, so the order is fixed and runs stay
# deterministic): k times fewer partials, same registers. 2-16 blocks lost on an H200 (real
# 0.72-0.74 ms per run against 0.59, phase 1.04-1.08 against 0.97): 1.
CHANNEL_BLOCKS = {"real": 1, "phase": 1, "const": 1}
# Whether the diagonal layers build their factors channels first, (channels, batch, time), when
# this kernel or `pallas_chunked` runs them (`scan.channels_first`): their matmuls then write
# the time-minor tiles directly and the transposes go without a kernel change (`TIME_MAJOR`
# moves them into the kernel instead). On an H200 (`--sections=train_many --layer_layouts`,
# 27-run steps) they were faster with both kernels for every model timed: mamba 0.807 -> 0.695
# ms per run-step with `pallas_chunked`, aussm 0.941 -> 0.847.
CHANNELS_FIRST_LAYERS = True
TILE_SPAN = 64
MAX_LENGTH = 255  # steps; the tile's time axis is the next power of two of length + 1

# The scan's inputs per kind, in order (`pallas.cos_sin_inputs` maps them to `kernels.INPUTS`)
NAMES = {**kernels.INPUTS, "phase": ("x", "theta") + kernels.INPUTS["phase"][3:]}


def layout(time_major) -> tuple[bool, bool]:
  """(tiles, rows) time-major for a `TIME_MAJOR` value; one error naming the choices."""
  if time_major not in LAYOUTS:  # 1 and 0 would pass as True and False: fine
    raise ValueError(f"pallas_parallel layout {time_major!r}: choose one of {list(LAYOUTS)}")
  return LAYOUTS[time_major]


def default_tile(tile: tuple[int, int], span: int) -> tuple[int, int]:
  """A default tile for a time axis of `span` rows. A program holds its whole sequence, so a
  longer one takes fewer channels and each thread keeps as many elements as at TILE_SPAN: at
  255 steps (16, 4) spills 968-1,400 bytes per thread in the backward, (4, 4) none (ptxas, Triton
  3.3.1, sm_90: `launch.bench --sections=registers`). Tiles passed to `scan` are used as given."""
  channels, warps = tile
  return max(1, channels * TILE_SPAN // max(span, TILE_SPAN)), warps


# ---- pallas_call plumbing: per-step arrays time-minor (transposed outside), with `tm` in the
# layers' (batch, time, channels) layout, or with `cf` channels first: (channels, batch, time),
# the time-minor tiles as a channels-first layer wrote them ---------------------------------

def _per_td(bd, rows, tm, cf=False):
  if cf:
    return pl.BlockSpec((bd, None, rows), lambda i, j: (j, i, 0))
  return (pl.BlockSpec((None, rows, bd), lambda i, j: (i, 0, j)) if tm
          else pl.BlockSpec((None, bd, rows), lambda i, j: (i, j, 0)))


def _td_shape(b, D, rows, tm, cf):
  """A per-(step, channel) array's stored shape."""
  return (D, b, rows) if cf else _layout((b, D, rows), tm)


def _layout(shape, tm):
  """A (..., a, time) shape as stored, and back: time-major swaps the last two."""
  return tuple(shape[:-2]) + ((shape[-1], shape[-2]) if tm else tuple(shape[-2:]))


def _in_specs(kind, bd, N, rows, tm, cf, shared_h0):
  per_td = _per_td(bd, rows, tm[0], cf)
  per_tn = (pl.BlockSpec((N, None, rows), lambda i, j: (0, i, 0)) if cf else
            pl.BlockSpec((None,) + _layout((N, rows), tm[1]), lambda i, j: (i, 0, 0)))
  per_nd = pl.BlockSpec((N, bd), lambda i, j: (0, j))
  # h0 shared by every batch row (the layers' (d, n)) is read as such, not as a per-row copy
  h0 = per_nd if shared_h0 else pl.BlockSpec((None, N, bd), lambda i, j: (i, 0, j))
  if kind == "real":
    return [per_td, per_td, per_nd, per_tn, per_tn, h0]
  transition = [per_tn] * 2 if kind == "phase" else [per_nd] * 2  # cos, sin or ar, ai
  return [per_td] + transition + [per_nd] * 4 + [h0] * 2


def _dims(shape, tm, cf):
  """(batch, channels, rows) of a stored per-(step, channel) array."""
  return (shape[1], shape[0], shape[2]) if cf else _layout(shape, tm[0])


def _n_states(kind, ins):
  return ins[NAMES[kind].index("lam" if kind == "real" else "Br")].shape[0]


def _shared_h0(kind, ins):
  """Whether h0 came as (n, d), shared by every batch row, rather than one per row."""
  return ins[NAMES[kind].index("h0" if kind == "real" else "h0r")].ndim == 2


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _fused(static, *ins):
  kind, neg, (bd, warps), _, interpret, tm, _, cf = static
  b, D, rows = _dims(ins[0].shape, tm, cf)
  N, span = _n_states(kind, ins), rows - 2
  kernel = functools.partial(kernels.forward_kernel, kind=kind, neg=neg, span=span, n_states=N,
                             tm=tm)
  return pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct(_td_shape(b, D, span, tm[0], cf), jnp.float32),
      grid=(b, D // bd), in_specs=_in_specs(kind, bd, N, rows, tm, cf, _shared_h0(kind, ins)),
      out_specs=_per_td(bd, span, tm[0], cf), interpret=interpret,
      **sequential_kernel._compiler_params(interpret, warps))(
          *pallas_kernels.cos_sin_inputs(kind, ins))


def _fused_fwd(static, *primals):
  """With symbolic zeros: whether h0 is differentiated (a learned initial state) or not (the
  paper's constant one: the backward then computes no h0 gradient, a reduction over time per
  state fewer). The answer travels as the residuals' structure, which is static."""
  ins = tuple(p.value for p in primals)
  h0 = [i for i, name in enumerate(NAMES[static[0]]) if name.startswith("h0")]
  h0_grad = any(primals[i].perturbed for i in h0)
  return _fused(static, *ins), (ins, ()) if h0_grad else (ins,)


def _fused_bwd(static, res, dy):
  ins, h0_grad = res[0], len(res) == 2
  kind, neg, _, (block, warps), interpret, tm, blocks, cf = static
  b, D, rows = _dims(ins[0].shape, tm, cf)
  bd = block * blocks  # a program's channels
  N, span, n_d = _n_states(kind, ins), rows - 2, D // bd
  f32 = jnp.float32
  per_td = (jax.ShapeDtypeStruct(_td_shape(b, D, span, tm[0], cf), f32),
            _per_td(bd, span, tm[0], cf))
  # gradients of arrays shared over channels: one partial sum per program (no atomics, which
  # would make a run nondeterministic; `CHANNEL_BLOCKS`); of (n, d) arrays, one per batch row
  per_tn = ((jax.ShapeDtypeStruct((n_d, N, b, span), f32),
             pl.BlockSpec((None, N, None, span), lambda i, j: (j, 0, i, 0))) if cf else
            (jax.ShapeDtypeStruct(_layout((b, n_d, N, span), tm[1]), f32),
             pl.BlockSpec((None, None) + _layout((N, span), tm[1]), lambda i, j: (i, j, 0, 0))))
  partials = 0 if cf else 1  # the axis of per_tn's partial sums
  per_nd = (jax.ShapeDtypeStruct((b, N, D), f32),
            pl.BlockSpec((None, N, bd), lambda i, j: (i, 0, j)))
  n_h0 = kernels.h0_count(kind) if h0_grad else 0
  outs = {"real": [per_td, per_td, per_nd, per_tn, per_tn],
          "phase": [per_td, per_tn] + [per_nd] * 4, "const": [per_td] + [per_nd] * 6}[kind]
  outs += [per_nd] * n_h0
  kernel = functools.partial(kernels.backward_kernel, kind=kind, neg=neg, span=span, n_states=N,
                             tm=tm, blocks=blocks, barrier=not interpret, h0_grad=h0_grad)
  g = pl.pallas_call(
      kernel, out_shape=[o[0] for o in outs], grid=(b, n_d),
      in_specs=_in_specs(kind, bd, N, rows, tm, cf, _shared_h0(kind, ins)) + [per_td[1]],
      out_specs=[o[1] for o in outs],
      interpret=interpret, **sequential_kernel._compiler_params(interpret, warps))(
          *pallas_kernels.cos_sin_inputs(kind, ins), dy)
  # back onto the padded rows of the inputs: row 0 and the last row feed nothing
  td, tn = tm
  rows_of = lambda v, major: jnp.pad(v, [(1, 1) if i == (1 if major else v.ndim - 1) else (0, 0)
                                         for i in range(v.ndim)])
  shared = _shared_h0(kind, ins)  # then each batch row's h0 gradient adds into the one h0
  g, dh0 = g[:len(g) - n_h0], (tuple(v.sum(0) if shared else v for v in g[len(g) - n_h0:])
                               or (None,) * kernels.h0_count(kind))
  if kind == "real":
    dx, ddt, dlam, dB, dC = g
    return ((rows_of(dx, td), rows_of(ddt, td), dlam.sum(0), rows_of(dB.sum(partials), tn),
             rows_of(dC.sum(partials), tn)) + dh0)
  if kind == "phase":
    dx, dth, dBr, dBi, dCr, dCi = g
    return ((rows_of(dx, td), rows_of(dth.sum(partials), tn))
            + tuple(v.sum(0) for v in (dBr, dBi, dCr, dCi)) + dh0)
  dx, *per_nd_grads = g  # d ar, d ai, d Br, d Bi, d Cr, d Ci
  return (rows_of(dx, td),) + tuple(v.sum(0) for v in per_nd_grads) + dh0


_fused.defvjp(_fused_fwd, _fused_bwd, symbolic_zeros=True)


def supports(f: F.Factors) -> bool:
  """Whether this kernel takes `f`; otherwise `scan` hands it to the sequential kernel."""
  return f.length <= MAX_LENGTH


def scan(f: F.Factors, forward: tuple[int, int] | None = None,
         backward: tuple[int, int] | None = None, interpret: bool | None = None,
         time_major: bool | str | None = None, blocks: int | None = None):
  """y (b, t, d) of the factored recurrence, fused; same contract as the reference.
  `forward` / `backward`: (channels per program, warps) of each kernel; `time_major`: the
  layout the kernels read (a `LAYOUTS` value; default `TIME_MAJOR` of the kind); `blocks`:
  channel blocks per backward program (default `CHANNEL_BLOCKS` of the kind, at most the
  channels need). Channels-first factors are read as they are (their tiles are time-minor
  already: `time_major` does not apply), and y is then (d, b, t)."""
  f, cf = f.discretized(), f.channels_first
  if not supports(f):
    y = sequential_kernel.scan(f.batch_major(), interpret=interpret)
    return jnp.moveaxis(y, -1, 0) if cf else y
  if interpret is None:
    interpret = jax.default_backend() != "gpu"
  D, b, T = f.x.shape if cf else (f.x.shape[2], f.x.shape[0], f.x.shape[1])
  span = sequential_kernel._pow2(T + 1)  # row 0 holds h0, rows 1..T the steps
  N, kind = f.h0.shape[-1], sequential_kernel.KINDS[f.family]
  fwd = sequential_kernel._tile(forward, default_tile(FORWARD[kind], span), D)
  bwd = sequential_kernel._tile(backward, default_tile(BACKWARD[kind], span), D)
  blocks = CHANNEL_BLOCKS[kind] if blocks is None else blocks
  sequential_kernel._check_pow2("channel blocks per program", blocks)
  blocks = max(1, min(blocks, sequential_kernel._pow2(D) // bwd[0]))
  bd = max(fwd[0], bwd[0] * blocks)
  Dp = -(-D // bd) * bd
  tm = (False, False) if cf else layout(TIME_MAJOR[kind] if time_major is None else time_major)
  f32 = lambda v: v.astype(jnp.float32)
  # two rows in front (empty, h0) and span + 2 rows in all; time-minor unless `major`
  per_t = lambda v, width, major: (
      jnp.pad(f32(v), ((0, width - v.shape[0]), (0, 0), (2, span - T))) if cf else
      jnp.pad(f32(v), ((0, 0), (2, span - T), (0, width - v.shape[2]))) if major else
      jnp.pad(jnp.swapaxes(f32(v), 1, 2), ((0, 0), (0, width - v.shape[2]), (2, span - T))))
  tile, row = (lambda v: per_t(v, Dp, tm[0])), (lambda v: per_t(v, N, tm[1]))
  per_nd = lambda v: sequential_kernel._pad(f32(v).T, (None, Dp))  # (d, n) -> (n, Dp)
  h0 = lambda v: (per_nd(v) if v.ndim == 2 else  # shared (d, n), or (b, d, n) -> (b, n, Dp)
                  sequential_kernel._pad(jnp.swapaxes(f32(v), 1, 2), (None, None, Dp)))
  if kind == "real":
    ins = (tile(f.x), tile(f.dt), per_nd(f.lam), row(f.B), row(f.C), h0(f.h0))
  else:
    transition = ((row(f.theta),) if kind == "phase"
                  else (per_nd(f.a.real), per_nd(f.a.imag)))
    ins = ((tile(f.x),) + transition + (per_nd(f.B.real), per_nd(f.B.imag), per_nd(f.C.real),
                                             per_nd(f.C.imag), h0(f.h0.real), h0(f.h0.imag)))
  static = (kind, f.family == "signed_decay", fwd, bwd, interpret, tm, blocks, cf)
  y = _fused(static, *ins)  # (b, Dp, span), time-major (b, span, Dp) or cf (Dp, b, span)
  if cf:  # row r + 1 is step r
    return y[:D, :, 1:T + 1]
  return y[:, 1:T + 1, :D] if tm[0] else jnp.swapaxes(y[:, :D, 1:T + 1], 1, 2)
