"""Chunked scan in plain JAX, for every backend: memory O(b (t/L) d n) instead of O(b t d n).

A `lax.scan` over time chunks of L steps carries the state and saves it at each chunk's start;
the backward (a custom VJP, written out per family) walks the chunks in reverse, recomputes one
chunk's L states from its saved start, runs the adjoint g_t = dy_t C_t + a_{t+1} g_{t+1} through
them and forms the gradients as sums of products. It never holds a_t or b_t for the whole
sequence. Reason for writing the backward out: autodiff of the checkpointed chunk spent 3.6-6x
the forward's time in the backward on CPU, where chunked is `auto` (BUILD_NOTES, "Scan core").
The real families (decay, signed decay) scan real states; the complex ones (rotation, constant,
complex) real (re, im) pairs, with cos and sin of theta (or a's parts) taken outside, so
autodiff carries their gradients to theta or a and gives the complex inputs JAX's cotangents.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from ssm_bench.scan import factors as F

# Steps per chunk on CPU, per family: the fastest whole training steps on a 2-core CPU
# (BUILD_NOTES, "Scan core"; chunks 1-8 timed with each backward as it then was). The complex
# family's 4 was timed with examples/decaying_aussm: chunks 2-8 within ~8%, none best twice.
CPU_CHUNK = {"decay": 4, "signed_decay": 4, "rotation": 4, "constant": 4, "complex": 4}
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
  f = pad_time(f.discretized(), chunk)
  if f.family in ("decay", "signed_decay"):
    return _real(f.family == "signed_decay", chunk, f.x, f.dt, f.lam, f.B, f.C, f.h0)[:, :length]
  ar, ai = ((jnp.cos(f.theta), jnp.sin(f.theta)) if f.family == "rotation"
            else (f.a.real, f.a.imag))
  parts = lambda z: (jnp.real(z), jnp.imag(z))
  return _pairs(chunk, f.x, ar, ai, *parts(f.B), *parts(f.C), *parts(f.h0))[:, :length]


# B and C are each per step, (b, t, n) shared over channels, or constant, (d, n) (factors.py):
# the per-step ones travel in the chunk windows, the constants are closed over.


def _at(v, k):
  """B's or C's value at step k of a chunk, broadcastable to the state (b, d, n)."""
  return v[:, k, None, :] if v.ndim == 3 else v


def _windows(chunk, **arrays):
  """The chunk windows (t / L, b, L, ...) of the arrays with a time axis (`lax.scan`'s xs)."""
  return {k: _chunks(v, chunk) for k, v in arrays.items() if v.ndim == 3}


def _add_grad(steps, acc, name, k, g):
  """Step k's gradient g (b, d, n) for B or C (or a part of them or of a): a per-step one is summed over the
  channels, into the chunk's outputs; a constant's over the batch, into the running sum."""
  if name in acc:
    acc[name] = acc[name] + jnp.sum(g, 0)
  else:
    steps[name][k] = jnp.sum(g, 1)


def _grads_out(acc, stacked, names):
  """Each of `names`' gradient: its summed constant, or its per-step outputs unchunked."""
  return tuple(acc[k] if k in acc else _unchunk(stacked[k]) for k in names)


def _constants(names, arrays):
  """A zero running sum for each of the (d, n) constants among `arrays`."""
  return {k: jnp.zeros_like(v) for k, v in zip(names, arrays) if v.ndim == 2}


# ---- the real families: decay, signed decay -----------------------------------------------------


def _real_states(h, x, dt, lam, B, neg):
  """The chunk's states [h_start, h_1 .. h_L] and each step's (a_t, da_t / d(dt lam))."""
  hs, slopes = [h], []
  for k in range(x.shape[1]):
    a, slope = F.decay(dt[:, k], lam, neg, slope=True)
    hs.append(a * hs[-1] + x[:, k, :, None] * _at(B, k))
    slopes.append((a, slope))
  return hs, slopes


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def _real(neg, chunk, x, dt, lam, B, C, h0):
  return _real_fwd(neg, chunk, x, dt, lam, B, C, h0)[0]


def _real_fwd(neg, chunk, x, dt, lam, B, C, h0):
  def body(h, w):
    Bw, Cw = w.get("B", B), w.get("C", C)
    hs, _ = _real_states(h, w["x"], w["dt"], lam, Bw, neg)
    ys = [jnp.sum(hk * _at(Cw, k), -1) for k, hk in enumerate(hs[1:])]
    return hs[-1], (jnp.stack(ys, 1), h)

  h = jnp.broadcast_to(h0, x.shape[:1] + h0.shape[-2:]).astype(x.dtype)
  _, (ys, starts) = jax.lax.scan(body, h, _windows(chunk, x=x, dt=dt, B=B, C=C))
  return _unchunk(ys), (x, dt, lam, B, C, h0, starts)


def _real_bwd(neg, chunk, res, dy):
  x, dt, lam, B, C, h0, starts = res

  def body(carry, w):
    incoming, acc = carry  # a_{t+1} g_{t+1} past the chunk's last step; dlam and constants' sums
    (x, dt, dy), Bw, Cw = (w[k] for k in ("x", "dt", "dy")), w.get("B", B), w.get("C", C)
    hs, slopes = _real_states(w["start"], x, dt, lam, Bw, neg)
    steps = {name: [None] * chunk for name in ("x", "dt", "B", "C") if name not in acc}
    for k in reversed(range(chunk)):
      a, slope = slopes[k]
      g = dy[:, k, :, None] * _at(Cw, k) + incoming
      de = g * hs[k] * slope  # dL/d(dt lam)
      steps["x"][k] = jnp.sum(g * _at(Bw, k), -1)
      steps["dt"][k] = jnp.sum(de * lam, -1)
      _add_grad(steps, acc, "B", k, g * x[:, k, :, None])
      _add_grad(steps, acc, "C", k, dy[:, k, :, None] * hs[k + 1])
      acc["lam"] = acc["lam"] + jnp.sum(de * dt[:, k, :, None], 0)
      incoming = a * g
    return (incoming, acc), {name: jnp.stack(v, 1) for name, v in steps.items()}

  acc = {"lam": jnp.zeros_like(lam), **_constants(("B", "C"), (B, C))}
  windows = {**_windows(chunk, x=x, dt=dt, B=B, C=C, dy=dy), "start": starts}
  (dh0, acc), stacked = jax.lax.scan(body, (jnp.zeros_like(starts[0]), acc), windows, reverse=True)
  dx, ddt, dlam, dB, dC = _grads_out(acc, stacked, ("x", "dt", "lam", "B", "C"))
  return dx, ddt, dlam, dB, dC, (dh0 if h0.ndim == 3 else dh0.sum(0)).astype(h0.dtype)


_real.defvjp(_real_fwd, _real_bwd)


# ---- the complex families in real pairs: rotation, constant, complex ---------------------------
# a_t = ar + i ai, per step (b, t, n) shared over channels (rotation's cos and sin of theta, the
# complex family's a) or constant (d, n) (S4D's), as B and C may be: all six parts take either
# form (`_at`, `_add_grad`); h as (hr, hi).
_PARTS = ("ar", "ai", "Br", "Bi", "Cr", "Ci")


def _pair_states(h, x, ar, ai, Br, Bi):
  """The chunk's states [h_start, h_1 .. h_L] as (re, im) and each step's (ar, ai), broadcast
  against (b, d, n)."""
  hs, trans = [h], []
  for k in range(x.shape[1]):
    a = (_at(ar, k), _at(ai, k))
    (hr, hi), xk = hs[-1], x[:, k, :, None]
    br, bi = _at(Br, k), _at(Bi, k)
    hs.append((a[0] * hr - a[1] * hi + xk * br, a[1] * hr + a[0] * hi + xk * bi))
    trans.append(a)
  return hs, trans


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _pairs(chunk, x, ar, ai, Br, Bi, Cr, Ci, h0r, h0i):
  return _pairs_fwd(chunk, x, ar, ai, Br, Bi, Cr, Ci, h0r, h0i)[0]


def _pairs_fwd(chunk, x, ar, ai, Br, Bi, Cr, Ci, h0r, h0i):
  parts = dict(zip(_PARTS, (ar, ai, Br, Bi, Cr, Ci)))

  def body(h, w):
    ar, ai, br, bi, cr, ci = (w.get(k, v) for k, v in parts.items())
    hs, _ = _pair_states(h, w["x"], ar, ai, br, bi)
    ys = [jnp.sum(_at(cr, k) * hr - _at(ci, k) * hi, -1) for k, (hr, hi) in enumerate(hs[1:])]
    return hs[-1], (jnp.stack(ys, 1), h)

  shape = x.shape[:1] + h0r.shape[-2:]
  h = tuple(jnp.broadcast_to(v, shape).astype(x.dtype) for v in (h0r, h0i))
  _, (ys, starts) = jax.lax.scan(body, h, _windows(chunk, x=x, **parts))
  return _unchunk(ys), (x, ar, ai, Br, Bi, Cr, Ci, h0r, starts)


def _pairs_bwd(chunk, res, dy):
  x, *values, h0r, starts = res
  parts = dict(zip(_PARTS, values))

  def body(carry, w):
    (inr, ini), acc = carry  # R(a_{t+1})^T g_{t+1} past the chunk's end; constants' sums
    x, dy = w["x"], w["dy"]
    ar, ai, br, bi, cr, ci = (w.get(k, v) for k, v in parts.items())
    hs, trans = _pair_states(w["start"], x, ar, ai, br, bi)
    steps = {name: [None] * chunk for name in ("x",) + _PARTS if name not in acc}
    for k in reversed(range(chunk)):
      (tr, ti), (pr, pi), (hr, hi) = trans[k], hs[k], hs[k + 1]
      dyk, xk = dy[:, k, :, None], x[:, k, :, None]
      gr, gi = dyk * _at(cr, k) + inr, ini - dyk * _at(ci, k)
      steps["x"][k] = jnp.sum(gr * _at(br, k) + gi * _at(bi, k), -1)
      for name, g in (("Br", gr * xk), ("Bi", gi * xk), ("Cr", dyk * hr), ("Ci", -(dyk * hi)),
                      ("ar", gr * pr + gi * pi), ("ai", gi * pr - gr * pi)):  # dL/d(ar, ai)
        _add_grad(steps, acc, name, k, g)
      inr, ini = tr * gr + ti * gi, tr * gi - ti * gr
    return ((inr, ini), acc), {name: jnp.stack(v, 1) for name, v in steps.items()}

  acc = _constants(_PARTS, values)
  windows = {**_windows(chunk, x=x, dy=dy, **parts), "start": starts}
  carry = ((jnp.zeros_like(starts[0][0]),) * 2, acc)
  ((dh0r, dh0i), acc), stacked = jax.lax.scan(body, carry, windows, reverse=True)
  grads = _grads_out(acc, stacked, ("x",) + _PARTS)
  dh0 = tuple(v if h0r.ndim == 3 else v.sum(0) for v in (dh0r, dh0i))
  return (*grads, *dh0)


_pairs.defvjp(_pairs_fwd, _pairs_bwd)
