"""Test plugin: a layer whose output has the wrong width."""
import flax.linen as nn

from ssm_bench.registry import register_layer


class Wide(nn.Module):
  cfg: object

  @nn.compact
  def __call__(self, v):
    return nn.Dense(v.shape[-1] + 1, name="proj")(v)


def register():
  register_layer("wide", Wide, theory_class="unknown")
