"""Test plugins: layers that read ahead of the position they answer for."""
import flax.linen as nn
import jax.numpy as jnp


def _next(v):
  """v shifted one step back in time: position t sees t + 1 (zeros at the end)."""
  return jnp.concatenate([v[:, 1:], jnp.zeros_like(v[:, :1])], axis=1)


class Peek(nn.Module):
  """Reads the next token's features from the start."""
  cfg: object

  @nn.compact
  def __call__(self, v):
    return nn.Dense(v.shape[-1], name="mix")(v + _next(v))


class Sleeper(nn.Module):
  """Causal at initialisation: its look ahead is weighted by a parameter that starts at 0."""
  cfg: object

  @nn.compact
  def __call__(self, v):
    ahead = self.param("ahead", nn.initializers.zeros, (v.shape[-1],))
    return nn.Dense(v.shape[-1], name="mix")(v + ahead * _next(v))


def register():
  from ssm_bench.registry import register_layer
  register_layer("peek", Peek, theory_class="unknown")
  register_layer("sleeper", Sleeper, theory_class="unknown")
