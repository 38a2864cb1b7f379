"""The built-in layers, registered through the same public call a plugin module makes.

Each record says what the suite knows about the layer: its transition class (what the theory
predicts from), the scan family it hands diagonal_scan, its hand-built constructions, and the
values a preset gives it on top of the preset's own (BUILD_NOTES, "Table 2 at CPU scale").
"""
from __future__ import annotations

import functools

from ssm_bench import analytic
from ssm_bench.layers import aussm, mamba, rnn, s4d
from ssm_bench.registry import BUILTIN_SOURCE, register_layer

# At CPU scale the full-state baselines are cheap and learn the larger groups only when wider and
# trained longer; the rnn's hidden size is d_state, starved at the cpu preset's 4 (smoke: 1 of 8).
_WIDE = dict(d_model=64, d_state=64, steps=6000)

register_layer("mamba", functools.partial(mamba.Mamba, negative=False),
               theory_class="nonnegative_diagonal", scan_family="decay",
               description="Mamba (S6): a_t = exp(Delta_t Lambda) in (0, 1)", source=BUILTIN_SOURCE)
register_layer("negmamba", functools.partial(mamba.Mamba, negative=True),
               theory_class="signed_diagonal", scan_family="signed_decay",
               constructions=(analytic.PARITY,),
               description="Mamba with negative eigenvalues (Grazzi et al. 2025): "
                           "a_t = 2 exp(Delta_t Lambda) - 1 in (-1, 1)", source=BUILTIN_SOURCE)
register_layer("simple_aussm", aussm.SimpleAUSSM, theory_class="unit_modulus_diagonal",
               constructions=(analytic.ABELIAN, analytic.S3_CASCADE),
               presets={"table2_cpu": dict(d_model=64, d_state=32, steps=6000)},
               description="simplified AUSSM (paper 000, Sec. 6): h_t = exp(i theta(v_t)) h_{t-1}",
               source=BUILTIN_SOURCE)
register_layer("aussm", aussm.AUSSM, theory_class="unit_modulus_diagonal", scan_family="rotation",
               constructions=(analytic.S3_AUSSM,),
               description="adaptive unitary SSM (Karuvally et al. 2025): a_t = exp(i theta_t)",
               source=BUILTIN_SOURCE)
register_layer("s4d", s4d.S4D, theory_class="time_invariant", scan_family="constant",
               constructions=(analytic.MODCOUNT,),
               description="S4D (Gu et al. 2022): a = exp(Delta Lambda), the same at every step",
               source=BUILTIN_SOURCE)
register_layer("rnn", rnn.RNN, theory_class="nonlinear_or_dense", uses_scan_method=False,
               presets={"table2_cpu": _WIDE, "profile_cpu": _WIDE},
               description="tanh RNN: h_t = tanh(W h_{t-1} + U v_t + c)", source=BUILTIN_SOURCE)
register_layer("ids4", rnn.IDS4, theory_class="nonlinear_or_dense",
               description="IDS4 (Merrill et al. 2024, Sec. 5): dense input-dependent A(v_t)",
               source=BUILTIN_SOURCE)
