"""Test plugin: a decay layer whose B has one state too many for its h0."""
import flax.linen as nn
import jax.numpy as jnp

from ssm_bench import scan
from ssm_bench.registry import register_layer


class BadFactors(nn.Module):
  cfg: object

  @nn.compact
  def __call__(self, v):
    d, n = v.shape[-1], self.cfg.d_state
    f = scan.Factors("decay", x=v, B=nn.Dense(n + 1, name="B")(v), C=nn.Dense(n, name="C")(v),
                     h0=jnp.zeros((d, n)), dt=nn.softplus(v), lam=-jnp.ones((d, n)))
    return scan.diagonal_scan(f, self.cfg.scan_method)


register_layer("badfactors", BadFactors, theory_class="unknown", scan_family="decay")
