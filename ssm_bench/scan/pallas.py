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
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from ssm_bench.scan import factors as F

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


LOG2E = 1.4426950408889634


def log2_scaled(lam):
  """lam log2 e: both fused kernels compute exp(dt lam) as exp2(dt x this). Triton lowers
  exp2 to the GPU's one-instruction `ex2.approx` (within 2 ulp; subnormal results flush to
  zero) where `exp` becomes libdevice's accurate expf, eight instructions per element (a
  quarter of the time-parallel real kernels' instructions); and the scale goes once on the
  per-(channel, state) factor, not on every (step, channel, state) product (decay backward's
  state loop 858 -> 830 PTX instructions; results/bench/README.md, "Instruction counts")."""
  return lam * LOG2E


def _pow2(n: int) -> int:
  return 1 << max(0, (n - 1).bit_length())


# ---- the two kernels --------------------------------------------------------------------------
# `kind` is 'real' (decay, signed_decay: per-step B and C), 'phase' (rotation) or 'const'; the
# last two carry real/imaginary pairs and constant complex B, C of shape (block_d, N).

def _names(kind: str) -> tuple:
  """Input names in call order."""
  if kind == "real":
    return ("x", "dt", "lam", "B", "C", "h0")
  trans = ("cos", "sin") if kind == "phase" else ("ar", "ai")
  return ("x",) + trans + ("Br", "Bi", "Cr", "Ci", "h0r", "h0i")


def cos_sin_inputs(kind: str, ins: tuple) -> tuple:
  """The kernels' inputs from the custom VJP's (x, theta, ...): the phase kind reads cos and sin
  of theta, computed by XLA once per (step, state), in this kernel and the time-parallel one.
  In the kernels, libdevice's cos and sin with their range reduction were 40-50% of the
  time-parallel phase kernels' instructions and 90% of this forward's (6318 -> 653 at
  evaluation's sizes; BUILD_NOTES, "Scan core"). Contract and gradient stay in theta."""
  if kind != "phase":
    return ins
  x, theta, *rest = ins
  return (x, jnp.cos(theta), jnp.sin(theta), *rest)


def _per_step(kind: str) -> tuple:
  """The inputs read at every step (the rest are tiles read once per program)."""
  return {"real": ("x", "dt", "B", "C"), "phase": ("x", "cos", "sin"), "const": ("x",)}[kind]


class _Io:
  """A chunk's per-step reads and writes, in one of two orders. Direct: each input is read where
  a step uses it and each output written when computed (the order the H100 tiles were measured
  with). Prefetched: all of the chunk's inputs are read before its first step and its outputs
  written after its last. The reason to try it: on an H100 the kernel ran at 1.8% of its memory
  floor with little arithmetic per step, which points at latency: a read issued after a write to
  memory the compiler cannot prove distinct may wait for it, so in the direct order each step
  stalls on its own reads; prefetched, a chunk's reads are in flight together. Same values."""

  def __init__(self, refs, prefetch: bool):
    self.refs, self.prefetch, self.read, self.pending = refs, prefetch, {}, []

  def start(self, names, t0, chunk):
    """Enter the chunk of steps t0 .. t0 + chunk - 1."""
    self.read = ({(n, k): self.refs[n][t0 + k, :] for k in range(chunk) for n in names}
                 if self.prefetch else {})
    self.t0 = t0

  def get(self, name, k):
    """Input `name` at step k of the chunk."""
    return self.read[(name, k)] if self.prefetch else self.refs[name][self.t0 + k, :]

  def put(self, ref, k, value):
    if self.prefetch:
      self.pending.append((ref, k, value))
    else:
      ref[self.t0 + k, :] = value

  def finish(self):
    for ref, k, value in self.pending:
      ref[self.t0 + k, :] = value
    self.pending = []


