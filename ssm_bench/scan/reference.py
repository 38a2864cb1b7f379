"""The materialized reference: every state h_t is an array in memory.

`linear_scan` solves h_t = a_t h_{t-1} + b_t over time axis 1 (real or complex) with
`lax.scan` (sequential) or `lax.associative_scan` (associative); `matrix_scan` is the dense
analogue used by IDS4. Every faster method is tested against these.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


def _fold_h0(a, b, h0):
  """A nonzero initial state enters as b_1 += a_1 h_0, so every method starts from zero."""
  if h0 is None:
    return b
  return b.at[:, 0].add(a[:, 0] * h0)


def linear_scan(a, b, h0=None, method: str = "sequential"):
  """All states h_1..h_T of h_t = a_t h_{t-1} + b_t; a, b: (batch, time, ...), h0: (batch, ...)."""
  a, b = jnp.broadcast_arrays(a, b)
  b = _fold_h0(a, b, h0)
  if method == "associative":
    def combine(left, right):
      a_l, b_l = left
      a_r, b_r = right
      return a_l * a_r, a_r * b_l + b_r
    return jax.lax.associative_scan(combine, (a, b), axis=1)[1]

  def step(h, ab):
    h = ab[0] * h + ab[1]
    return h, h
  _, hs = jax.lax.scan(step, jnp.zeros_like(b[:, 0]), (jnp.swapaxes(a, 0, 1), jnp.swapaxes(b, 0, 1)))
  return jnp.swapaxes(hs, 0, 1)


def _apply(A, h):
  """A h for a vector state (..., n) or a matrix state (..., n, m): A is (..., n, n)."""
  if h.ndim == A.ndim - 1:
    return jnp.einsum("...ij,...j->...i", A, h)
  return jnp.einsum("...ij,...jm->...im", A, h)


def matrix_scan(A, b, h0=None, method: str = "sequential"):
  """h_t = A_t h_{t-1} + b_t with A: (batch, time, n, n) and b: (batch, time, n) (a vector
  state) or (batch, time, n, m) (a matrix state: m columns sharing each A_t, as in DeltaNet)."""
  if h0 is not None:
    b = b.at[:, 0].add(_apply(A[:, 0], h0))
  if method == "associative":
    def combine(left, right):
      A_l, b_l = left
      A_r, b_r = right
      return A_r @ A_l, _apply(A_r, b_l) + b_r
    return jax.lax.associative_scan(combine, (A, b), axis=1)[1]

  def step(h, Ab):
    h = _apply(Ab[0], h) + Ab[1]
    return h, h
  _, hs = jax.lax.scan(step, jnp.zeros_like(b[:, 0]), (jnp.swapaxes(A, 0, 1), jnp.swapaxes(b, 0, 1)))
  return jnp.swapaxes(hs, 0, 1)
