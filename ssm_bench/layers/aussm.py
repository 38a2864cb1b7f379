"""Adaptive unitary SSM (Karuvally et al. 2025) and its simplified form (paper 000, Sec. 6).

Transitions exp(i theta_t) lie on the unit circle: the layer can only rotate its state, which is
what tracking an Abelian group needs. Complex parameters are stored as (magnitude, phase) reals.
"""
from __future__ import annotations

import math

import flax.linen as nn
import jax.numpy as jnp

from ssm_bench import scan
from ssm_bench.config import ModelConfig
from ssm_bench.layers import common

FAMILY = "rotation"  # its factors' family: the scan method and the layout follow from it


def polar_param(module, name, shape):
  """softplus(re) * exp(i im): a complex array kept as two real parameters."""
  re = module.param(f"{name}_re", nn.initializers.zeros, shape)
  im = module.param(f"{name}_im", common.uniform_init(-math.pi, math.pi), shape)
  return nn.softplus(re) * jnp.exp(1j * im)


class AUSSM(nn.Module):
  """theta_t = W u_t / sqrt(d) + b; b_t = Delta_t silu(u_t) B; y = Re(C h) + D silu(u), gated."""
  cfg: ModelConfig

  @nn.compact
  def __call__(self, v):
    cfg, d, n = self.cfg, v.shape[-1], self.cfg.d_state
    cf = scan.channels_first(cfg.scan_method, v.shape[1], FAMILY)  # (d, b, t) inside: `Factors`
    u = common.dense(v, d, "in_u", cf)
    z = common.dense(v, d, "in_z", cf)
    w_theta = self.param("theta_w", nn.initializers.normal(1.0), (d, n))
    b_theta = self.param("theta_b", common.uniform_init(-math.pi, math.pi), (n,))
    # (batch, time, n), or (n, batch, time): shared across channels
    theta = common.project(u, w_theta, cf, cf) / math.sqrt(d) + common.per_channel(b_theta, cf)
    dt = common.low_rank_dt(u, d, cfg, channels_first=cf)
    B = polar_param(self, "B", (d, n))
    C = polar_param(self, "C", (d, n))
    su = nn.silu(u)
    h0 = common.initial_state(self, cfg.initial_state, (d, n)).astype(jnp.complex64)
    f = scan.Factors(FAMILY, x=dt * su, B=B, C=C, h0=h0, theta=theta, channels_first=cf)
    common.sow_transition(self, f)
    D = self.param("D", nn.initializers.ones, (d,))
    y = scan.diagonal_scan(f, cfg.scan_method) + common.per_channel(D, cf) * su
    return common.batch_major(y * nn.silu(z), cf)


class SimpleAUSSM(nn.Module):
  """theta_t affine in v_t, no input term: h_t = exp(i theta_t) h_{t-1} from a unit-norm h0.

  The readout is a linear map of (Re h, Im h) plus D * v, the residual inside the layer.
  """
  cfg: ModelConfig

  @nn.compact
  def __call__(self, v):
    cfg, d, n = self.cfg, v.shape[-1], self.cfg.d_state
    theta = nn.Dense(n, name="theta", bias_init=common.uniform_init(-math.pi, math.pi))(v)
    a = jnp.exp(1j * theta)
    self.sow("intermediates", "transition", a)  # (b, t, n): no d axis, cheap to keep
    h0 = common.initial_state(self, cfg.initial_state, (n,)).astype(jnp.complex64)
    h = scan.linear_scan(a, jnp.zeros_like(a), common.batch_h0(h0, v.shape[0]), cfg.scan_method)
    D = self.param("D", nn.initializers.ones, (d,))
    return nn.Dense(d, name="readout")(jnp.concatenate([h.real, h.imag], -1)) + D * v
