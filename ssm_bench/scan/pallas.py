"""Fused diagonal-SSM scan in Pallas (Triton lowering) behind a custom VJP.

One program per (batch row, block of `block_d` channels): the (block_d, N) state lives in
registers across the time loop and only y_t and the states at chunk boundaries are written.
The backward kernel walks the chunks in reverse: it recomputes one chunk's L states from the
saved boundary (a Python-unrolled loop, so they stay registers, not memory), then runs the
adjoint recurrence g_{t-1} = a_t g_t + dy_{t-1} C_{t-1} through them. It never divides by a_t
(a signed_decay a_t can be 0 or negative).

Complex families travel as real/imaginary pairs (Triton has no complex dtype). Triton wants
power-of-two sizes for what a program loads and stores (a step's row of channels or states, a
(channels, states) tile), so channels and state are padded to powers of two (x = 0, B = C = h0 =
0), which changes no output; time is only padded to a whole number of chunks, as a step reads
one row of it (10,000 steps stay 10,000, not 16,384). Off GPU the kernel runs in `interpret` mode (for tests; slow).

Tiles: the forward and backward kernels take their own (channels per program, warps), since the
backward holds chunk + 1 states per program and may want a smaller tile than the forward; the
chunk (steps between saved states) is shared by the two. A sweep on an H100 (results/bench/README.md,
Performance) picked 16 channels and 4 warps for the real family and chunks of 8 steps, timed
with the same tile in both kernels; the complex families keep 8 channels (not swept yet).
`launch.bench --sections=tiles` sweeps the two kernels separately, then times the best tiles with
the backward's reductions joined and with each chunk's inputs prefetched (`_Io`).

The kernels' bodies are in `pallas_kernels.py`; this module holds their tiles, the pallas_call
plumbing and the custom VJP.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from ssm_bench.scan import factors as F
from ssm_bench.scan import pallas_kernels as kernels

# (channels per program, warps) per kernel and kind. The real and phase kinds run here only past
# the time-parallel kernels' MAX_LENGTH (evaluation): their forward tiles are the best of
# `--sections=eval_tiles` on an H200 at chunk 8 (one run, 64 x 1000 steps: real (16, 8) 0.98 ms
# per call against (16, 4)'s 1.11, phase (4, 1) 0.97 against (8, 4)'s 1.30; results/bench/
# README.md, "H200, sixth session"). The const kind (s4d) trains here on a GPU
# (`scan.AUTO_BY_FAMILY`): it keeps the tiles its 27-run training step was timed with. Backward
# tiles: an H100's, swept together with the forward's.
FORWARD = {"real": (16, 8), "phase": (4, 1), "const": (8, 4)}
BACKWARD = {"real": (16, 4), "phase": (8, 4), "const": (8, 4)}
# Steps between saved states, per kind. eval_tiles found chunk 16 with PREFETCH 1.1-1.3x faster
# again, but evaluation is about 1% of a run's device time (18 ms per run against about 2 s of
# training on an H200), and the 16 unrolled, prefetched steps made the CPU tests of this kernel
# (interpret mode) 1.45x slower with CI at its budget: not taken.
CHUNK = {"real": 8, "phase": 8, "const": 8}
# The real family's backward makes four reductions per step; joined, two (`_sum_pair`). Off
# until a GPU measures it (launch.bench --sections=tiles times both); same numbers either way.
JOIN_REDUCTIONS = False
# Read a chunk's per-step inputs before its first step and write its outputs after its last
# (`_Io`), per kind; same numbers either way. Off: see CHUNK.
PREFETCH = {"real": False, "phase": False, "const": False}
KINDS = {"decay": "real", "signed_decay": "real", "rotation": "phase", "constant": "const"}


def _pow2(n: int) -> int:
  return 1 << max(0, (n - 1).bit_length())


# ---- pallas_call plumbing ---------------------------------------------------------------------

def _spec(name, T, bd, N):
  """BlockSpec of one input by its name: per-step (T, bd) or (T, N), or a (bd, N) tile."""
  if name in ("x", "dt"):
    return pl.BlockSpec((None, T, bd), lambda b, j: (b, 0, j))
  if name in ("B", "C", "cos", "sin"):
    return pl.BlockSpec((None, T, N), lambda b, j: (b, 0, 0))
  if name.startswith("h0"):
    return pl.BlockSpec((None, bd, N), lambda b, j: (b, j, 0))
  return pl.BlockSpec((bd, N), lambda b, j: (j, 0))  # lam, ar, ai, Br, Bi, Cr, Ci


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _fused(static, *ins):
  # Without a gradient (evaluation) nothing needs the chunk-boundary states: the kernel writes
  # y alone (at length 10,000 and 128 states the states were 8 GiB per layer call).
  return _forward(static, *ins, save_states=False)[0]


def _forward(static, *ins, save_states: bool = True):
  kind, neg, chunk, (bd, warps), _, _, prefetch, interpret = static
  b, T, D = ins[0].shape
  N = ins[-1].shape[-1]
  names = kernels.input_names(kind)
  n_chunks = T // chunk
  f32 = jnp.float32
  n_states = (1 if kind == "real" else 2) if save_states else 0
  outs = [(jax.ShapeDtypeStruct((b, T, D), f32), pl.BlockSpec((None, T, bd), lambda i, j: (i, 0, j)))]
  outs += [(jax.ShapeDtypeStruct((b, n_chunks, D, N), f32),
            pl.BlockSpec((None, n_chunks, bd, N), lambda i, j: (i, 0, j, 0)))] * n_states
  kernel = functools.partial(kernels.forward_kernel, kind=kind, neg=neg, chunk=chunk,
                             n_chunks=n_chunks, prefetch=prefetch)
  res = pl.pallas_call(kernel, out_shape=[o[0] for o in outs], grid=(b, D // bd),
                       in_specs=[_spec(n, T, bd, N) for n in names],
                       out_specs=[o[1] for o in outs], interpret=interpret,
                       **_compiler_params(interpret, warps))(*kernels.cos_sin_inputs(kind, ins))
  return res[0], tuple(res[1:])


def _compiler_params(interpret, num_warps):
  if interpret:
    return {}
  from jax.experimental.pallas import triton as pltriton
  return {"compiler_params": pltriton.CompilerParams(num_warps=num_warps, num_stages=1)}


def _fused_fwd(static, *ins):
  y, hb = _forward(static, *ins)
  return y, (ins, hb)


def _fused_bwd(static, res, dy):
  kind, neg, chunk, _, (bd, warps), join, prefetch, interpret = static
  ins, hb = res
  b, T, D = ins[0].shape
  N = ins[-1].shape[-1]
  n_d = D // bd
  n_chunks = T // chunk
  names = kernels.input_names(kind)
  f32 = jnp.float32
  per_td = (jax.ShapeDtypeStruct((b, T, D), f32), pl.BlockSpec((None, T, bd), lambda i, j: (i, 0, j)))
  # per-step gradients of arrays shared over d: one partial sum per channel block
  per_tn = (jax.ShapeDtypeStruct((b, T, n_d, N), f32),
            pl.BlockSpec((None, T, None, N), lambda i, j: (i, 0, j, 0)))
  # gradients of (d, n) constants: one partial sum per batch row
  per_dn = (jax.ShapeDtypeStruct((b, D, N), f32), pl.BlockSpec((None, bd, N), lambda i, j: (i, j, 0)))
  if kind == "real":
    outs = [per_td, per_td, per_dn, per_tn, per_tn, per_dn]
  elif kind == "phase":
    outs = [per_td, per_tn] + [per_dn] * 6
  else:
    outs = [per_td] + [per_dn] * 8
  hb_specs = [pl.BlockSpec((None, n_chunks, bd, N), lambda i, j: (i, 0, j, 0))] * len(hb)
  kernel = functools.partial(kernels.backward_kernel, kind=kind, neg=neg, chunk=chunk,
                             n_chunks=n_chunks, join=join, prefetch=prefetch)
  g = pl.pallas_call(kernel, out_shape=[o[0] for o in outs], grid=(b, n_d),
                     in_specs=[_spec(n, T, bd, N) for n in names]
                     + [pl.BlockSpec((None, T, bd), lambda i, j: (i, 0, j))] + hb_specs,
                     out_specs=[o[1] for o in outs], interpret=interpret,
                     **_compiler_params(interpret, warps))(
                         *kernels.cos_sin_inputs(kind, ins), dy, *hb)
  if kind == "real":
    dx, ddt, dlam, dB, dC, dh0 = g
    return dx, ddt, dlam.sum(0), dB.sum(2), dC.sum(2), dh0
  if kind == "phase":
    dx, dth, dBr, dBi, dCr, dCi, dh0r, dh0i = g
    return (dx, dth.sum(2)) + tuple(v.sum(0) for v in (dBr, dBi, dCr, dCi)) + (dh0r, dh0i)
  dx, dar, dai, dBr, dBi, dCr, dCi, dh0r, dh0i = g
  return (dx,) + tuple(v.sum(0) for v in (dar, dai, dBr, dBi, dCr, dCi)) + (dh0r, dh0i)


_fused.defvjp(_fused_fwd, _fused_bwd)


# ---- the method -------------------------------------------------------------------------------

def _pad(v, axes_to):
  """Zero-pad v so axis k has length axes_to[k] (None: unchanged)."""
  widths = [(0, 0 if n is None else n - s) for s, n in zip(v.shape, axes_to)]
  return jnp.pad(v, widths) if any(w for _, w in widths) else v


def _check_pow2(name, v):
  if v < 1 or v & (v - 1):
    raise ValueError(f"pallas tile: {name} must be a power of two, got {v}")


def _tile(tile, default, D):
  bd, warps = tile or default
  _check_pow2("channels per program", bd)
  _check_pow2("warps", warps)
  return min(bd, _pow2(D)), warps


def scan(f: F.Factors, forward: tuple[int, int] | None = None,
         backward: tuple[int, int] | None = None, chunk: int | None = None,
         join: bool | None = None, prefetch: bool | None = None, interpret: bool | None = None):
  """y (b, t, d) of the factored recurrence, fused; same contract as the reference.
  `forward` / `backward`: (channels per program, warps) of each kernel; `chunk`: steps between
  the states the forward saves for the backward; `join`: pair the real backward's reductions;
  `prefetch`: read each chunk's inputs before its steps (`_Io`); None: the defaults above."""
  f, kind = f.discretized(), KINDS[f.family]
  chunk = chunk or CHUNK[kind]
  _check_pow2("chunk", chunk)
  if interpret is None:
    interpret = jax.default_backend() != "gpu"
  b, T, D = f.x.shape
  N = f.h0.shape[-1]
  Tp = -(-T // chunk) * chunk  # whole chunks; rows are indexed one by one, any count lowers
  fwd, bwd = _tile(forward, FORWARD[kind], D), _tile(backward, BACKWARD[kind], D)
  bd = max(fwd[0], bwd[0])  # both powers of two: a multiple of either
  Dp, Np = -(-D // bd) * bd, _pow2(N)
  per_td = lambda v: _pad(v.astype(jnp.float32), (None, Tp, Dp))
  per_tn = lambda v: _pad(v.astype(jnp.float32), (None, Tp, Np))
  per_dn = lambda v: _pad(v.astype(jnp.float32), (Dp, Np))
  h0 = lambda v: _pad(v.astype(jnp.float32), (None, Dp, Np))
  h0s = f.batched_h0()  # this kernel reads h0 per batch row
  if kind == "real":
    ins = (per_td(f.x), per_td(f.dt), per_dn(f.lam), per_tn(f.B), per_tn(f.C), h0(h0s))
  else:
    trans = ((per_tn(f.theta),) if kind == "phase" else (per_dn(f.a.real), per_dn(f.a.imag)))
    ins = ((per_td(f.x),) + trans + (per_dn(f.B.real), per_dn(f.B.imag), per_dn(f.C.real),
                                     per_dn(f.C.imag), h0(h0s.real), h0(h0s.imag)))
  join = JOIN_REDUCTIONS if join is None else join
  prefetch = PREFETCH[kind] if prefetch is None else prefetch
  static = (kind, f.family == "signed_decay", chunk, fwd, bwd, bool(join), bool(prefetch),
            interpret)
  return _fused(static, *ins)[:, :T, :D]
