"""The fewest reflections per token that hold a faithful copy of a group (ssm_bench/reflections):
known values, and each witness checked as matrices (a faithful homomorphism whose elements are
products of that many reflections: the keys reflection_keys finds, multiplied back here)."""
import numpy as np
import pytest

from ssm_bench import reflections
from tasks import groups

# By hand: a sign (C2); a turn in a plane (cyclic); the square's and the triangle's symmetries in
# the plane (D4, S3); the rotations of the tetrahedron, cube and icosahedron (A4, S4, A5); Q8's
# only faithful real irreducible is 4-dimensional with -1 acting as -I; an Abelian group that is
# not cyclic needs one block per invariant factor, and a sign plus a turn moving together cost 3;
# S5 has no faithful representation below its 4-dimensional standard one (a 5-cycle moves 4).
KNOWN = {"C2": 1, "C3": 2, "C6": 2, "C24": 2, "C60": 2, "C2xC2": 2, "C2xC4": 3, "C2xC30": 3,
         "C2xC2xC2": 3, "D4": 2, "S3": 2, "Q8": 4, "A4": 2, "S4": 2, "A5": 2, "S5": 4}


# The fewest dimensions of a faithful orthogonal representation reaching that length (a sign,
# a plane, two signs, the solids in space, Q8's 4-dimensional irreducible, S5's standard one).
WIDTH = {"C2": 1, "C3": 2, "C6": 2, "C2xC2": 2, "D4": 2, "S3": 2, "A4": 3, "S4": 3, "A5": 3,
         "Q8": 4, "S5": 4}


@pytest.mark.parametrize("name", sorted(WIDTH))
def test_reflection_length_within_a_width_needs_the_representation_to_fit(name):
  g, width = groups.get_group(name), WIDTH[name]
  assert reflections.reflection_length(g, width) == KNOWN[name], (
      f"{name}: {width} dimensions hold a faithful representation of {KNOWN[name]} reflections")
  assert reflections.reflection_length(g, width - 1) is None, (
      f"{name}: a faithful representation found in {width - 1} dimensions")
  n_h, irreps = reflections.witness(g, width)
  assert sum(r.dim for r in irreps) <= width, f"{name}: the witness is wider than {width}"
  assert reflections.reflection_width(g) == width, f"{name}: the key width it needs"


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_reflection_length_matches_the_hand_derived_value(name):
  assert reflections.reflection_length(groups.get_group(name)) == KNOWN[name], (
      f"{name}: the least reflections per element of a faithful orthogonal representation")


@pytest.mark.parametrize("name", ["C6", "D4", "Q8", "A4", "S4", "A5", "C2xC30"])
def test_the_witness_is_a_faithful_representation_of_that_many_reflections(name):
  g = groups.get_group(name)
  n_h, irreps = reflections.witness(g)
  rho = reflections.representation(g, irreps)
  d = rho.shape[1]
  t = g.table
  for a in range(g.order):
    for b in range(g.order):
      np.testing.assert_allclose(rho[t[a, b]], rho[a] @ rho[b], atol=1e-9,
                                 err_msg=f"{name}: not a homomorphism at {a}, {b}")
  assert all(np.abs(rho[a] - np.eye(d)).max() > 1e-6 for a in range(1, g.order)), (
      f"{name}: an element other than the identity acts as the identity (not faithful)")
  for a in range(g.order):
    keys = reflections.reflection_keys(rho[a])  # what the DeltaProduct construction writes
    assert len(keys) <= n_h, f"{name}: element {a} needs {len(keys)} reflections, more than {n_h}"
    rebuilt = np.eye(d)
    for k in keys:  # rho(a) = H_1 H_2 ... H_r, each H = I - 2 k k^T with a unit key
      np.testing.assert_allclose(np.linalg.norm(k), 1.0, atol=1e-12)
      rebuilt = rebuilt @ (np.eye(d) - 2 * np.outer(k, k))
    np.testing.assert_allclose(rebuilt, rho[a], atol=1e-9,
                               err_msg=f"{name}: element {a} is not the product of its reflections")


def test_real_irreducibles_fill_the_regular_representation_once_per_type():
  # S3: trivial, sign (1-dim) and the plane (2-dim, twice): 1 + 1 + 2 * 2 = 6
  dims = [r.dim for r in reflections.real_irreps(groups.get_group("S3"))]
  assert dims == [1, 1, 2], dims
  # C3: the trivial one and one rotation plane (the two complex characters are one real irrep)
  assert [r.dim for r in reflections.real_irreps(groups.get_group("C3"))] == [1, 2]


def test_the_witness_is_refused_above_max_order_rather_than_searched():
  with pytest.raises(ValueError, match="above order 720"):
    reflections.witness("A7")
