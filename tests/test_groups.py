"""Group axioms for every family and the theory values the papers rely on."""
import numpy as np
import pytest

from tasks import groups

NAMED = ["C1", "C2", "C3", "C6", "C24", "C60", "Z5", "S1", "S2", "S3", "S4", "S5", "A3", "A4",
         "A5", "D1", "D3", "D4", "D6", "Q8", "C2xC4", "C2xC30", "C2xC2xC2", "A4xC5", "S3xQ8"]


@pytest.mark.parametrize("name", NAMED)
def test_group_axioms_hold(name):
  g = groups.get_group(name)
  t, n = g.table, g.order
  assert t.dtype == np.int32 and t.shape == (n, n)
  # closure: every row is a permutation of the elements (Latin square)
  assert all(np.array_equal(np.sort(row), np.arange(n)) for row in t), "table is not closed"
  assert all(np.array_equal(np.sort(col), np.arange(n)) for col in t.T), "table is not a Latin square"
  assert np.array_equal(t[0], np.arange(n)) and np.array_equal(t[:, 0], np.arange(n)), "0 is not the identity"
  a, b, c = np.meshgrid(np.arange(n), np.arange(n), np.arange(n), indexing="ij", sparse=True)
  assert np.array_equal(t[t[a, b], c], t[a, t[b, c]]), "not associative"
  inv = g.inverse
  assert np.all(t[np.arange(n), inv] == 0) and np.all(t[inv, np.arange(n)] == 0), "inverse fails"


@pytest.mark.parametrize("name,order", [("C7", 7), ("S4", 24), ("A5", 60), ("D5", 10), ("Q8", 8),
                                        ("A4xC5", 60), ("C2xC30", 60), ("S6", 720)])
def test_orders(name, order):
  assert groups.get_group(name).order == order


@pytest.mark.parametrize("name,length", [("C2", 1), ("C6", 1), ("C60", 1), ("C2xC4", 1),
                                         ("S3", 2), ("A4", 2), ("D4", 2), ("Q8", 2), ("S4", 3),
                                         ("A5", None), ("S5", None), ("C1", 0)])
def test_derived_length(name, length):
  g = groups.get_group(name)
  assert g.derived_length == length, f"{name}: derived length {g.derived_length}, expected {length}"
  assert g.is_solvable == (length is not None)


@pytest.mark.parametrize("name,length", [("C2", 1), ("C2xC2", 1), ("C2xC2xC2", 1), ("C2xC4", 2),
                                         ("D4", 2), ("Q8", 2), ("C4", 2), ("C8", 3), ("C3", None),
                                         ("S3", None), ("C6", None), ("A4", None)])
def test_elementary2_length(name, length):
  got = groups.get_group(name).elementary2_length
  assert got == length, f"{name}: elementary-2 series length {got}, expected {length}"


@pytest.mark.parametrize("name,m,order", [
    ("C4", 2, 2), ("C4", 4, 1), ("C6", 4, 3), ("C6", 3, 2), ("C6", 6, 1), ("S3", 6, 3),
    ("A4", 6, 4), ("S4", 6, 12), ("D4", 4, 2), ("A5", 12, 60), ("C2xC2", 2, 1)])
def test_power_commutator_subgroup_is_the_smallest_with_a_quotient_of_exponent_m(name, m, order):
  """H^m [H, H]: the quotient is Abelian with every element's m-th power trivial."""
  g = groups.get_group(name)
  whole = np.arange(g.order)
  got = g.power_commutator_subgroup(whole, m)
  assert got.size == order, f"{name}: G^{m} [G, G] has order {got.size}, want {order}"
  if m == 2:
    np.testing.assert_array_equal(got, g.elementary2_subgroup(whole))


@pytest.mark.parametrize("name,abelian", [("C60", True), ("C2xC30", True), ("S3", False),
                                          ("Q8", False), ("D2", True)])
def test_abelian(name, abelian):
  assert groups.get_group(name).is_abelian == abelian