class _Step:
  """Per-step algebra of one program, shared by the forward and backward kernels; `k` is the
  step within the chunk `io` is in."""

  def __init__(self, kind, neg, refs, io):
    self.kind, self.neg, self.io = kind, neg, io
    if kind != "real":
      self.Br, self.Bi = refs["Br"][...], refs["Bi"][...]
      self.Cr, self.Ci = refs["Cr"][...], refs["Ci"][...]
    if kind == "const":
      self.ar, self.ai = refs["ar"][...], refs["ai"][...]
    if kind == "real":
      self.lam = refs["lam"][...]
      self.lam2 = log2_scaled(self.lam)

  def transition(self, k):
    """(ar, ai, extra): a_t as real pair (ai None for real) plus what its gradient needs."""
    if self.kind == "real":
      dt = self.io.get("dt", k)
      e = jnp.exp2(dt[:, None] * self.lam2)
      return (2.0 * e - 1.0 if self.neg else e), None, (dt, e)
    if self.kind == "phase":
      return self.io.get("cos", k)[None, :], self.io.get("sin", k)[None, :], None
    return self.ar, self.ai, None

  def advance(self, h, a, k):
    x = self.io.get("x", k)[:, None]
    ar, ai = a[0], a[1]
    if self.kind == "real":
      return (ar * h[0] + x * self.io.get("B", k)[None, :],)
    hr, hi = h
    return (ar * hr - ai * hi + x * self.Br, ai * hr + ar * hi + x * self.Bi)

  def readout(self, h, k):
    if self.kind == "real":
      return jnp.sum(h[0] * self.io.get("C", k)[None, :], axis=1)
    return jnp.sum(self.Cr * h[0] - self.Ci * h[1], axis=1)


def _forward_kernel(*refs, kind, neg, chunk, n_chunks, prefetch=False):
  names = _names(kind)
  r = dict(zip(names, refs))
  y_ref, hb_refs = refs[len(names)], refs[len(names) + 1:]
  io = _Io(r, prefetch)
  s = _Step(kind, neg, r, io)
  h0 = (r["h0"][...],) if kind == "real" else (r["h0r"][...], r["h0i"][...])

  def body(c, h):
    io.start(_per_step(kind), c * chunk, chunk)
    for hb, part in zip(hb_refs, h):
      hb[c] = part  # the state before this chunk: the backward pass restarts here
    for k in range(chunk):
      a = s.transition(k)
      h = s.advance(h, a, k)
      io.put(y_ref, k, s.readout(h, k))
    io.finish()
    return h
  jax.lax.fori_loop(0, n_chunks, body, h0)


def _sum_pair(a, b, axis):
  """(sum a, sum b) over `axis` as one reduction of the pair stacked on a last axis of 2: one
  round of cross-thread exchange (and, over channels, one barrier) instead of two."""
  lo, hi = jnp.split(jnp.sum(jnp.stack([a, b], axis=-1), axis=axis), 2, axis=-1)
  return lo[..., 0], hi[..., 0]


