"""Any 2-group by hand in k negmamba layers, k = its elementary-2 length (Grazzi et al. 2025,
Theorem 2): the cascade of `analytic_cascade` along the elementary-2 series, whose quotients
are elementary Abelian 2-groups, each level's state a sign per character.
"""
from __future__ import annotations

import math

import numpy as np

from ssm_bench import analytic
from ssm_bench import analytic_cascade as cascade
from ssm_bench.config import ModelConfig
from tasks import registry


_FLIP, _KEEP = 200.0, -100.0  # Delta = softplus: 200 gives a = 2 exp(-200) - 1 = -1 exactly,
# softplus(-100) ~ 4e-44 gives a = 1


def _all_characters(lv: cascade.Level) -> np.ndarray:
  """(2^m, |A|) signs: every character of the elementary Abelian 2-group A, the trivial first."""
  m = lv.chars.shape[0]
  masks = np.array([[(s >> j) & 1 for j in range(m)] for s in range(2 ** m)])
  return 1 - 2 * ((masks @ lv.chars) % 2)


def _signed_plan(task_name: str, d_model: int, d_state: int):
  """(group, levels, each level's signs, channels, ModelConfig) of the 2-group cascade."""
  g = registry.get_task(task_name).group
  if g is None or g.elementary2_length is None:
    raise analytic.NoConstruction(f"{task_name} is not a 2-group: no elementary-2 series")
  g, levels = cascade.series_levels(task_name, "elementary2")
  depth = len(levels)
  signs = [_all_characters(lv) for lv in levels]
  ch = cascade.Channels()
  ch.add("const", 1)
  for i, lv in enumerate(levels):
    ch.add(("onehot", i), len(lv.elements))
    ch.add(("sign", i), len(signs[i]))  # gate on: relu(32 chi(q_t)) = 16 (1 + chi(q_t))
    if i < depth - 1:
      ch.add(("pair", i), len(signs[i]) * len(lv.elements))  # (chi, z), z fastest
  rank = max(len(c) for c in signs) - 1  # one dt direction per non-trivial character
  cfg = ModelConfig(layers=("negmamba",) * depth, vocab_size=g.order, num_classes=g.order,
                    d_model=max(d_model, ch.size, 16 * rank), d_state=max(d_state, 1),
                    norm="none", activation="relu", initial_state="ones", conv_kernel=0)
  return g, levels, signs, ch, cfg


def signed(task_name: str, d_model: int = 0, d_state: int = 0):
  """(ModelConfig, params): elementary-2-length-many negmamba layers tracking a 2-group.

  Level i's quotient A_i = G_i / G_i^2 [G_i, G_i] is (Z_2)^m; a channel per character chi
  holds the sign chi(q_t) (Delta saturates, so a = +-1 exactly and the state never drifts), and
  the coset's indicator 2^-m sum_chi chi(q) chi(q_t) is linear in the signs. A channel per
  (chi, z), gated by silu(32 [z_t = z] - 200 [z_t != z]), carries chi(q_t) [z_t = z], so the
  pair indicators, and with them the next level's one-hots, are linear in the ReLU outputs.
  """
  g, levels, signs, ch, cfg = _signed_plan(task_name, d_model, d_state)
  depth, n, const = len(levels), cfg.d_state, ch.blocks["const"][0]
  p = analytic.zeros_like_init(cfg)["params"]
  h0 = np.float32(1.0 / math.sqrt(n))  # initial_state "ones"
  for x in range(g.order):
    p["embed"]["embedding"][x, ch.blocks[("onehot", 0)][x]] = 1.0
  for i, lv in enumerate(levels):
    lay, out = p[f"layer{i}"], p[f"out{i}"]["kernel"]
    onehot, sign = ch.blocks[("onehot", i)], ch.blocks[("sign", i)]
    nz = len(lv.elements)
    lay["in_u"]["bias"][const] = 1.0
    lay["in_u"]["kernel"][onehot, onehot] = 1.0  # u carries the level's one-hot to dt
    lay["C"]["kernel"][const, 0] = 1.0 / h0  # C . h = chi(q_t) from state coordinate 0
    lay["dt_up"]["bias"][:] = _KEEP
    tracks = {c: list(sign[c:c + 1]) for c in range(len(signs[i]))}
    if i < depth - 1:
      pair = ch.blocks[("pair", i)]
      for c in range(len(signs[i])):
        tracks[c] += list(pair[c * nz:(c + 1) * nz])
        lay["in_z"]["kernel"][onehot, pair[c * nz:(c + 1) * nz]] = cascade.GATE_ON - cascade.GATE_OFF
        lay["in_z"]["bias"][pair[c * nz:(c + 1) * nz]] = cascade.GATE_OFF
    lay["in_z"]["bias"][sign] = cascade.GATE_ON
    for c in range(1, len(signs[i])):  # character c flips on the tokens where it is -1
      lay["dt_down"]["kernel"][onehot, c - 1] = signs[i][c][lv.coset[lv.elements]] < 0
      lay["dt_up"]["kernel"][c - 1, tracks[c]] = _FLIP - _KEEP
    out[sign, sign] = 1.0 / 16  # the residual holds 1 + chi(q_t)
    if i < depth - 1:
      # chi(q_t) [z_t = z] = (R(chi, z) - R(1, z) / 2) / 16 for the ReLU outputs R; the pair
      # (q, z) is 2^-m sum_chi chi(q) of them, and the next one-hot the sum of its pairs
      m2 = len(signs[i])
      nxt = {int(x): j for j, x in enumerate(levels[i + 1].elements)}
      for zj, z in enumerate(lv.elements):
        for q in range(len(lv.rep)):
          target = ch.blocks[("onehot", i + 1)][nxt[cascade.next_input(g, lv, q, int(z))]]
          for c in range(m2):
            coef = signs[i][c][q] / m2 / 16
            out[pair[c * nz + zj], target] += coef
            out[pair[zj], target] -= coef / 2
  # head: one hidden unit per element y, 1/2 + sum_i (indicator of q^i(y) - 1)
  hidden, head = p["head_hidden"], p["head_out"]["kernel"]
  for y in range(g.order):
    hidden["bias"][y] = 0.5 - depth
    for i, q in enumerate(cascade.cosets(g, levels, y)):
      m2 = len(signs[i])
      hidden["kernel"][ch.blocks[("sign", i)], y] = signs[i][:, q] / m2  # times (1 + chi)
      hidden["bias"][y] -= signs[i][:, q].sum() / m2
    head[y, y] = 1.0
  return cfg, analytic.finish({"params": p})


def _two_group(task_name: str) -> bool:
  g = analytic.task_group(task_name)
  return g is not None and g.elementary2_length is not None and g.order > 1  # C1: no level


SIGNED = analytic.Construction(
    "any 2-group in elementary-2-length-many layers: each level's signs are the characters of "
    "its elementary Abelian 2-quotient (Grazzi et al. 2025, Theorem 2)", build=signed,
    fallback=True,  # a group's default stays the unit-modulus one
    **cascade.sized(_two_group, lambda task: _signed_plan(task, 0, 0)[-1]))
