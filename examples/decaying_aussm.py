"""An example complex diagonal layer whose transitions decay as well as turn: AUSSM's rotation
times an input-dependent modulus below 1, as selective complex SSMs (Mamba-3-style) have.

    python -m launch.info --plugins=examples.decaying_aussm --model=decaying_aussm
    python -m launch.profile --plugins=examples.decaying_aussm --model=decaying_aussm
    python -m launch.analytic --plugins=examples.decaying_aussm --model=decaying_aussm --task=S4

    h_t[d, n] = r_t[n] exp(i theta_t[n]) h_{t-1}[d, n] + Delta_t[d] silu(u_t[d]) B[d, n]
    y_t[d]    = Re sum_n C[d, n] h_t[d, n] + D[d] silu(u_t[d]),   gated by silu(z_t)
    r_t       = exp(-softplus(u_t W_r / sqrt(d) + b_r)),  b_r = -4 at init (r near 0.98)

The transitions are any complex numbers inside the unit disc, so the layer declares
`complex_diagonal`: paper 000's theorems hold at any modulus (the derived length, as for
AUSSM's unit-modulus class, whose check would flag this layer). Its recurrence goes to
`scan.diagonal_scan` as the `complex` factor family (a per step, shared over channels), which
the reference scans and `chunked` run (`auto`), and on a GPU the chunked kernel when asked for
(`--config.scan_method=pallas_chunked`). For that kernel it builds its factors channels first,
as the built-in layers do (`scan.channels_first`; `common.dense` and `common.project` write
that order): compiled for an H200, a 27-run step moves 35.2 GB instead of 45.7 batch major.
Its record carries AUSSM's hand-built cascade, written into its own parameters with the decay
off (`_CascadeWeights`), so its profile tells a training failure from an inexpressible cell.
"""
from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from ssm_bench import analytic_cascade
from ssm_bench import scan
from ssm_bench.layers import common
from ssm_bench.registry import register_layer


class DecayingAUSSM(nn.Module):
  cfg: object  # ssm_bench.config.ModelConfig: d_state, the scan method, dt range, h0

  @nn.compact
  def __call__(self, v):
    cfg, d, n = self.cfg, v.shape[-1], self.cfg.d_state
    # Where the method reads factors channels first (the GPU's chunked kernel), build them so,
    # (d, batch, time): the matmuls write that order at no cost, where each array would
    # otherwise be transposed for the kernel and back (elsewhere `cf` is False: batch major).
    cf = scan.channels_first(cfg.scan_method, v.shape[1], "complex")
    u, z = common.dense(v, d, "in_u", cf), common.dense(v, d, "in_z", cf)
    per_step = lambda name, bias_init: (  # (b, t, n), or (n, b, t): shared over channels
        common.project(u, self.param(f"{name}_w", nn.initializers.normal(1.0), (d, n)), cf, cf)
        / math.sqrt(d) + common.per_channel(self.param(f"{name}_b", bias_init, (n,)), cf))
    theta = per_step("theta", common.uniform_init(-math.pi, math.pi))
    log_r = -jax.nn.softplus(per_step("decay", nn.initializers.constant(-4.0)))
    a = jnp.exp(jax.lax.complex(log_r, theta))
    self.sow("intermediates", "transition", a)  # the eigenvalues, for the declaration check
    const = lambda name: jax.lax.complex(
        *(self.param(f"{name}_{part}", nn.initializers.normal(n ** -0.5), (d, n))
          for part in ("re", "im")))
    su = nn.silu(u)
    h0 = common.initial_state(self, cfg.initial_state, (d, n)).astype(jnp.complex64)
    f = scan.Factors("complex", x=common.low_rank_dt(u, d, cfg, channels_first=cf) * su,
                     B=const("B"), C=const("C"), h0=h0, a=a, channels_first=cf)
    D = self.param("D", nn.initializers.ones, (d,))
    y = scan.diagonal_scan(f, cfg.scan_method) + common.per_channel(D, cf) * su
    return common.batch_major(y * nn.silu(z), cf)


class _CascadeWeights(analytic_cascade.AussmLayers):
  """AUSSM's cascade written into this layer: the decay off (softplus(-30) = 9.4e-14, and
  exp(-9.4e-14) is 1 in float32, so every transition is the cascade's rotation exactly), B = 0
  and C in cartesian form, where AUSSM keeps it polar."""

  def __init__(self, p, cfg):
    super().__init__(p, cfg)
    for i in range(len(cfg.layers)):
      lay = p[f"layer{i}"]
      lay["B_re"][:], lay["C_re"][:], lay["decay_b"][:] = 0.0, 0.0, -30.0

  def read(self, i, c, coord, re, im):  # Re(C h) = Re C Re h - Im C Im h
    lay = self.p[f"layer{i}"]
    lay["C_re"][c, coord], lay["C_im"][c, coord] = re, -im


CASCADE = analytic_cascade.cascade_construction(
    "any solvable group in derived-length-many layers with the decay off: AUSSM's unit-modulus "
    "cascade (paper 000, Theorem 4.2), which this class contains",
    layer="decaying_aussm", writer=_CascadeWeights)

register_layer("decaying_aussm", DecayingAUSSM, theory_class="complex_diagonal",
               scan_family="complex", constructions=(CASCADE,),
               description="AUSSM whose transitions also decay (examples/decaying_aussm.py)")
