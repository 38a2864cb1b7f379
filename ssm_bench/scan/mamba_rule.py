"""Mamba's step-size rule as the chunked kernels apply it to factors handed before it
(`factors.Factors.discretize`): on tiles in registers, and on whole arrays in XLA around the
backward that loops over channels. Float32 to rounding of `Factors.discretized` (jax's
softplus; tests/test_pallas_chunked.py)."""
from __future__ import annotations

import jax.numpy as jnp


def _softplus(v):
  return jnp.maximum(v, 0.0) + jnp.log1p(jnp.exp(-jnp.abs(v)))


def discretize(x, dt, rule):
  """Lists of (x, dt) tiles (or arrays) as the recurrence uses them, from what the layer
  handed: as they are, or by Mamba's rule (dt' = softplus(dt), x' = dt' x)."""
  if rule == "given":
    return x, dt
  dt = [_softplus(v) for v in dt]
  return [v * d for v, d in zip(x, dt)], dt


def handed_grads(dx, ddt, x, dt, rule):
  """The gradients of the x and dt the layer handed from those of the recurrence's, given its
  own x' and dt' (`discretize`'s; what was handed is not read again: the compiler merged the
  two reads and held them across the loop, 38 more registers): by Mamba's rule dx' dt' and
  (ddt' + dx' x' / dt') sigmoid(dt), where sigmoid(dt) = 1 - exp(-dt') (dt' = 0 only where
  softplus underflows, and x' with it: the division is by at least 1e-30, where a `where`
  around it took 68 more registers)."""
  if rule == "given":
    return dx, ddt
  grads = [(g * d, (gd + g * v / jnp.maximum(d, 1e-30)) * _one_minus_exp_neg(d))
           for g, gd, v, d in zip(dx, ddt, x, dt)]
  return [g for g, _ in grads], [gd for _, gd in grads]


def _one_minus_exp_neg(d):
  """1 - exp(-d) for d >= 0 to about 1e-6 relative: its Taylor series below 0.05, where 1 -
  exp(-d) would lose the digits."""
  series = d * (1.0 - d * (0.5 - d * (1.0 / 6.0 - d * (1.0 / 24.0))))
  return jnp.where(d < 0.05, series, 1.0 - jnp.exp(-d))
