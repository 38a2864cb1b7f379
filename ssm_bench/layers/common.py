"""Pieces every recurrent layer shares: the initial state, step-size initialisation, the
Mamba block's causal conv, and projections that write channels first (`dense`)."""
from __future__ import annotations

import functools
import math
from typing import Callable

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


def low_rank_dt(u, d: int, cfg, name_prefix: str = "dt", channels_first: bool = False,
                softplus: bool = True):
  """Delta_t = softplus(W_up W_down u_t + b): Mamba's low-rank, input-dependent step size;
  without `softplus`, its pre-activation (for factors that apply it: `Factors.discretize`)."""
  rank = max(1, math.ceil(d / 16))
  r = dense(u, rank, f"{name_prefix}_down", channels_first, channels_first, use_bias=False)
  pre = dense(r, d, f"{name_prefix}_up", channels_first, channels_first,
              bias_init=dt_bias_init(cfg.dt_min, cfg.dt_max))
  return nn.softplus(pre) if softplus else pre


class ChannelsFirstDense(nn.Module):
  """nn.Dense (the same parameters and initializers, so the same values from the same key)
  whose output is (features, batch, time): one matmul writes it in that order at no cost, where
  a transpose after it is a pass over the array. `x_channels_first`: x is (features, ...) too."""
  features: int
  x_channels_first: bool = False
  use_bias: bool = True
  bias_init: Callable = nn.initializers.zeros

  @nn.compact
  def __call__(self, x):
    axis = 0 if self.x_channels_first else x.ndim - 1
    kernel = self.param("kernel", nn.initializers.lecun_normal(), (x.shape[axis], self.features))
    y = project(x, kernel, True, self.x_channels_first)
    if self.use_bias:
      y = y + self.param("bias", self.bias_init, (self.features,)).reshape(
          (-1,) + (1,) * (y.ndim - 1))
    return y


def project(x, kernel, channels_first: bool, x_channels_first: bool = False):
  """x's features times kernel (in, out): (..., out) as `x @ kernel`, or channels first
  (out, ...) as the one matmul that writes that order, whose gradients are matmuls that write
  x's and the kernel's orders (jax's own rule would transpose dx after its matmul). At the
  matmul precision in force where it is traced, as a plain dot is."""
  if not channels_first:
    return x @ kernel
  return _channels_first_matmul(x, kernel, 0 if x_channels_first else x.ndim - 1,
                                jax.config.jax_default_matmul_precision)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _channels_first_matmul(x, kernel, axis, precision):
  return jax.lax.dot_general(kernel, x, (((0,), (axis,)), ((), ())), precision=precision)


def _channels_first_matmul_fwd(x, kernel, axis, precision):
  return _channels_first_matmul(x, kernel, axis, precision), (x, kernel)


def _channels_first_matmul_bwd(axis, precision, res, g):
  x, kernel = res  # g: (out, rest of x)
  dot = functools.partial(jax.lax.dot_general, precision=precision)
  rest_g = tuple(range(1, g.ndim))
  rest_x = tuple(i for i in range(x.ndim) if i != axis)
  dx = (dot(kernel, g, (((1,), (0,)), ((), ()))) if axis == 0  # (in, rest)
        else dot(g, kernel, (((0,), (1,)), ((), ()))))  # (rest, in)
  return dx, dot(x, g, ((rest_x, rest_g), ((), ())))  # (in, out)


_channels_first_matmul.defvjp(_channels_first_matmul_fwd, _channels_first_matmul_bwd)


def dense(x, features: int, name: str, channels_first: bool, x_channels_first: bool = False,
          **kw):
  """A projection of x's features: nn.Dense, or channels first (`ChannelsFirstDense`)."""
  if not channels_first:
    return nn.Dense(features, name=name, **kw)(x)
  return ChannelsFirstDense(features, x_channels_first, name=name, **kw)(x)


def per_channel(v, channels_first: bool):
  """A (d,) parameter broadcast against (b, t, d) or channels-first (d, b, t) arrays."""
  return v[:, None, None] if channels_first else v


def batch_major(y, channels_first: bool):
  """A layer's output as (batch, time, d) (one transpose when it was built channels first)."""
  return jnp.moveaxis(y, 0, -1) if channels_first else y


def batch_h0(h0, batch: int):
  return jnp.broadcast_to(h0, (batch,) + h0.shape)


def sow_transition(module: nn.Module, factors):
  """Record a_t for inspection (tests, analysis) only when asked: it is (b, t, d, n) in memory."""
  if module.is_mutable_collection("intermediates"):
    from ssm_bench.scan import factors as F
    module.sow("intermediates", "transition", F.transition(factors.batch_major()))


class CausalConv(nn.Module):
  """Depthwise causal conv along time, y_t = sum_j w_j * u_{t-k+1+j} + b (zeros before t = 0).

  nn.Conv's parameters (kernel (k, 1, d), bias (d,)), so stored runs load, but computed as k
  shifted multiply-adds: XLA compiles a depthwise conv's weight gradient to a dense conv over
  every pair of channels, K d of them under the run axis's vmap (a mamba step at K = 8 spent 89%
  of its CPU time there; BUILD_NOTES, Performance), while shifted products fuse elementwise.
  """
  kernel_size: int
  channels_first: bool = False  # u is (d, b, t)

  @nn.compact
  def __call__(self, u):
    cf, k = self.channels_first, self.kernel_size
    t, d = (u.shape[-1], u.shape[0]) if cf else u.shape[-2:]
    w = self.param("kernel", nn.initializers.lecun_normal(), (k, 1, d))
    b = self.param("bias", nn.initializers.zeros, (d,))
    if cf:
      u = jnp.pad(u, [(0, 0)] * (u.ndim - 1) + [(k - 1, 0)])
      return sum(u[..., j:j + t] * per_channel(w[j, 0], cf) for j in range(k)) + per_channel(b, cf)
    u = jnp.pad(u, [(0, 0)] * (u.ndim - 2) + [(k - 1, 0), (0, 0)])
    return sum(u[..., j:j + t, :] * w[j, 0] for j in range(k)) + b
