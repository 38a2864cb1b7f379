"""What the papers say a stack can express, computed from the group's own subgroup series.

Each layer family maps a subgroup G_i to the smallest normal subgroup G_{i+1} whose quotient it
can track at finite precision; a stack expresses G iff the series reaches the trivial group:
- aussm, simple_aussm (diagonal complex, unit modulus: DCD): Abelian quotients, G' = [G, G]
  (paper 000, Theorems 4.1-4.2), so the minimal depth is the derived length;
- negmamba (diagonal, eigenvalues in (-1, 1)): elementary Abelian 2-group quotients,
  G^2 [G, G] (Grazzi et al.; paper 000 Sec. 7), so only 2-groups, at the elementary-2 length;
- mamba, s4d (non-negative or input-independent diagonal): no progress on a non-trivial group;
- rnn, ids4 (non-linear or dense input-dependent): track any finite group in one layer.
"""
from __future__ import annotations

import numpy as np

from tasks import groups

DCD = ("aussm", "simple_aussm")
SIGNED = ("negmamba",)
NONE = ("mamba", "s4d")
UNIVERSAL = ("rnn", "ids4")
FAMILIES = DCD + SIGNED + NONE + UNIVERSAL


def _step(g: groups.Group, family: str, h: np.ndarray) -> np.ndarray:
  if family in DCD:
    return g.commutator_subgroup(h)
  if family in SIGNED:
    return g.elementary2_subgroup(h)
  if family in NONE:
    return h
  if family in UNIVERSAL:
    return h[:1]  # the trivial subgroup {0}
  raise ValueError(f"no theory for layer family {family!r}; known: {', '.join(FAMILIES)}")


def expressible(layers, group) -> bool:
  """Can this stack (a list of layer names, first = bottom) track the group at finite precision?"""
  g = groups.get_group(group) if isinstance(group, str) else group
  h = np.arange(g.order)
  for family in layers:
    h = _step(g, family, h)
  return h.size == 1


def min_depth(family: str, group, max_depth: int = 16):
  """Smallest depth of a homogeneous stack of `family` that tracks the group; None if never."""
  g = groups.get_group(group) if isinstance(group, str) else group
  h = np.arange(g.order)
  for depth in range(0, max_depth + 1):
    if h.size == 1:
      return depth
    nxt = _step(g, family, h)
    if nxt.size == h.size:
      return None
    h = nxt
  return None


def prediction(model: str, depth: int, group) -> dict:
  """For tables: the stack's layers, whether it can express the group, and the family minimum."""
  layers = model.split(",") if "," in model else [model] * depth
  families = sorted(set(layers))
  return {"expressible": expressible(layers, group),
          "min_depth": min_depth(families[0], group) if len(families) == 1 else None}
