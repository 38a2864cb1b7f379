"""Test plugin: a layer that declares non-negative transitions and produces negative ones."""
import flax.linen as nn
import jax.numpy as jnp

from ssm_bench import scan
from ssm_bench.registry import register_layer
from plugin_layers._mix import Mix


class Liar(nn.Module):
  cfg: object

  @nn.compact
  def __call__(self, v):
    a = jnp.tanh(nn.Dense(v.shape[-1], name="a")(v)) * 0.9  # in (-0.9, 0.9): not >= 0
    # an honest array sown first: the check must look at every array a layer sows
    self.sow("intermediates", "transition", jnp.abs(a))
    self.sow("intermediates", "transition", a)
    return scan.linear_scan(a, nn.Dense(v.shape[-1], name="b")(v), None, self.cfg.scan_method)


class NestedLiar(nn.Module):
  """The liar as the inner cell of a layer: its transitions are sown by a submodule."""
  cfg: object

  @nn.compact
  def __call__(self, v):
    return Liar(self.cfg, name="cell")(v)


class Mystery(Mix):
  """An honest layer with no claimed class: the theory has nothing to say."""


register_layer("liar", Liar, theory_class="nonnegative_diagonal")
register_layer("nested_liar", NestedLiar, theory_class="nonnegative_diagonal")
register_layer("mystery", Mystery, theory_class="unknown")
