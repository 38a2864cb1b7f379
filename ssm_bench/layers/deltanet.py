"""DeltaNet with negative eigenvalues (Grazzi et al. 2025) and DeltaProduct (Siems et al. 2025).

Per head, a matrix state S (N keys x d_head values). Each token applies n_h delta-rule steps
(DeltaNet: n_h = 1), step j with its own key, value and step size:

    S <- (I - beta_j k_j k_j^T) S + beta_j k_j v_j^T,   k_j = W_k^j v_t / |W_k^j v_t| (key_norm),
    beta_j = beta_max sigmoid(W_beta^j v_t),             y_t = W_o [S_t^T q_t]_heads + D v_t.

With unit keys a factor has eigenvalues 1 (N - 1 times) and 1 - beta: beta_max = 2 reaches -1,
which is what tracks parity in one layer. The token's transition A_t = H_{n_h} ... H_1 and input
U_t = sum_j H_{n_h} ... H_{j+1} beta_j k_j v_j^T turn the recurrence into S_t = A_t S_{t-1} + U_t;
the scan core's `householder_scan` computes it (sequential: as rank-1 updates, with no N x N
matrix; associative: with A_t materialized). A_t is built here only for the `transition`
intermediate that theory checks read.
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from ssm_bench import scan
from ssm_bench.layers import common
from ssm_bench.scan import householder


class DeltaProduct(nn.Module):
  cfg: object  # ModelConfig: d_state = N, the key dimension per head
  n_h: int = 1  # Householder factors per token (1: DeltaNet)
  beta_max: float = 2.0  # 2: eigenvalues in [-1, 1]; 1: in [0, 1]
  key_norm: bool = True  # unit keys (the eigenvalue range above needs them)
  heads: int = 1

  @nn.compact
  def __call__(self, v):
    b, t, d = v.shape
    N, H, n_h = self.cfg.d_state, self.heads, self.n_h
    if n_h < 1 or H < 1:
      raise ValueError(f"n_h and heads must be at least 1, got n_h={n_h}, heads={H}")
    if d % H:
      raise ValueError(f"d_model {d} is not a multiple of heads {H}")
    m = d // H
    split = lambda x, *s: x.reshape((b, t) + s)
    q = split(nn.Dense(H * N, name="q")(v), H, N)
    k = split(nn.Dense(n_h * H * N, name="k")(v), n_h, H, N)
    if self.key_norm:
      k = k / jnp.maximum(jnp.linalg.norm(k, axis=-1, keepdims=True), 1e-6)
    val = split(nn.Dense(n_h * d, name="v")(v), n_h, H, m)
    beta = self.beta_max * jax.nn.sigmoid(split(nn.Dense(n_h * H, name="beta")(v), n_h, H))
    # heads before the delta steps: (b, t, H, n_h, ...)
    k, beta, val = (jnp.swapaxes(x, 2, 3) for x in (k, beta, val))
    if self.is_mutable_collection("intermediates"):
      self.sow("intermediates", "transition", householder.factors(k, beta, val)[0])  # (b,t,H,N,N)
    h0 = common.initial_state(self, self.cfg.initial_state, (N, m))
    fold = lambda x: jnp.swapaxes(x, 1, 2).reshape((b * H, t) + x.shape[3:])
    S = scan.householder_scan(fold(k), fold(beta), fold(val), jnp.broadcast_to(h0, (b * H, N, m)),
                              self.cfg.scan_method)  # (b H, t, N, m)
    S = jnp.swapaxes(S.reshape(b, H, t, N, m), 1, 2)
    y = jnp.einsum("bthnm,bthn->bthm", S, q).reshape(b, t, d)
    D = self.param("D", nn.initializers.ones, (d,))
    return nn.Dense(d, name="o")(y) + D * v