def _backward_kernel(*refs, kind, neg, chunk, n_chunks, join=False, prefetch=False):
  names = _names(kind)
  n_in = len(names)
  r = dict(zip(names, refs))
  cplx = kind != "real"
  dy_ref = refs[n_in]
  hb_refs = refs[n_in + 1: n_in + (3 if cplx else 2)]
  outs = refs[n_in + (3 if cplx else 2):]
  io = _Io({**r, "dy": dy_ref}, prefetch)
  s = _Step(kind, neg, r, io)
  if kind == "real":
    dx_ref, ddt_ref, dlam_ref, dB_ref, dC_ref, dh0_ref = outs
  elif kind == "phase":
    dx_ref, dth_ref, dBr_ref, dBi_ref, dCr_ref, dCi_ref, dh0r_ref, dh0i_ref = outs
  else:
    dx_ref, dar_ref, dai_ref, dBr_ref, dBi_ref, dCr_ref, dCi_ref, dh0r_ref, dh0i_ref = outs
  shape = r["h0" if kind == "real" else "h0r"].shape
  zeros = jnp.zeros(shape, jnp.float32)
  # carry: the adjoint g (one or two parts) and the accumulated constant-parameter gradients
  n_acc = {"real": 1, "phase": 4, "const": 6}[kind]

  def body(i, carry):
    g, acc = carry[:len(hb_refs)], list(carry[len(hb_refs):])
    c = n_chunks - 1 - i
    io.start(_per_step(kind) + ("dy",), c * chunk, chunk)
    start = tuple(hb[c] for hb in hb_refs)
    hs, trans = [start], []
    for k in range(chunk):  # recompute this chunk's states from its boundary; kept as values
      trans.append(s.transition(k))
      hs.append(s.advance(hs[-1], trans[-1], k))
    for k in reversed(range(chunk)):
      dy = io.get("dy", k)[:, None]
      x = io.get("x", k)[:, None]
      h, prev = hs[k + 1], hs[k]
      ar, ai, extra = trans[k]
      if kind == "real":
        Bt, Ct = io.get("B", k)[None, :], io.get("C", k)[None, :]
        (gr,) = g
        gr = gr + dy * Ct
        dt, e = extra
        da = gr * prev[0]
        de = (2.0 * da if neg else da) * e
        # four reductions per step, two over the state (dx, ddt) and two over channels (dB, dC)
        over_n, over_d = (gr * Bt, de * s.lam), (gr * x, dy * h[0])
        if join:
          sums = _sum_pair(*over_n, axis=1) + _sum_pair(*over_d, axis=0)
        else:
          sums = tuple(jnp.sum(v, axis=1) for v in over_n) + tuple(jnp.sum(v, axis=0)
                                                                   for v in over_d)
        for ref, v in zip((dx_ref, ddt_ref, dB_ref, dC_ref), sums):
          io.put(ref, k, v)
        acc[0] = acc[0] + de * dt[:, None]
        g = (ar * gr,)
        continue
      gr, gi = g
      gr, gi = gr + dy * s.Cr, gi - dy * s.Ci
      io.put(dx_ref, k, jnp.sum(gr * s.Br + gi * s.Bi, axis=1))
      acc[0], acc[1] = acc[0] + x * gr, acc[1] + x * gi  # dBr, dBi
      acc[2], acc[3] = acc[2] + dy * h[0], acc[3] - dy * h[1]  # dCr, dCi
      dar = gr * prev[0] + gi * prev[1]
      dai = gi * prev[0] - gr * prev[1]
      if kind == "phase":  # ar = cos(theta), ai = sin(theta)
        io.put(dth_ref, k, jnp.sum(dai * ar - dar * ai, axis=0))
      else:
        acc[4], acc[5] = acc[4] + dar, acc[5] + dai
      g = (ar * gr + ai * gi, ar * gi - ai * gr)
    io.finish()
    return tuple(g) + tuple(acc)

  init = tuple(zeros for _ in hb_refs) + tuple(zeros for _ in range(n_acc))
  out = jax.lax.fori_loop(0, n_chunks, body, init)
  g, acc = out[:len(hb_refs)], out[len(hb_refs):]
  if kind == "real":
    dh0_ref[...] = g[0]
    dlam_ref[...] = acc[0]
    return
  dh0r_ref[...], dh0i_ref[...] = g
  dBr_ref[...], dBi_ref[...], dCr_ref[...], dCi_ref[...] = acc[:4]
  if kind == "const":
    dar_ref[...], dai_ref[...] = acc[4:]


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
  names = _names(kind)
  n_chunks = T // chunk
  f32 = jnp.float32
  n_states = (1 if kind == "real" else 2) if save_states else 0
  outs = [(jax.ShapeDtypeStruct((b, T, D), f32), pl.BlockSpec((None, T, bd), lambda i, j: (i, 0, j)))]
  outs += [(jax.ShapeDtypeStruct((b, n_chunks, D, N), f32),
            pl.BlockSpec((None, n_chunks, bd, N), lambda i, j: (i, 0, j, 0)))] * n_states
  kernel = functools.partial(_forward_kernel, kind=kind, neg=neg, chunk=chunk, n_chunks=n_chunks,
                             prefetch=prefetch)
  res = pl.pallas_call(kernel, out_shape=[o[0] for o in outs], grid=(b, D // bd),
                       in_specs=[_spec(n, T, bd, N) for n in names],
                       out_specs=[o[1] for o in outs], interpret=interpret,
                       **_compiler_params(interpret, warps))(*cos_sin_inputs(kind, ins))
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
  names = _names(kind)
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
  kernel = functools.partial(_backward_kernel, kind=kind, neg=neg, chunk=chunk, n_chunks=n_chunks,
                             join=join, prefetch=prefetch)
  g = pl.pallas_call(kernel, out_shape=[o[0] for o in outs], grid=(b, n_d),
                     in_specs=[_spec(n, T, bd, N) for n in names]
                     + [pl.BlockSpec((None, T, bd), lambda i, j: (i, 0, j))] + hb_specs,
                     out_specs=[o[1] for o in outs], interpret=interpret,
                     **_compiler_params(interpret, warps))(*cos_sin_inputs(kind, ins), dy, *hb)
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
