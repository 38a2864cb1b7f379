"""The step-by-step kernel's bodies (`pallas.py` holds its tiles, pallas_call plumbing and
custom VJP): one program per (batch row, block of channels) walks time with its (block_d, N)
state in registers; the backward recomputes each chunk's states from its saved boundary and runs
the adjoint recurrence through them. The exp2 scaling and the phase kind's cos/sin inputs are
shared with the time-parallel and chunked kernels.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

LOG2E = 1.4426950408889634


def log2_scaled(lam):
  """lam log2 e: both fused kernels compute exp(dt lam) as exp2(dt x this). Triton lowers
  exp2 to the GPU's one-instruction `ex2.approx` (within 2 ulp; subnormal results flush to
  zero) where `exp` becomes libdevice's accurate expf, eight instructions per element (a
  quarter of the time-parallel real kernels' instructions); and the scale goes once on the
  per-(channel, state) factor, not on every (step, channel, state) product (decay backward's
  state loop 858 -> 830 PTX instructions; results/bench/README.md, "Instruction counts")."""
  return lam * LOG2E


# ---- the two kernels --------------------------------------------------------------------------
# `kind` is 'real' (decay, signed_decay: per-step B and C), 'phase' (rotation) or 'const'; the
# last two carry real/imaginary pairs and constant complex B, C of shape (block_d, N).

def input_names(kind: str) -> tuple:
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


def forward_kernel(*refs, kind, neg, chunk, n_chunks, prefetch=False):
  names = input_names(kind)
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


def backward_kernel(*refs, kind, neg, chunk, n_chunks, join=False, prefetch=False):
  names = input_names(kind)
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
