"""Test plugin: register() counts its calls (a researcher's may do work worth doing once: a
table computed, a line printed)."""
import flax.linen as nn

from ssm_bench.registry import register_layer

CALLS = 0


class Counted(nn.Module):
  cfg: object

  @nn.compact
  def __call__(self, v):
    return nn.Dense(v.shape[-1], name="mix")(v)


def register():
  global CALLS
  CALLS += 1
  register_layer("counted", Counted, theory_class="nonlinear_or_dense")
