"""S4D (Gu et al. 2022): input-independent complex diagonal transitions, ZOH discretisation.

a = exp(Delta Lambda), identical at every step; b_t = (a - 1) / Lambda * B u_t;
y = 2 Re(C h) + D u. S4D-Lin init: Lambda_n = -1/2 + i pi n.
"""
from __future__ import annotations

import math

import flax.linen as nn
import jax.numpy as jnp

from ssm_bench import scan
from ssm_bench.config import ModelConfig
from ssm_bench.layers import common

FAMILY = "constant"  # its factors' family: the scan method and the layout follow from it


class S4D(nn.Module):
  cfg: ModelConfig

  @nn.compact
  def __call__(self, v):
    cfg, d, n = self.cfg, v.shape[-1], self.cfg.d_state
    cf = scan.channels_first(cfg.scan_method, v.shape[1], FAMILY)  # (d, b, t) inside: `Factors`
    u = common.dense(v, d, "in_u", cf)
    log_dt = self.param("log_dt", common.uniform_init(math.log(cfg.dt_min), math.log(cfg.dt_max)), (d,))
    log_neg_re = self.param("lambda_log_neg_re", nn.initializers.constant(math.log(0.5)), (d, n))
    lam_im = self.param("lambda_im", lambda _, s: jnp.broadcast_to(
        math.pi * jnp.arange(s[1], dtype=jnp.float32), s), (d, n))
    lam = -jnp.exp(log_neg_re) + 1j * lam_im
    a = jnp.exp(jnp.exp(log_dt)[:, None] * lam)  # (d, n)
    B = (self.param("B_re", nn.initializers.ones, (d, n))
         + 1j * self.param("B_im", nn.initializers.zeros, (d, n)))
    C = (self.param("C_re", nn.initializers.normal(0.5), (d, n))
         + 1j * self.param("C_im", nn.initializers.normal(0.5), (d, n)))
    h0 = common.initial_state(self, cfg.initial_state, (d, n)).astype(jnp.complex64)
    # zero-order hold: b_t = (a - 1) / Lambda * B u_t, so x = u and the input vector is ZOH(B)
    f = scan.Factors(FAMILY, x=u, B=(a - 1.0) / lam * B, C=C,
                     h0=h0, a=a, channels_first=cf)
    common.sow_transition(self, f)
    D = self.param("D", nn.initializers.ones, (d,))
    y = 2.0 * scan.diagonal_scan(f, cfg.scan_method) + common.per_channel(D, cf) * u
    return common.batch_major(y, cf)
