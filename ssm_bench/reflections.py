"""How many Householder reflections one token of a group needs: the least n_h with which a
product-of-Householders layer (DeltaNet, DeltaProduct) holds a faithful copy of the group.

An orthogonal matrix g is a product of rank(I - g) reflections and of no fewer (Cartan-Dieudonne),
so one layer whose token transition is a product of n_h generalized Householder matrices (beta = 2
a reflection, beta = 0 the identity) can hold a faithful orthogonal representation rho of G exactly
when every element has rank(I - rho(g)) <= n_h. The permutation case (m - 1 transpositions on m
points; Grazzi et al. 2025) is one such rho; rotations can need far fewer (S4 as the cube's and A5
as the icosahedron's rotations: two reflections each).

`reflection_length(G)` is the least such n_h over all faithful real representations. A
representation is a sum of real irreducibles, rank(I - rho(g)) adds over the summands, a repeated
summand adds rank and no faithfulness, so the search runs over sets of distinct real irreducibles.
They come from the regular representation: the eigenspaces of a random symmetric matrix that
commutes with it are single real irreducibles (for each type, real, complex or quaternionic, a
generic Hermitian element of the commutant has simple eigenvalues over its division algebra).
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from tasks import groups


@dataclasses.dataclass(frozen=True)
class RealIrrep:
  character: tuple  # chi(g) for each element index, rounded
  dim: int
  ranks: tuple  # rank(I - rho(g)) for each element
  basis: np.ndarray  # (order, dim): an orthonormal basis of one copy in the regular rep


def _regular(g) -> np.ndarray:
  """perm[x, h] = x h: R(x) sends basis vector h to x h."""
  return np.asarray(g.table)


def real_irreps(g) -> list[RealIrrep]:
  """The distinct real irreducible representations of g (trivial first)."""
  return list(_real_irreps(g.name))


@functools.lru_cache(maxsize=None)
def _real_irreps(name: str) -> tuple:
  g = groups.get_group(name)
  n, perm = g.order, _regular(g)
  back = np.argsort(perm, axis=1)  # back[g, gh] = h: R(g)^T e_{gh} = e_h
  x = np.random.default_rng(0).standard_normal((n, n))
  x = x + x.T
  m = np.zeros((n, n))
  for q in back:  # sum_g R(g) X R(g)^T commutes with every R(g)
    m += x[np.ix_(q, q)]
  vals, vecs = np.linalg.eigh(m)
  scale = max(1.0, float(np.max(np.abs(vals))))
  cuts = np.flatnonzero(np.diff(vals) > 1e-7 * scale) + 1
  found = {}
  for idx in np.split(np.arange(n), cuts):
    q = vecs[:, idx]
    # tr(Q^T R(g) Q) = sum_h (Q Q^T)[g^-1 h, h], for every g at once
    chi = np.take_along_axis(q @ q.T, back, 0).sum(1)
    norm = float(np.dot(chi, chi)) / n  # 1, 2 or 4 for a real irreducible
    if min(abs(norm - k) for k in (1, 2, 4)) > 1e-4:
      raise ArithmeticError(f"{name}: an eigenspace of dimension {len(idx)} is not a single "
                            f"real irreducible (<chi, chi> = {norm:.6f})")
    key = tuple(np.round(chi, 6) + 0.0)
    if key not in found:
      found[key] = RealIrrep(key, len(idx), _ranks(g, chi, len(idx)), q)
  total = sum(r.dim ** 2 / (np.dot(r.character, r.character) / n) for r in found.values())
  if abs(total - n) > 1e-4:  # each real irreducible W occurs dim W / <chi, chi> times
    raise ArithmeticError(f"{name}: the real irreducibles found fill {total:.3f} of {n} "
                          "dimensions")
  return tuple(sorted(found.values(), key=lambda r: (r.dim, r.character[::-1])))


def _ranks(g, chi, dim) -> tuple:
  """rank(I - rho(g)) = dim - dim Fix(g), with dim Fix(g) the mean of chi over <g>."""
  fixed = _cyclic_means(g.name) @ np.asarray(chi, float)
  return tuple(int(dim - round(float(f))) for f in fixed)


@functools.lru_cache(maxsize=None)
def _cyclic_means(name: str) -> np.ndarray:
  """(order, order): row x averages over the cyclic subgroup <x>. Once per group, not per
  irreducible: walking the powers per irreducible took C720's card 42 s (360 irreducibles)."""
  g = groups.get_group(name)
  out = np.zeros((g.order, g.order))
  for x in range(g.order):
    powers, y = [0], x
    while y != 0:
      powers.append(y)
      y = int(g.table[y, x])
    out[x, powers] = 1.0 / len(powers)
  return out


# The regular representation of a larger group is too big to decompose in a moment (S7: a
# 5040 x 5040 eigenproblem); above this order the length is not computed.
MAX_ORDER = 720


def reflection_length(g, max_dim: int | None = None) -> int | None:
  """The least n_h such that some faithful real orthogonal representation of g, of dimension at
  most max_dim (None: any), has every element a product of at most n_h reflections (0 for the
  trivial group); None above MAX_ORDER or when no faithful representation fits in max_dim."""
  g = groups.get_group(g) if isinstance(g, str) else g
  return witness(g, max_dim)[0] if g.order <= MAX_ORDER else None


