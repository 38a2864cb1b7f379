"""Test plugin: registers a layer under a built-in's name."""
import flax.linen as nn

from ssm_bench.registry import register_layer


class NotMamba(nn.Module):
  cfg: object

  @nn.compact
  def __call__(self, v):
    return v


register_layer("mamba", NotMamba, theory_class="unknown")
