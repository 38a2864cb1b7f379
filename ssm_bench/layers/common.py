"""Pieces every recurrent layer shares: the initial state and step-size initialisation."""
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