def reflection_width(g) -> int | None:
  """The fewest dimensions of a faithful orthogonal representation that reaches
  reflection_length(g): the key width a householder layer needs (None above MAX_ORDER)."""
  g = groups.get_group(g) if isinstance(g, str) else g
  length = reflection_length(g)
  if length is None:
    return None
  # no representation gets below `length`, so a width fits exactly when one reaches it there
  # (searching every bound again for each width took S4xC30's 6.4 s)
  return next(d for d in range(g.order + 1) if _search(g.name, length, d) is not None)


def witness(g, max_dim: int | None = None) -> tuple[int | None, list[RealIrrep]]:
  """(reflection_length(g, max_dim), the distinct real irreducibles of one representation
  reaching it); (None, []) when no faithful representation has dimension <= max_dim."""
  g = groups.get_group(g) if isinstance(g, str) else g
  if g.order > MAX_ORDER:  # not a moment's work: refused, as reflection_length returns None
    raise ValueError(f"{g.name}: the reflection length is not computed above order {MAX_ORDER}")
  return _witness(g.name, max_dim)


@functools.lru_cache(maxsize=None)
def _witness(name: str, max_dim: int | None) -> tuple:
  g = groups.get_group(name)
  if g.order == 1:
    return 0, []
  # rank(I - rho(g)) <= dim rho: bounds past max_dim find nothing new (S4xC30 has no faithful
  # plane; trying all 719 bounds for one took 4.6 s)
  for bound in range(1, g.order if max_dim is None else min(g.order, max_dim + 1)):
    found = _search(name, bound, max_dim)
    if found is not None:
      return bound, found
  if max_dim is not None:
    return None, []  # every faithful representation is wider than max_dim
  raise ArithmeticError(f"{name}: no faithful representation found")  # the regular one is


@functools.lru_cache(maxsize=None)
def _candidates(name: str) -> tuple:
  """(irreducibles, their kernels as bitmasks over the elements, their ranks as arrays): what
  every search of the group reads, built once."""
  irreps = [r for r in _real_irreps(name) if any(r.ranks)]  # the trivial one never helps
  kernels = [sum(1 << x for x, k in enumerate(r.ranks) if k == 0) for r in irreps]
  return irreps, kernels, [np.array(r.ranks) for r in irreps]


def _search(name: str, bound: int, max_dim: int | None) -> list[RealIrrep] | None:
  """The first set of distinct real irreducibles (in their order) whose sum is faithful, has
  every element's rank(I - rho(g)) <= bound and dimension <= max_dim; None if there is none."""
  g = groups.get_group(name)
  irreps, kernels, ranks = _candidates(name)
  room = sum(r.dim for r in irreps) if max_dim is None else max_dim

  def search(start, used, total, dim, kernel):
    if kernel == 1:  # only the identity acts trivially: faithful
      return used
    for i in range(start, len(irreps)):
      # adding an irreducible that does not shrink the kernel only adds rank and dimension
      if kernel & kernels[i] == kernel or dim + irreps[i].dim > room:
        continue
      t = total + ranks[i]
      if t.max() <= bound:
        found = search(i + 1, used + [i], t, dim + irreps[i].dim, kernel & kernels[i])
        if found is not None:
          return found
    return None

  found = search(0, [], np.zeros(g.order, int), 0, (1 << g.order) - 1)
  return None if found is None else [irreps[i] for i in found]


def representation(g, irreps) -> np.ndarray:
  """(order, d, d): the orthogonal matrices of the sum of `irreps` (each restricted from the
  regular representation), for checking a witness."""
  g = groups.get_group(g) if isinstance(g, str) else g
  blocks = []
  for r in irreps:
    q = r.basis
    blocks.append(np.stack([q.T @ q[np.argsort(p)] for p in _regular(g)]))
  d = sum(b.shape[1] for b in blocks)
  out = np.zeros((g.order, d, d))
  at = 0
  for b in blocks:
    k = b.shape[1]
    out[:, at:at + k, at:at + k] = b
    at += k
  return out


def reflection_keys(m: np.ndarray, tol: float = 1e-9) -> list[np.ndarray]:
  """Unit keys k_1..k_r, r = rank(I - m), with m = H_1 H_2 ... H_r, H_i = I - 2 k_i k_i^T, for
  an orthogonal m (Cartan-Dieudonne, constructively: each reflection sends a moved direction
  back to itself and keeps everything already fixed, which is orthogonal to its key)."""
  d = m.shape[0]
  keys, rest = [], np.array(m, float)
  for _ in range(d + 1):
    moved = np.linalg.norm(rest - np.eye(d), axis=0)
    if moved.max() < tol:
      return keys
    j = int(np.argmax(moved))
    k = rest[:, j] - np.eye(d)[:, j]
    k /= np.linalg.norm(k)
    keys.append(k)
    rest = (np.eye(d) - 2 * np.outer(k, k)) @ rest
  raise ArithmeticError("not an orthogonal matrix")
