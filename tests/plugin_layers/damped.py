"""A complex diagonal layer whose transitions decay and turn, r_t exp(i theta_t) with r_t in
(0, 1): the paper's DCD at any modulus (`complex_diagonal`); `cls` declares another class, so a
test can see the narrower unit-modulus one refuse it. Its recurrence goes to the suite's scan as
the `complex` factor family (a per step, shared over channels)."""
import flax.linen as nn
import jax
import jax.numpy as jnp

from ssm_bench import scan
from ssm_bench.registry import module_kwargs, register_layer


class Damped(nn.Module):
  cfg: object
  cls: str = "complex_diagonal"

  @nn.compact
  def __call__(self, v):
    d, n = v.shape[-1], self.cfg.d_state
    u = nn.Dense(d, name="in_u")(v)
    r = jax.nn.sigmoid(nn.Dense(n, name="r")(u) + 2.0)  # about 0.88 at init, never 1
    a = r * jnp.exp(1j * nn.Dense(n, name="theta")(u))  # (b, t, n), shared over channels
    self.sow("intermediates", "transition", a)
    param = lambda name: self.param(name, nn.initializers.normal(0.5), (d, n)).astype(
        jnp.complex64)
    f = scan.Factors("complex", x=u, B=param("B"), C=param("C"), a=a,
                     h0=jnp.zeros((d, n), jnp.complex64))
    return nn.Dense(d, name="out")(scan.diagonal_scan(f, self.cfg.scan_method))


register_layer("damped", Damped, theory_class=lambda kwargs: kwargs["cls"],
               kwargs=module_kwargs(Damped), scan_family="complex")
