"""Gated non-linear RNNs, the standard positive controls: LSTM and GRU (hidden size d_state).

lstm: [i, f, g, o] = W v_t + U h_{t-1} + b; c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g);
      h_t = sigmoid(o) tanh(c_t)   (forget-gate bias initialised to 1).
gru:  r, z = sigmoid(W_rz v_t + U_rz h_{t-1} + b_rz); n = tanh(W_n v_t + b_n + r (U_n h_{t-1}
      + c_n)); h_t = (1 - z) n + z h_{t-1}   (the cuDNN / PyTorch form).
Both start from the unit-norm h0 of the other layers (c0 = 0), run as one lax.scan, and read
out y = W_out h_t + D v_t.
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from ssm_bench.layers import common


def _scan(cell, h0, x):
  _, hs = jax.lax.scan(lambda h, x_t: (lambda n: (n, n))(cell(h, x_t)), h0, jnp.swapaxes(x, 0, 1))
  return hs


class LSTM(nn.Module):
  cfg: object

  @nn.compact
  def __call__(self, v):
    d, n = v.shape[-1], self.cfg.d_state
    bias = lambda k, s, dt=jnp.float32: jnp.zeros(s, dt).at[n:2 * n].set(1.0)  # forget gate
    x = nn.Dense(4 * n, name="W", bias_init=bias)(v)
    U = self.param("U", nn.initializers.orthogonal(), (n, 4 * n))
    h0 = common.batch_h0(common.initial_state(self, self.cfg.initial_state, (n,)), v.shape[0])

    def cell(state, x_t):
      h, c = state
      i, f, g, o = jnp.split(x_t + h @ U, 4, axis=-1)
      c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
      return jax.nn.sigmoid(o) * jnp.tanh(c), c

    hs, _ = _scan(cell, (h0, jnp.zeros_like(h0)), x)
    D = self.param("D", nn.initializers.ones, (d,))
    return nn.Dense(d, name="readout")(jnp.swapaxes(hs, 0, 1)) + D * v


class GRU(nn.Module):
  cfg: object

  @nn.compact
  def __call__(self, v):
    d, n = v.shape[-1], self.cfg.d_state
    x = nn.Dense(3 * n, name="W")(v)
    U = self.param("U", nn.initializers.orthogonal(), (n, 3 * n))
    c = self.param("c", nn.initializers.zeros, (3 * n,))
    h0 = common.batch_h0(common.initial_state(self, self.cfg.initial_state, (n,)), v.shape[0])

    def cell(h, x_t):
      hu = h @ U + c
      r = jax.nn.sigmoid(x_t[..., :n] + hu[..., :n])
      z = jax.nn.sigmoid(x_t[..., n:2 * n] + hu[..., n:2 * n])
      new = jnp.tanh(x_t[..., 2 * n:] + r * hu[..., 2 * n:])
      return (1 - z) * new + z * h

    hs = _scan(cell, h0, x)
    D = self.param("D", nn.initializers.ones, (d,))
    return nn.Dense(d, name="readout")(jnp.swapaxes(hs, 0, 1)) + D * v
