"""An example diagonal layer from outside the package: the built-in AUSSM with Mamba's selective
(per-step) input and readout vectors in place of its constant ones.

    python -m launch.info --plugins=examples.selective_aussm --model=selective_aussm
    python -m launch.profile --plugins=examples.selective_aussm --model=selective_aussm

    h_t[d, n] = exp(i theta_t[n]) h_{t-1}[d, n] + Delta_t[d] silu(u_t[d]) B_t[n]
    y_t[d]    = Re sum_n C_t[n] h_t[d, n] + D[d] silu(u_t[d]),   gated by silu(z_t)

Everything but B and C is AUSSM's (ssm_bench/layers/aussm.py: theta, Delta, h0, D, the gate,
their initializations), so a profile of the two compares constant with selective B and C alone.
Here B_t and C_t are complex and linear in u_t, shared over channels, as Mamba's are.

The layer hands its recurrence to `scan.diagonal_scan` as rotation-family `scan.Factors` whose B
and C vary per step, (batch, time, n): not the built-in AUSSM's pairing ((d, n) constants), so
every backend runs it on the chunked scan (with its written-out backward; the fused GPU kernels
hand it over). The transitions are unit-modulus whatever B and C are: the layer declares AUSSM's
theory class and sows its eigenvalues for the declaration check.
"""
from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from ssm_bench import scan
from ssm_bench.layers import common
from ssm_bench.registry import register_layer


class SelectiveAUSSM(nn.Module):
  cfg: object  # ssm_bench.config.ModelConfig: d_state, the scan method, dt range, h0

  @nn.compact
  def __call__(self, v):
    cfg, d, n = self.cfg, v.shape[-1], self.cfg.d_state
    u, z = nn.Dense(d, name="in_u")(v), nn.Dense(d, name="in_z")(v)
    w_theta = self.param("theta_w", nn.initializers.normal(1.0), (d, n))
    b_theta = self.param("theta_b", common.uniform_init(-math.pi, math.pi), (n,))
    theta = u @ w_theta / math.sqrt(d) + b_theta  # (b, t, n): shared over channels
    self.sow("intermediates", "transition", jnp.exp(1j * theta))  # the eigenvalues
    dt = common.low_rank_dt(u, d, cfg)
    per_step = lambda name: jax.lax.complex(*jnp.split(nn.Dense(2 * n, name=name)(u), 2, -1))
    su = nn.silu(u)
    h0 = common.initial_state(self, cfg.initial_state, (d, n)).astype(jnp.complex64)
    f = scan.Factors("rotation", x=dt * su, B=per_step("B"), C=per_step("C"), h0=h0,
                     theta=theta)  # B, C: (b, t, n), where AUSSM's are (d, n)
    D = self.param("D", nn.initializers.ones, (d,))
    return (scan.diagonal_scan(f, cfg.scan_method) + D * su) * nn.silu(z)


register_layer("selective_aussm", SelectiveAUSSM, theory_class="unit_modulus_diagonal",
               scan_family="rotation",
               description="AUSSM with per-step B and C (examples/selective_aussm.py)")
