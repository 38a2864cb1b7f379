"""Pieces every recurrent layer shares: the initial state, step-size initialisation and the
Mamba block's causal conv."""
from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp


def initial_state(module: nn.Module, kind: str, shape) -> jnp.ndarray:
  """h0 of `shape`, unit norm along the last (state) axis unless kind == 'zeros'.

  The paper starts every SSM from a nonzero unit-norm state (Sec. 6): with h0 = 0 a layer whose
  input term vanishes has nothing to rotate or flip, so the sign/phase constructions need it.
  """
  if kind == "zeros":
    return jnp.zeros(shape, jnp.float32)
  ones = jnp.full(shape, 1.0 / math.sqrt(shape[-1]), jnp.float32)
  if kind == "ones":
    return ones
  h0 = module.param("h0", lambda _, s: jnp.full(s, 1.0 / math.sqrt(s[-1]), jnp.float32), shape)
  return h0 / jnp.maximum(jnp.linalg.norm(h0, axis=-1, keepdims=True), 1e-6)


def dt_bias_init(dt_min: float, dt_max: float):
  """Mamba's step-size bias: softplus^-1 of dt drawn log-uniformly in [dt_min, dt_max]."""
  def init(key, shape, dtype=jnp.float32):
    u = jax.random.uniform(key, shape, dtype)
    dt = jnp.exp(u * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
    return dt + jnp.log(-jnp.expm1(-dt))
  return init


def uniform_init(low: float, high: float):
  def init(key, shape, dtype=jnp.float32):
    return jax.random.uniform(key, shape, dtype, low, high)
  return init


def low_rank_dt(u, d: int, cfg, name_prefix: str = "dt"):
  """Delta_t = softplus(W_up W_down u_t + b): Mamba's low-rank, input-dependent step size."""
  rank = max(1, math.ceil(d / 16))
  r = nn.Dense(rank, use_bias=False, name=f"{name_prefix}_down")(u)
  return nn.softplus(nn.Dense(d, name=f"{name_prefix}_up",
                              bias_init=dt_bias_init(cfg.dt_min, cfg.dt_max))(r))


def batch_h0(h0, batch: int):
  return jnp.broadcast_to(h0, (batch,) + h0.shape)


def sow_transition(module: nn.Module, factors):
  """Record a_t for inspection (tests, analysis) only when asked: it is (b, t, d, n) in memory."""
  if module.is_mutable_collection("intermediates"):
    from ssm_bench.scan import factors as F
    module.sow("intermediates", "transition", F.transition(factors))


class CausalConv(nn.Module):
  """Depthwise causal conv along time, y_t = sum_j w_j * u_{t-k+1+j} + b (zeros before t = 0).

  nn.Conv's parameters (kernel (k, 1, d), bias (d,)), so stored runs load, but computed as k
  shifted multiply-adds: XLA compiles a depthwise conv's weight gradient to a dense conv over
  every pair of channels, K d of them under the run axis's vmap (a mamba step at K = 8 spent 89%
  of its CPU time there; BUILD_NOTES, Performance), while shifted products fuse elementwise.
  """
  kernel_size: int

  @nn.compact
  def __call__(self, u):
    k, t, d = self.kernel_size, u.shape[-2], u.shape[-1]
    w = self.param("kernel", nn.initializers.lecun_normal(), (k, 1, d))
    b = self.param("bias", nn.initializers.zeros, (d,))
    u = jnp.pad(u, [(0, 0)] * (u.ndim - 2) + [(k - 1, 0), (0, 0)])
    return sum(u[..., j:j + t, :] * w[j, 0] for j in range(k)) + b
