"""Test plugin: a theory class whose step rule misbehaves (it returns the subgroup without its
identity: no subgroup), and a layer declaring it. Registration cannot see this; it shows where
the theory is first read."""
import flax.linen as nn

from ssm_bench import theory
from ssm_bench.registry import register_layer

theory.register_class("identityless", "a researcher's class with a broken rule", "none",
                      step=lambda group, subgroup, param: subgroup[1:])


class BadStep(nn.Module):
  cfg: object

  @nn.compact
  def __call__(self, v):
    return nn.Dense(v.shape[-1], name="mix")(v)


register_layer("badstep", BadStep, theory_class="identityless")
