"""Baselines with full (non-diagonal) state updates: a tanh RNN and IDS4.

rnn: h_t = tanh(W h_{t-1} + U v_t + c), hidden size d_state, always a sequential scan.
ids4 (Merrill et al. 2024, Sec. 5): h_t = A(v_t) h_{t-1} + B v_t with a dense input-dependent
A, through the matrix form of the scan core; `row_norm` bounds A(v_t)'s infinity norm by 1.
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from ssm_bench import scan
from ssm_bench.config import ModelConfig
from ssm_bench.layers import common


class RNN(nn.Module):
  cfg: ModelConfig

  @nn.compact
  def __call__(self, v):
    cfg, d, n = self.cfg, v.shape[-1], self.cfg.d_state
    x = nn.Dense(n, name="U")(v)
    W = self.param("W", nn.initializers.orthogonal(), (n, n))
    h0 = common.batch_h0(common.initial_state(self, cfg.initial_state, (n,)), v.shape[0])

    def step(h, x_t):
      h = jnp.tanh(h @ W + x_t)
      return h, h
    _, hs = jax.lax.scan(step, h0, jnp.swapaxes(x, 0, 1))
    hs = jnp.swapaxes(hs, 0, 1)
    D = self.param("D", nn.initializers.ones, (d,))
    return nn.Dense(d, name="readout")(hs) + D * v


class IDS4(nn.Module):
  cfg: ModelConfig
  # A_t / max(1, ||A_t||_inf) (its largest row of absolute values): ||h_t||_inf then grows at
  # most by ||b_t||_inf a step instead of by a factor, and a permutation (norm 1) passes
  # unchanged, so the layer still holds any group's regular representation (BUILD_NOTES).
  row_norm: bool = False

  @nn.compact
  def __call__(self, v):
    cfg, d, n = self.cfg, v.shape[-1], self.cfg.d_state
    eye = jnp.eye(n, dtype=jnp.float32).ravel()
    A = nn.Dense(n * n, name="A", kernel_init=nn.initializers.normal(0.1 / n),
                 bias_init=lambda *_: 0.9 * eye)(v).reshape(v.shape[:2] + (n, n))
    if self.row_norm:
      A = A / jnp.maximum(1.0, jnp.abs(A).sum(-1).max(-1))[..., None, None]
    self.sow("intermediates", "transition", A)
    b = nn.Dense(n, name="B")(v)
    h0 = common.batch_h0(common.initial_state(self, cfg.initial_state, (n,)), v.shape[0])
    h = scan.matrix_scan(A, b, h0, cfg.scan_method)
    D = self.param("D", nn.initializers.ones, (d,))
    return nn.Dense(d, name="readout")(h) + D * v
