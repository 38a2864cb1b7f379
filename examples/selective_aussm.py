"""An example diagonal layer from outside the package: AUSSM's unit-modulus transitions with
Mamba's selective (per-step) input and readout vectors.

    python -m launch.info --plugins=examples.selective_aussm --model=selective_aussm
    python -m launch.train --plugins=examples.selective_aussm --model=selective_aussm \\
        --task=C3 --preset=cpu

    h_t[d, n] = exp(i theta_t[n]) h_{t-1}[d, n] + Delta_t[d] silu(u_t[d]) B_t[n]
    y_t[d]    = Re sum_n C_t[n] h_t[d, n] + D[d] silu(u_t[d]),   gated by silu(z_t)

with theta_t, Delta_t, B_t and C_t (complex) affine in u_t. The built-in AUSSM keeps B and C
constant per (channel, state); here they vary per step, shared over channels, as Mamba's do.

The layer hands its recurrence to `scan.diagonal_scan` as rotation-family `scan.Factors`, so it
needs no scan of its own: on CPU the chunked scan (with its written-out backward) runs it; the
fused GPU kernels read the built-in pairing only and hand these factors to chunked too. The
transitions are unit-modulus whatever B and C are, so the layer declares AUSSM's theory class and
sows its eigenvalues for the declaration check.
"""
from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from ssm_bench import scan
from ssm_bench.registry import register_layer


def _uniform(lo, hi):
  return lambda key, shape, dtype=jnp.float32: jax.random.uniform(key, shape, dtype, lo, hi)


class SelectiveAUSSM(nn.Module):
  cfg: object  # ssm_bench.config.ModelConfig: d_state, the scan method

  @nn.compact
  def __call__(self, v):
    d, n = v.shape[-1], self.cfg.d_state
    u, z = nn.Dense(d, name="in_u")(v), nn.Dense(d, name="in_z")(v)
    theta = nn.Dense(n, name="theta", bias_init=_uniform(-math.pi, math.pi))(u)  # (b, t, n)
    self.sow("intermediates", "transition", jnp.exp(1j * theta))  # the eigenvalues
    dt = nn.softplus(nn.Dense(d, name="dt")(u))
    complex_vector = lambda name: jax.lax.complex(*jnp.split(nn.Dense(2 * n, name=name)(u), 2, -1))
    su = nn.silu(u)
    f = scan.Factors("rotation", x=dt * su, B=complex_vector("B"), C=complex_vector("C"),
                     h0=jnp.zeros((d, n), jnp.complex64), theta=theta)  # B, C: (b, t, n)
    D = self.param("D", nn.initializers.ones, (d,))
    return (scan.diagonal_scan(f, self.cfg.scan_method) + D * su) * nn.silu(z)


register_layer("selective_aussm", SelectiveAUSSM, theory_class="unit_modulus_diagonal",
               scan_family="rotation",
               description="AUSSM's rotations with per-step B and C (examples/selective_aussm.py)")
