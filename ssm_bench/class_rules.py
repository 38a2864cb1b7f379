"""The built-in transition classes' rules, which `theory` registers: the subgroup steps (group,
subgroup indices, parameter) -> the next subgroup, the membership checks (transitions, tol,
parameter) -> (belongs, detail) and the predict rules (group, depth, parameter, width) -> verdict.
A plugin's class passes its own to `theory.register_class`."""
from __future__ import annotations

import numpy as np

from ssm_bench import reflections


def commutator(g, h, _):
  return g.commutator_subgroup(h)


def elementary2(g, h, _):
  return g.elementary2_subgroup(h)


def stalls(g, h, _):
  return h


def trivial(g, h, _):
  return h[:1]  # the trivial subgroup {0}


def _real(a, tol):
  a = np.asarray(a)
  if np.iscomplexobj(a) and np.max(np.abs(a.imag), initial=0.0) > tol:
    return None, f"complex (max |Im a| = {np.max(np.abs(a.imag)):.3g})"
  return np.real(a), ""


def in_range(low, high):
  def contains(a, tol, _):
    r, why = _real(a, tol)
    if r is None:
      return False, why
    lo, hi = float(r.min(initial=np.inf)), float(r.max(initial=-np.inf))
    ok = lo >= low - tol and hi <= high + tol
    return ok, f"a in [{lo:.4g}, {hi:.4g}]" + ("" if ok else f", outside [{low:g}, {high:g}]")
  return contains


def unit_modulus(a, tol, _):
  m = np.abs(np.asarray(a))
  dev = float(np.max(np.abs(m - 1.0), initial=0.0))
  # a layer that also decays has the same theorem under the wider class
  return dev <= tol, f"max ||a| - 1| = {dev:.3g}" + (
      "" if dev <= tol else "; complex_diagonal takes any modulus")


def finite(a, tol, _):
  """Any complex diagonal: every finite value is some input's transition in the class."""
  m = np.abs(np.asarray(a))
  if not np.all(np.isfinite(m)):
    return False, "non-finite transitions"
  return True, f"|a| in [{float(m.min(initial=np.inf)):.4g}, {float(m.max(initial=0.0)):.4g}]"


def constant_in_time(a, tol, _):
  a = np.asarray(a)
  if a.ndim < 3:  # (d, n) or less: no batch or time axis, the same at every step
    return True, "no time axis"
  dev = float(np.max(np.abs(a - a[:1, :1]), initial=0.0))
  return dev <= tol, f"max change over batch and time {dev:.3g}"


def norm_at_most_one(a, tol, _):
  """Products of generalized Householder matrices with unit keys and beta in [0, 2] have
  spectral norm <= 1 (each factor does); a is (..., n, n)."""
  a = np.asarray(a)
  top = float(np.max(np.linalg.norm(a.reshape((-1,) + a.shape[-2:]), ord=2, axis=(-2, -1)),
                     initial=0.0))
  return top <= 1 + tol, f"max spectral norm {top:.4g}" + ("" if top <= 1 + tol else " > 1")


def householder_predict(g, depth, n_h, width=None):
  """The keys live in `width` dimensions (DeltaNet/DeltaProduct's N: d_state): the
  representation must fit there. None (a caller that does not say) assumes keys wide enough."""
  length = reflections.reflection_length(g, width)
  if length is not None and length <= (n_h or 1):
    return True
  # two layers of one reflection per token track the groups faithful in the plane (cyclic and
  # dihedral): the first counts rotations mod 2, the second reflects in a frame that flips
  # with that count (ssm_bench/analytic_dihedral.py)
  plane = min(2, width or 2)
  return True if depth >= 2 and reflections.reflection_length(g, plane) is not None else None


def householder_above(g, below, n_h, width=None):
  """One layer of at least one reflection per token above a stack that tracks C2 tracks the
  groups faithful in the plane: of the two layers above, the first only counts the rotation
  tokens mod 2, which the stack below does in its place (a parity of the tokens of one kind:
  C2 with those tokens its generator; ssm_bench/analytic_dihedral.py builds it with negmamba)."""
  plane = min(2, width or 2)
  return True if (reflections.reflection_length(g, plane) is not None
                  and below("C2") is True) else None


def tc0_predict(g, depth, _, width=None):
  return None if g.is_solvable else False
