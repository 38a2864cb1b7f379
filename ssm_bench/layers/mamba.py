"""Mamba (S6) and negative-eigenvalue Mamba (Grazzi et al. 2025).

a_t = exp(Delta_t Lambda) in (0, 1), or 2 exp(Delta_t Lambda) - 1 in (-1, 1) when negative;
b_t = Delta_t B_t u_t; y_t = C_t . h_t + D u_t, gated by silu(z_t).
"""
from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from ssm_bench import scan
from ssm_bench.config import ModelConfig
from ssm_bench.layers import common


class Mamba(nn.Module):
  cfg: ModelConfig
  negative: bool = False

  @nn.compact
  def __call__(self, v):
    cfg, d, n = self.cfg, v.shape[-1], self.cfg.d_state
    family = "signed_decay" if self.negative else "decay"
    cf = scan.channels_first(cfg.scan_method, v.shape[1], family)  # (d, b, t) inside: `Factors`
    u = common.dense(v, d, "in_u", cf)
    z = common.dense(v, d, "in_z", cf)
    if cfg.conv_kernel:
      u = nn.silu(common.CausalConv(cfg.conv_kernel, cf, name="conv")(u))
    # the step size's pre-activation and u unscaled: the scan applies Mamba's rule
    # (`scan.Factors.discretize`), in registers where the kernel reads them
    dt = common.low_rank_dt(u, d, cfg, channels_first=cf, softplus=False)
    B = common.dense(u, n, "B", cf, cf, use_bias=False)
    C = common.dense(u, n, "C", cf, cf, use_bias=False)
    A_log = self.param("A_log", lambda _, s: jnp.log(jnp.broadcast_to(
        jnp.arange(1, s[1] + 1, dtype=jnp.float32), s)), (d, n))
    h0 = common.initial_state(self, cfg.initial_state, (d, n))
    f = scan.Factors(family, x=u, B=B, C=C, h0=h0, dt=dt, lam=-jnp.exp(A_log),
                     channels_first=cf, discretize="softplus")  # h0 shared: (d, n)
    common.sow_transition(self, f)
    D = self.param("D", nn.initializers.ones, (d,))
    y = scan.diagonal_scan(f, cfg.scan_method) + common.per_channel(D, cf) * u
    return common.batch_major(y * nn.silu(z), cf)
