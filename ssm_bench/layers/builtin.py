"""The built-in layers, registered through the same public call a plugin module makes.

Each record says what the suite knows about the layer: its transition class (what the theory
predicts from), the scan family it hands diagonal_scan, its hand-built constructions, and the
values a preset gives it on top of the preset's own (BUILD_NOTES, "Protocols"; results/pilots.md).
"""
from __future__ import annotations

import functools

from ssm_bench import analytic_cascade
from ssm_bench import analytic_deltaproduct
from ssm_bench import analytic_dihedral
from ssm_bench import analytic_one_layer
from ssm_bench import analytic_s3
from ssm_bench import analytic_signed
from ssm_bench.layers import aussm, deltanet, gated_rnn, mamba, rnn, s4d, transformer
from ssm_bench.registry import BUILTIN_SOURCE, module_kwargs, register_layer



def _householder(kw) -> str:
  """DeltaNet/DeltaProduct's class: reflections need unit keys and beta up to 2; with beta in
  [0, 1] the eigenvalues are non-negative; anything else claims nothing."""
  if kw.get("n_h", 1) < 1:  # the layer refuses it too, but a run's class is read first
    raise ValueError(f"n_h must be at least 1, got {kw['n_h']}")
  if not kw["key_norm"]:
    return "unknown"
  if kw["beta_max"] == 2.0:
    return f"householder:{kw.get('n_h', 1)}"
  # beta below 0 gives eigenvalues 1 - beta above 1: no class of contractions claims that
  return "householder_nonnegative" if 0.0 <= kw["beta_max"] <= 1.0 else "unknown"


# At CPU scale the full-state baselines are cheap and learn the larger groups only when wider and
# trained longer; the rnn's hidden size is d_state, starved at the cpu preset's 4 (smoke: 1 of 8).
_WIDE = dict(d_model=64, d_state=64, steps=6000)

register_layer("mamba", functools.partial(mamba.Mamba, negative=False),
               theory_class="nonnegative_diagonal", scan_family="decay",
               description="Mamba (S6): a_t = exp(Delta_t Lambda) in (0, 1)", source=BUILTIN_SOURCE)
register_layer("negmamba", functools.partial(mamba.Mamba, negative=True),
               theory_class="signed_diagonal", scan_family="signed_decay",
               constructions=(analytic_one_layer.PARITY, analytic_signed.SIGNED),
               description="Mamba with negative eigenvalues (Grazzi et al. 2025): "
                           "a_t = 2 exp(Delta_t Lambda) - 1 in (-1, 1)", source=BUILTIN_SOURCE)
register_layer("simple_aussm", aussm.SimpleAUSSM, theory_class="unit_modulus_diagonal",
               constructions=(analytic_one_layer.ABELIAN, analytic_s3.S3_CASCADE,
                              analytic_cascade.SOLVABLE),
               presets={"table2_cpu": dict(d_model=64, d_state=32, steps=6000)},
               description="simplified AUSSM (paper 000, Sec. 6): h_t = exp(i theta(v_t)) h_{t-1}",
               source=BUILTIN_SOURCE)
register_layer("aussm", aussm.AUSSM, theory_class="unit_modulus_diagonal", scan_family=aussm.FAMILY,
               constructions=(analytic_s3.S3_AUSSM, analytic_cascade.SOLVABLE_AUSSM),
               description="adaptive unitary SSM (Karuvally et al. 2025): a_t = exp(i theta_t)",
               source=BUILTIN_SOURCE)
register_layer("s4d", s4d.S4D, theory_class="time_invariant", scan_family=s4d.FAMILY,
               constructions=(analytic_one_layer.MODCOUNT,),
               description="S4D (Gu et al. 2022): a = exp(Delta Lambda), the same at every step",
               source=BUILTIN_SOURCE)
register_layer("rnn", rnn.RNN, theory_class="nonlinear_or_dense", uses_scan_method=False,
               presets={"table2_cpu": _WIDE, "profile_cpu": _WIDE},
               description="tanh RNN: h_t = tanh(W h_{t-1} + U v_t + c)", source=BUILTIN_SOURCE)
register_layer("ids4", rnn.IDS4, theory_class="nonlinear_or_dense", kwargs=module_kwargs(rnn.IDS4),
               description="IDS4 (Merrill et al. 2024, Sec. 5): dense input-dependent A(v_t)",
               source=BUILTIN_SOURCE)

# Baselines (BUILD_NOTES, "Baselines"): registered like any plugin's layers.
register_layer("lstm", gated_rnn.LSTM, theory_class="nonlinear_or_dense", uses_scan_method=False,
               presets={"table2_ext_cpu": _WIDE, "profile_cpu": _WIDE},
               description="LSTM (hidden size d_state), forget-gate bias 1", source=BUILTIN_SOURCE)
register_layer("gru", gated_rnn.GRU, theory_class="nonlinear_or_dense", uses_scan_method=False,
               presets={"table2_ext_cpu": _WIDE, "profile_cpu": _WIDE},
               description="GRU (hidden size d_state), the cuDNN form", source=BUILTIN_SOURCE)
_DELTANET = functools.partial(deltanet.DeltaProduct, n_h=1)
register_layer("deltanet", _DELTANET, theory_class=_householder, kwargs=module_kwargs(_DELTANET),
               constructions=(analytic_one_layer.PARITY_DELTANET, analytic_dihedral.PLANE_GROUPS,
                              analytic_dihedral.SIGNED_PLANE),
               description="DeltaNet with negative eigenvalues (Grazzi et al. 2025): "
                           "S_t = (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, beta in "
                           "[0, beta_max]", source=BUILTIN_SOURCE)
register_layer("deltaproduct", deltanet.DeltaProduct, theory_class=_householder,
               kwargs=module_kwargs(deltanet.DeltaProduct, n_h=2),
               constructions=(analytic_deltaproduct.ANY_GROUP,),
               description="DeltaProduct (Siems et al. 2025): n_h delta-rule (Householder) "
                           "steps per token", source=BUILTIN_SOURCE)
register_layer("transformer", transformer.Attention, theory_class="tc0", uses_scan_method=False,
               kwargs=module_kwargs(transformer.Attention),
               description="causal multi-head self-attention with an attention sink, NoPE by "
                           "default (rope, learned)",
               source=BUILTIN_SOURCE)
