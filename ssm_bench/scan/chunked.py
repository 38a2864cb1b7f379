"""Chunked scan in plain JAX, for every backend: memory O(b (t/L) d n) instead of O(b t d n).

A `lax.scan` over time chunks of L steps carries the state; each chunk's body is
`jax.checkpoint`ed and computes y inside the chunk, so the backward pass keeps only the states at
chunk boundaries and recomputes the L states of one chunk at a time. Even at L = 1 (the complex
families' chunk) it holds only the states, never a_t or b_t for the whole sequence.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from ssm_bench.scan import factors as F

# Steps per chunk on CPU, per family: the fastest scan (forward + backward, chunks 1-8) on a
# 2-core CPU, whole training steps then timed against sequential (BUILD_NOTES, "Scan core"). The
# complex families run fastest one step per chunk: XLA's CPU code for an unrolled complex chunk
# was 2-7x slower.
CPU_CHUNK = {"decay": 4, "signed_decay": 4, "rotation": 1, "constant": 1}
# Elsewhere chunked is the memory-light method, not the default: a boundary state every 16 steps.
CHUNK = 16


def default_chunk(family: str) -> int:
  return CPU_CHUNK[family] if jax.default_backend() == "cpu" else CHUNK


def pad_time(f: F.Factors, multiple: int) -> F.Factors:
  """Append steps with x = 0 (and dt = theta = 0) so the length is a multiple of `multiple`;
  they change no output at a real position, and their outputs are cut off."""
  pad = -f.length % multiple
  if not pad:
    return f
  return f.with_steps(**{k: jnp.pad(v, [(0, 0), (0, pad)] + [(0, 0)] * (v.ndim - 2))
                         for k, v in f.steps().items()})


def _chunks(v, chunk):
  """(b, t, ...) -> (t / L, b, L, ...): a `lax.scan` runs over the leading axis."""
  return jnp.swapaxes(v.reshape(v.shape[0], v.shape[1] // chunk, chunk, *v.shape[2:]), 0, 1)


def _unchunk(v):
  return jnp.swapaxes(v, 0, 1).reshape(v.shape[1], v.shape[0] * v.shape[2], *v.shape[3:])


def scan(f: F.Factors, chunk: int | None = None):
  length = f.length
  chunk = min(chunk or default_chunk(f.family), length)
  f = pad_time(f, chunk)
  if f.family in REAL:
    return _real(f.family == "signed_decay", chunk, f.x, f.dt, f.lam, f.B, f.C, f.h0)[:, :length]
  steps = {k: _chunks(v, chunk) for k, v in f.steps().items()}

  @jax.checkpoint
  def body(h, window):
    a, b, C = F.materialize(f.with_steps(**window))
    a = jnp.broadcast_to(a, b.shape)
    C = jnp.broadcast_to(C, b.shape)
    ys = []
    for k in range(chunk):  # unrolled: XLA fuses the L elementwise steps of one chunk
      h = a[:, k] * h + b[:, k]
      ys.append(F.readout(h, C[:, k]))
    return h, jnp.stack(ys, 1)

  h0 = f.batched_h0().astype(jnp.complex64 if f.is_complex else f.x.dtype)
  _, ys = jax.lax.scan(body, h0, steps)
  return _unchunk(ys)[:, :length]


# ---- the real families, with their backward written out ----------------------------------------
# Autodiff of the checkpointed chunk above spent 3.6-5x the forward's time in the backward on
# CPU; the adjoint written out (recompute the chunk from its saved start, then g_t = dy_t C_t +
# a_{t+1} g_{t+1} and the gradients as sums of products, never a dot over 4 states) made whole
# mamba training steps 1.2-1.6x faster (BUILD_NOTES, "Scan core"). Memory as above: the states
# at chunk starts.
REAL = ("decay", "signed_decay")


def _decay(dt, lam, neg):
  """`factors.transition` of the real families, (b, d, n), and its derivative in dt lam."""
  e = jnp.exp(dt[..., None] * lam)
  return (2.0 * e - 1.0, 2.0 * e) if neg else (e, e)


def _real_states(h, x, dt, lam, B, neg):
  """The chunk's states [h_start, h_1 .. h_L] and each step's (a_t, da_t / d(dt lam))."""
  hs, slopes = [h], []
  for k in range(x.shape[1]):
    a, slope = _decay(dt[:, k], lam, neg)
    hs.append(a * hs[-1] + x[:, k, :, None] * B[:, k, None, :])
    slopes.append((a, slope))
  return hs, slopes


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def _real(neg, chunk, x, dt, lam, B, C, h0):
  return _real_fwd(neg, chunk, x, dt, lam, B, C, h0)[0]


def _real_fwd(neg, chunk, x, dt, lam, B, C, h0):
  def body(h, window):
    x, dt, B, C = window
    hs, _ = _real_states(h, x, dt, lam, B, neg)
    ys = [jnp.sum(hk * C[:, k, None, :], -1) for k, hk in enumerate(hs[1:])]
    return hs[-1], (jnp.stack(ys, 1), h)

  h = jnp.broadcast_to(h0, x.shape[:1] + h0.shape[-2:]).astype(x.dtype)
  _, (ys, starts) = jax.lax.scan(body, h, tuple(_chunks(v, chunk) for v in (x, dt, B, C)))
  return _unchunk(ys), (x, dt, lam, B, C, h0, starts)


def _real_bwd(neg, chunk, res, dy):
  x, dt, lam, B, C, h0, starts = res

  def body(carry, window):
    incoming, dlam = carry  # a_{t+1} g_{t+1} past the chunk's last step; dL/dlam so far
    x, dt, B, C, dy, start = window
    hs, slopes = _real_states(start, x, dt, lam, B, neg)
    grads = {name: [None] * chunk for name in ("x", "dt", "B", "C")}
    for k in reversed(range(chunk)):
      a, slope = slopes[k]
      g = dy[:, k, :, None] * C[:, k, None, :] + incoming
      de = g * hs[k] * slope  # dL/d(dt lam)
      grads["x"][k] = jnp.sum(g * B[:, k, None, :], -1)
      grads["dt"][k] = jnp.sum(de * lam, -1)
      grads["B"][k] = jnp.sum(g * x[:, k, :, None], 1)
      grads["C"][k] = jnp.sum(dy[:, k, :, None] * hs[k + 1], 1)
      dlam = dlam + jnp.sum(de * dt[:, k, :, None], 0)
      incoming = a * g
    return (incoming, dlam), tuple(jnp.stack(v, 1) for v in grads.values())

  carry = (jnp.zeros_like(starts[0]), jnp.zeros_like(lam))
  windows = tuple(_chunks(v, chunk) for v in (x, dt, B, C, dy)) + (starts,)
  (dh0, dlam), grads = jax.lax.scan(body, carry, windows, reverse=True)
  dx, ddt, dB, dC = (_unchunk(v) for v in grads)
  return dx, ddt, dlam, dB, dC, (dh0 if h0.ndim == 3 else dh0.sum(0)).astype(h0.dtype)


_real.defvjp(_real_fwd, _real_bwd)
