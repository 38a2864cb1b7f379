"""Chunked scan in plain JAX, for every backend: memory O(b (t/L) d n) instead of O(b t d n).

A `lax.scan` over time chunks of L steps carries the state and saves it at each chunk's start;
the backward (a custom VJP, written out per family) walks the chunks in reverse, recomputes one
chunk's L states from its saved start, runs the adjoint g_t = dy_t C_t + a_{t+1} g_{t+1} through
them and forms the gradients as sums of products. It never holds a_t or b_t for the whole
sequence. Reason for writing the backward out: autodiff of the checkpointed chunk spent 3.6-6x
the forward's time in the backward on CPU, where chunked is `auto` (BUILD_NOTES, "Scan core").
The real families (decay, signed decay) scan real states; the complex ones (rotation, constant)
real (re, im) pairs, with cos and sin of theta (or the constant's parts) taken outside, so
autodiff carries their gradients to theta or a and gives the complex inputs JAX's cotangents.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from ssm_bench.scan import factors as F

# Steps per chunk on CPU, per family: the fastest whole training steps on a 2-core CPU
# (BUILD_NOTES, "Scan core"; chunks 1-8 timed with each backward as it then was).
CPU_CHUNK = {"decay": 4, "signed_decay": 4, "rotation": 4, "constant": 4}
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
  if f.family in ("decay", "signed_decay"):
    return _real(f.family == "signed_decay", chunk, f.x, f.dt, f.lam, f.B, f.C, f.h0)[:, :length]
  ar, ai = ((jnp.cos(f.theta), jnp.sin(f.theta)) if f.family == "rotation"
            else (f.a.real, f.a.imag))
  parts = lambda z: (jnp.real(z), jnp.imag(z))
  return _pairs(chunk, f.x, ar, ai, *parts(f.B), *parts(f.C), *parts(f.h0))[:, :length]


# ---- the real families: decay, signed decay -----------------------------------------------------


def _real_states(h, x, dt, lam, B, neg):
  """The chunk's states [h_start, h_1 .. h_L] and each step's (a_t, da_t / d(dt lam))."""
  hs, slopes = [h], []
  for k in range(x.shape[1]):
    a, slope = F.decay(dt[:, k], lam, neg, slope=True)
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


# ---- the complex families in real pairs: rotation, constant -----------------------------------
# a_t = ar + i ai, per step (b, t, n) shared over channels (rotation's cos and sin of theta) or
# constant (d, n) (S4D's); B, C (d, n); h as (hr, hi).


def _pair_states(h, x, ar, ai, Br, Bi):
  """The chunk's states [h_start, h_1 .. h_L] as (re, im) and each step's (ar, ai), broadcast
  against (b, d, n)."""
  hs, trans = [h], []
  for k in range(x.shape[1]):
    a = (ar[:, k, None, :], ai[:, k, None, :]) if ar.ndim == 3 else (ar, ai)
    (hr, hi), xk = hs[-1], x[:, k, :, None]
    hs.append((a[0] * hr - a[1] * hi + xk * Br, a[1] * hr + a[0] * hi + xk * Bi))
    trans.append(a)
  return hs, trans


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _pairs(chunk, x, ar, ai, Br, Bi, Cr, Ci, h0r, h0i):
  return _pairs_fwd(chunk, x, ar, ai, Br, Bi, Cr, Ci, h0r, h0i)[0]


def _per_step_windows(chunk, x, ar, ai, *more):
  per_step = (ar, ai) if ar.ndim == 3 else ()
  return tuple(_chunks(v, chunk) for v in (x,) + per_step + more)


def _pairs_fwd(chunk, x, ar, ai, Br, Bi, Cr, Ci, h0r, h0i):
  def body(h, window):
    x, *a = window
    hs, _ = _pair_states(h, x, *(a or (ar, ai)), Br, Bi)
    ys = [jnp.sum(Cr * hr - Ci * hi, -1) for hr, hi in hs[1:]]
    return hs[-1], (jnp.stack(ys, 1), h)

  shape = x.shape[:1] + h0r.shape[-2:]
  h = tuple(jnp.broadcast_to(v, shape).astype(x.dtype) for v in (h0r, h0i))
  _, (ys, starts) = jax.lax.scan(body, h, _per_step_windows(chunk, x, ar, ai))
  return _unchunk(ys), (x, ar, ai, Br, Bi, Cr, Ci, h0r, starts)


def _pairs_bwd(chunk, res, dy):
  x, ar, ai, Br, Bi, Cr, Ci, h0r, starts = res
  per_step = ar.ndim == 3

  def body(carry, window):
    (inr, ini), acc = carry  # R(a_{t+1})^T g_{t+1} past the chunk's end; summed gradients
    x, *a, dy, start = window
    hs, trans = _pair_states(start, x, *(a or (ar, ai)), Br, Bi)
    dx, dar, dai = [None] * chunk, [None] * chunk, [None] * chunk
    for k in reversed(range(chunk)):
      (tr, ti), (pr, pi), (hr, hi) = trans[k], hs[k], hs[k + 1]
      dyk, xk = dy[:, k, :, None], x[:, k, :, None]
      gr, gi = dyk * Cr + inr, ini - dyk * Ci
      dx[k] = jnp.sum(gr * Br + gi * Bi, -1)
      acc["Br"], acc["Bi"] = acc["Br"] + jnp.sum(gr * xk, 0), acc["Bi"] + jnp.sum(gi * xk, 0)
      acc["Cr"], acc["Ci"] = acc["Cr"] + jnp.sum(dyk * hr, 0), acc["Ci"] - jnp.sum(dyk * hi, 0)
      da = (gr * pr + gi * pi, gi * pr - gr * pi)  # dL/d(ar, ai), (b, d, n)
      if per_step:  # shared over channels
        dar[k], dai[k] = (jnp.sum(v, 1) for v in da)
      else:  # constant
        acc["ar"], acc["ai"] = acc["ar"] + jnp.sum(da[0], 0), acc["ai"] + jnp.sum(da[1], 0)
      inr, ini = tr * gr + ti * gi, tr * gi - ti * gr
    outs = (jnp.stack(dx, 1),) + ((jnp.stack(dar, 1), jnp.stack(dai, 1)) if per_step else ())
    return ((inr, ini), acc), outs

  acc = {name: jnp.zeros_like(Br) for name in ("Br", "Bi", "Cr", "Ci")
         + (() if per_step else ("ar", "ai"))}
  carry = ((jnp.zeros_like(starts[0][0]),) * 2, acc)
  windows = _per_step_windows(chunk, x, ar, ai, dy) + (starts,)
  ((dh0r, dh0i), acc), outs = jax.lax.scan(body, carry, windows, reverse=True)
  dx, *da = (_unchunk(v) for v in outs)
  da = da or (acc["ar"], acc["ai"])
  dh0 = tuple(v if h0r.ndim == 3 else v.sum(0) for v in (dh0r, dh0i))
  return (dx, *da, acc["Br"], acc["Bi"], acc["Cr"], acc["Ci"], *dh0)


_pairs.defvjp(_pairs_fwd, _pairs_bwd)