def test_z_is_an_alias_of_c():
  """Same table, and the name as given: a run of task Z6 and its tables say Z6."""
  assert np.array_equal(groups.get_group("Z6").table, groups.get_group("C6").table)
  assert groups.get_group("Z6").name == "Z6" and groups.get_group("C2xZ3").name == "C2xZ3"


@pytest.mark.parametrize("name", ["banana", "", "C0", "S0", "X3", "C2x", "xC2", "C-1", "q8", "C2*C3"])
def test_bad_names_state_the_grammar(name):
  with pytest.raises(groups.GroupError, match="C<n>"):
    groups.get_group(name)


@pytest.mark.parametrize("name", ["S9", "S12", "A10", "C10000", "S7xC2", "D1300xC2"])
def test_too_large_groups_are_refused_with_the_reason(name):
  with pytest.raises(groups.GroupError, match="too large"):
    groups.get_group(name)


def test_a_group_of_the_largest_order_is_built():
  """The limit is inclusive: S7 (5040, README's 'up to order 5040') is a task; C5041 is not."""
  assert groups.get_group(f"C{groups.MAX_ORDER}").order == groups.MAX_ORDER == 5040
  with pytest.raises(groups.GroupError, match="too large"):
    groups.get_group(f"C{groups.MAX_ORDER + 1}")


def test_a_product_at_the_largest_order_is_built_whatever_its_families():
  """The order a name promises is checked before the table is built: A7 x C2 (2520 x 2) is at
  the limit and is a task (an A_n promises n!/2, a D_n 2n: D1300 x C2 is 5200, refused)."""
  assert groups.get_group("A7xC2").order == groups.MAX_ORDER


def test_a_groups_theory_record_holds_what_its_properties_say():
  """launch.info --group prints this record: Q8 is a non-Abelian 2-group of derived and
  elementary-2 length 2."""
  assert groups.get_group("Q8").theory() == {
      "name": "Q8", "order": 8, "abelian": False, "solvable": True, "derived_length": 2,
      "elementary2_length": 2}


@pytest.mark.parametrize("name,size", [("S3", 2), ("A5", 2), ("S4", 2), ("C2xC4", 2),
                                       ("Q8", 2), ("C2xC2xC2", 3), ("A4xC5", 2)])
def test_generating_set_generates_with_few_elements(name, size):
  """The -gen tasks' stream: a generating set as small as the group allows here (greedy, each
  pick enlarging the span most; the first elements in index order give A5 three)."""
  g = groups.get_group(name)
  assert g.generate(g.generating_set).size == g.order
  assert len(g.generating_set) == size, (name, g.generating_set.tolist())


def test_a_permutation_product_applies_the_left_factor_first():
  """a . b = apply a, then b (so a stream's running product reads left to right as a sequence
  of moves); S3's elements are the permutations of 0..2 in itertools order."""
  import itertools
  perms = list(itertools.permutations(range(3)))
  t = groups.get_group("S3").table
  for i, a in enumerate(perms):
    for j, b in enumerate(perms):
      assert perms[t[i, j]] == tuple(b[a[k]] for k in range(3)), (a, b, perms[t[i, j]])


@pytest.mark.parametrize("name", ["S3", "A4", "S4", "Q8", "D6", "A5", "S3xQ8", "A4xC5"])
def test_commutator_subgroup_from_generators_is_the_one_from_every_pair(name):
  """[H, H] from H's few generators against every [a, b] of H, on G and on subgroups drawn at
  random: the shortcut must give the subgroup the definition does."""
  g = groups.get_group(name)
  t, inv = g.table, g.inverse
  rng = np.random.default_rng(0)
  subgroups = [np.arange(g.order)] + [g.generate(rng.integers(0, g.order, size=k))
                                      for k in (1, 2, 2, 3)]
  for h in subgroups:
    np.testing.assert_array_equal(g.generate(g.generators_of(h)), h,
                                  err_msg=f"{name}: generators_of does not generate H")
    a, b = h[:, None], h[None, :]
    every_pair = g.generate(np.unique(t[t[t[a, b], inv[a]], inv[b]]))
    np.testing.assert_array_equal(
        g.commutator_subgroup(h), every_pair,
        err_msg=f"{name}: [H, H] of a subgroup of order {h.size} differs from every pair's")
