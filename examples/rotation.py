"""An example layer from outside the package: input-dependent 2x2 rotations of a real state.

    python -m launch.train --plugins=examples.rotation --model=rotation --task=C3 --preset=cpu
    python -m launch.profile --plugins=examples.rotation --model=rotation --preset=cpu

The state is n real pairs; at each step every pair is rotated by an angle that depends on the
input, then the input is added:

    h_t[j] = R(theta_t[j]) h_{t-1}[j] + b_t[j],   theta_t = angle_scale * W_theta u_t + c,
    R(a) = [[cos a, -sin a], [sin a, cos a]],     b_t = W_b u_t (zero with input_term false),
    y_t = W_out h_t + D v_t.

Rotations commute and have eigenvalues exp(+-i theta) on the unit circle: in a complex basis this
is an input-dependent unit-modulus diagonal SSM (DCD), computed here in real arithmetic through
the suite's dense scan (`scan.matrix_scan` on 2x2 blocks). So the layer declares the class
`unit_modulus_diagonal`, and sows its eigenvalues so that the declaration is checked.
"""
from __future__ import annotations

import math

import flax.linen as nn
import jax.numpy as jnp

from ssm_bench import scan
from ssm_bench.registry import module_kwargs, register_layer


class Rotation(nn.Module):
  cfg: object  # ssm_bench.config.ModelConfig: d_state pairs per layer, the scan method
  angle_scale: float = 1.0
  input_term: bool = True

  @nn.compact
  def __call__(self, v):
    b, t, d = v.shape
    n = self.cfg.d_state
    u = nn.Dense(d, name="in_u")(v)
    theta = self.angle_scale * nn.Dense(
        n, name="theta", bias_init=lambda k, s, dtype=jnp.float32: jnp.linspace(-math.pi, math.pi, s[0], dtype=dtype))(u)
    self.sow("intermediates", "transition", jnp.exp(1j * theta))  # the eigenvalues
    c, s = jnp.cos(theta), jnp.sin(theta)
    R = jnp.stack([jnp.stack([c, -s], -1), jnp.stack([s, c], -1)], -2)  # (b, t, n, 2, 2)
    inp = (nn.Dense(2 * n, name="B")(u).reshape(b, t, n, 2) if self.input_term
           else jnp.zeros((b, t, n, 2)))
    h0 = jnp.full((b, n, 2), 1.0 / math.sqrt(2 * n))  # unit norm: something to rotate
    # the pairs are independent: fold them into the batch of the dense scan
    pairs = lambda x: jnp.moveaxis(x, 2, 1).reshape((b * n, t) + x.shape[3:])
    h = scan.matrix_scan(pairs(R), pairs(inp), h0.reshape(b * n, 2), self.cfg.scan_method)
    h = jnp.moveaxis(h.reshape(b, n, t, 2), 1, 2).reshape(b, t, 2 * n)
    D = self.param("D", nn.initializers.ones, (d,))
    return nn.Dense(d, name="out")(h) + D * v


register_layer("rotation", Rotation, theory_class="unit_modulus_diagonal",
               kwargs=module_kwargs(Rotation),
               description="input-dependent 2x2 rotations of a real state (examples/rotation.py)")
