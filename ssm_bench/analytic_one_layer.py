"""The one-layer constructions (`analytic`: weights set by hand in the modules training uses).

- Any Abelian group, one simple_aussm layer: one state coordinate per character in a generating
  set of the dual group, theta_j(x) = 2 pi c_j(x) / e; decode by nearest roots (paper 000,
  Theorem 4.1). `characters` finds them (the cascades reuse it on each Abelian quotient).
- Parity in one negmamba layer (a(1) = -1, a(0) = 1) or one DeltaNet layer (a reflection on
  the bit 1), and modular counting in one s4d layer (a = exp(2 pi i / m)).
"""
from __future__ import annotations

import math
import re

import jax
import numpy as np

from ssm_bench import analytic
from ssm_bench.config import ModelConfig
from tasks import groups
from tasks import registry


def characters(g: groups.Group) -> tuple[np.ndarray, int]:
  """Homomorphisms c_j: G -> Z_e (e = exponent) that together separate the elements.

  Returns (chars (k, order) ints, e). Only for Abelian groups.
  """
  t, n = g.table, g.order
  gens = [int(x) for x in g.generating_set]
  orders = []
  for x in gens:
    k, y = 1, x
    while y != 0:
      y, k = t[y, x], k + 1
    orders.append(k)
  e = math.lcm(*orders) if orders else 1

  # The generators' spanning tree from the identity, once: uses[y, j] counts generator j on
  # y's path, so a character with generator values v is uses @ v (mod e) wherever it exists,
  # and it exists where that is a homomorphism on every edge x -> x gen_j. (Walking the tree
  # per candidate in Python took 88 s for C2^12, 2049 of its 4096 candidates walked.)
  uses = np.zeros((n, len(gens)), np.int64)
  reached = np.zeros(n, bool)
  reached[0], frontier = True, [0]
  while frontier:
    nxt = []
    for x in frontier:
      for j, gen in enumerate(gens):
        y = t[x, gen]
        if not reached[y]:
          reached[y] = True
          uses[y] = uses[x]
          uses[y, j] += 1
          nxt.append(y)
    frontier = nxt
  edges = t[:, gens] if gens else np.zeros((n, 0), np.int64)

  def extend(values):  # a character from generator values, or None if inconsistent
    values = np.asarray(values, np.int64)
    chi = uses @ values % e
    if np.any((chi[edges] - chi[:, None] - values) % e):
      return None
    return chi

  chosen, seen = [], None
  for combo in np.ndindex(*orders):
    chi = extend([c * (e // o) for c, o in zip(combo, orders)])
    if chi is None:
      continue
    keys = chi if seen is None else seen * e + chi
    if seen is None or np.unique(keys).size > np.unique(seen).size:
      chosen.append(chi)
      seen = keys
      if np.unique(seen).size == n:
        break
  return np.array(chosen, np.int64).reshape(-1, n), e


def abelian(group_name: str, d_model: int = 0, d_state: int = 0):
  """One simple_aussm layer tracking an Abelian group."""
  g = groups.get_group(group_name)
  if not g.is_abelian:
    raise analytic.NoConstruction(f"{group_name} is not Abelian")
  chars, e = characters(g)
  k = max(1, chars.shape[0])
  n = max(d_state, k)
  feats = 1 + k  # channel 0 unused, 1..k carry the input angles, then 4 readout features each
  cfg = ModelConfig(layers=("simple_aussm",), vocab_size=g.order, num_classes=g.order,
                    d_model=max(d_model, feats + 4 * k), d_state=n, norm="none",
                    activation="relu", initial_state="ones", conv_kernel=0)
  p = analytic.zeros_like_init(cfg)["params"]
  angles = 2 * np.pi * chars / e  # (k, order)
  p["embed"]["embedding"][:, 1:1 + chars.shape[0]] = angles.T
  lay = p["layer0"]
  scale = math.sqrt(n)  # h0 = 1 / sqrt(n) per coordinate
  for j in range(chars.shape[0]):
    lay["theta"]["kernel"][1 + j, j] = 1.0
    base = feats + 4 * j
    for off, (part, sign) in enumerate([(0, 1), (0, -1), (1, 1), (1, -1)]):
      lay["readout"]["kernel"][part * n + j, base + off] = sign * scale
      p["out0"]["kernel"][base + off, base + off] = 1.0
      p["head_hidden"]["kernel"][base + off, base + off] = 1.0
    for off, coef in enumerate([np.cos(angles[j]), -np.cos(angles[j]),
                                np.sin(angles[j]), -np.sin(angles[j])]):
      p["head_out"]["kernel"][base + off, :] = coef
  return cfg, analytic.finish({"params": p})


def parity(d_model: int = 0, d_state: int = 4):
  """negmamba: Delta saturates so a(0) = 1 and a(1) = -1 exactly in float32; B = 0."""
  n = d_state
  cfg = ModelConfig(layers=("negmamba",), vocab_size=2, num_classes=2, d_model=max(d_model, 4),
                    d_state=n, norm="none", activation="relu", initial_state="ones",
                    conv_kernel=0)
  p = analytic.zeros_like_init(cfg)["params"]
  d = cfg.d_model
  p["embed"]["embedding"][:, 0] = 1.0  # constant channel
  p["embed"]["embedding"][1, 1] = 1.0  # the bit
  lay = p["layer0"]
  lay["in_u"]["kernel"][:] = np.eye(d)
  lay["in_z"]["kernel"][0, :] = 20.0  # gate silu(20): a positive constant
  lay["dt_down"]["kernel"][1, 0] = 1.0
  lay["dt_up"]["kernel"][0, :] = 300.0
  lay["dt_up"]["bias"][:] = -100.0  # Delta = softplus(-100) ~ 0 or softplus(200) = 200
  lay["C"]["kernel"][0, :] = 1.0 / math.sqrt(n)  # C . h = +-1
  lay["D"][0] = 1.0  # channel 0: sign + 1 in {2, 0}
  p["out0"]["kernel"][0, 2] = 1.0
  p["head_hidden"]["kernel"][2, 2] = 1.0
  gate = float(jax.nn.silu(20.0))
  p["head_out"]["kernel"][2, 0] = 1.0
  p["head_out"]["bias"][1] = gate  # even: 2 gate > gate; odd: 0 < gate
  return cfg, analytic.finish({"params": p})


def deltanet_parity(d_model: int = 0, d_state: int = 2):
  """DeltaNet with beta = 2 on the bit 1 and 0 on the bit 0, key e_0: the token's transition is
  the reflection I - 2 e_0 e_0^T or I, so row 0 of the state is (-1)^(count) h0 (Grazzi et al.)."""
  cfg = ModelConfig(layers=("deltanet",), vocab_size=2, num_classes=2, d_model=max(d_model, 4),
                    d_state=max(d_state, 1), norm="none", activation="relu",
                    initial_state="ones", conv_kernel=0)
  p = analytic.zeros_like_init(cfg)["params"]
  m = cfg.d_model  # one head: the value width
  p["embed"]["embedding"][:, 0] = 1.0  # constant channel
  p["embed"]["embedding"][1, 1] = 1.0  # the bit
  lay = p["layer0"]
  lay["k"]["bias"][0] = 1.0  # k = e_0 whatever the token
  lay["q"]["bias"][0] = 1.0  # read row 0 of the state
  lay["beta"]["kernel"][1, 0] = 200.0  # bit 1: sigmoid(100) = 1 exactly; bit 0: ~4e-44
  lay["beta"]["bias"][0] = -100.0
  lay["o"]["kernel"][0, 2] = math.sqrt(m)  # channel 2: (-1)^count, h0 rows are 1 / sqrt(m)
  p["out0"]["kernel"][2, 2] = 1.0  # relu: 1 when even, 0 when odd
  p["head_hidden"]["kernel"][2, 2] = 1.0
  p["head_out"]["kernel"][2, 0] = 1.0
  p["head_out"]["bias"][1] = 0.5
  return cfg, analytic.finish({"params": p})


def modcount(m: int, d_model: int = 0, d_state: int = 4):
  """s4d with Lambda = i 2 pi / m, Delta = 1: a constant rotation counts the positions."""
  n = d_state
  cfg = ModelConfig(layers=("s4d",), vocab_size=2, num_classes=m, d_model=max(d_model, 5),
                    d_state=n, norm="none", activation="relu", initial_state="ones",
                    conv_kernel=0)
  p = analytic.zeros_like_init(cfg)["params"]
  lay = p["layer0"]
  lay["lambda_log_neg_re"][:] = -200.0  # exp(-200) underflows: Re Lambda = 0 exactly
  lay["lambda_im"][:] = 2 * np.pi / m
  root_n = math.sqrt(n) / 2  # y = 2 Re(C h), h0 = 1 / sqrt(n)
  for c, (real, imag) in zip(range(1, 5), [(1, 0), (-1, 0), (0, -1), (0, 1)]):
    lay["C_re"][c, 0], lay["C_im"][c, 0] = real * root_n, imag * root_n
    p["out0"]["kernel"][c, c] = 1.0
    p["head_hidden"]["kernel"][c, c] = 1.0
  ang = 2 * np.pi * np.arange(m) / m
  head = p["head_out"]["kernel"]
  head[1], head[2], head[3], head[4] = np.cos(ang), -np.cos(ang), np.sin(ang), -np.sin(ang)
  return cfg, analytic.finish({"params": p})


def _abelian_group(task_name: str) -> bool:
  try:
    return groups.get_group(task_name).is_abelian
  except groups.GroupError:
    return False


ABELIAN = analytic.Construction(
    "any Abelian group in one layer: a rotation per character (paper 000, Theorem 4.1)",
    _abelian_group, lambda task, dm, ds: abelian(task, dm, ds))
PARITY = analytic.Construction(
    "parity in one layer: a(1) = -1, a(0) = 1", lambda task: task == "parity",
    lambda task, dm, ds: parity(dm, max(ds, 4)))
PARITY_DELTANET = analytic.Construction(
    "parity in one layer: a reflection I - 2 k k^T on the bit 1 (beta = 2; Grazzi et al. 2025)",
    lambda task: task == "parity", lambda task, dm, ds: deltanet_parity(dm, ds))
MODCOUNT = analytic.Construction(
    "modcount<m> in one layer: a = exp(2 pi i / m)",
    lambda task: re.fullmatch(r"modcount\d+", task) is not None,
    lambda task, dm, ds: modcount(registry.get_task(task).num_classes, dm, max(ds, 4)))
