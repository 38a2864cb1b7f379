"""The built-in transition classes, each with its theorem and its membership check: they register
through `theory.register_class`, the call a plugin's own class uses (examples/clock.py), as the
built-in layers register through `registry.register_layer` (layers/builtin.py). `theory` imports
this module at its end, so the classes are there wherever `theory` is.
"""
from __future__ import annotations

from ssm_bench import class_rules as rules
from ssm_bench.theory import TransitionClass, register_class

for _c in (
    TransitionClass(
        "time_invariant", "the same transition at every step (input-independent), any diagonal",
        "a time-invariant SSM tracks no non-trivial group (paper 000 Sec. 6; Sarrof et al. "
        "2024, paper 003)", rules.stalls, rules.constant_in_time),
    TransitionClass(
        "nonnegative_diagonal", "input-dependent real diagonal with eigenvalues in [0, 1]",
        "non-negative diagonal SSMs cannot track parity, hence no non-trivial group at any "
        "depth (Sarrof et al. 2024, paper 003; Grazzi et al. 2025)", rules.stalls,
        rules.in_range(0.0, 1.0)),
    TransitionClass(
        "signed_diagonal", "input-dependent real diagonal with eigenvalues in [-1, 1]",
        "each layer removes an elementary Abelian 2-group quotient: G -> G^2 [G, G] (Grazzi et "
        "al. 2025, Theorem 2; paper 000 Sec. 7), so only 2-groups, at their elementary-2 length",
        rules.elementary2, rules.in_range(-1.0, 1.0),
        includes=(("nonnegative_diagonal", "eigenvalues in [0, 1] are in [-1, 1]"),)),
    TransitionClass(
        "unit_modulus_diagonal", "input-dependent complex diagonal on the unit circle (DCD)",
        "one layer tracks exactly the Abelian groups, k layers the groups with a subnormal "
        "series of length k with Abelian factors: the minimal depth is the derived length "
        "(paper 000, Theorems 4.1-4.2)", rules.commutator, rules.unit_modulus),
    TransitionClass(
        "complex_diagonal", "input-dependent complex diagonal of any modulus (decay and phase: "
        "the paper's DCD in full)",
        "as for unit_modulus_diagonal, whatever the moduli: the paper's proofs first remove "
        "contracting, expanding and drifting coordinates (paper 000, the lemmas proved in App. "
        "C.1 and C.5), and its constructions are unit-modulus, which this class contains: the "
        "minimal depth is the derived length (paper 000, Theorems 4.1-4.2)", rules.commutator,
        rules.finite, includes=(("signed_diagonal", "real eigenvalues in [-1, 1] are complex "
                                 "ones of modulus at most 1"),
                                ("unit_modulus_diagonal", "the unit circle is one modulus"))),
    TransitionClass(
        "nonlinear_or_dense", "a non-linear or dense input-dependent state update",
        "one layer can hold any finite automaton's state, so it tracks every finite group "
        "(Merrill et al. 2024, paper 002, Sec. 5)", rules.trivial),
    TransitionClass(
        "householder", "input-dependent products of n_h generalized Householder matrices "
        "I - beta k k^T with unit keys and beta in [0, 2] (eigenvalues in [-1, 1])",
        "one layer tracks a group when some faithful orthogonal representation has every "
        "element a product of at most n_h reflections, beta = 2 (an orthogonal g is a product "
        "of rank(I - g) of them, Cartan-Dieudonne; the permutations of m points need m - 1, "
        "Grazzi et al. 2025, ICLR; Siems et al. 2025, DeltaProduct; the least such n_h over "
        "the group's real irreducibles of total dimension at most the keys' width: "
        "ssm_bench/reflections.py); a deeper stack can do what its first layer does; two layers "
        "of one reflection each track every cyclic and dihedral group (keys at least 2 wide; "
        "Siems et al. 2025, Sec. 4, for the dihedral groups; ssm_bench/analytic_dihedral.py), "
        "and so does one such layer above any stack that tracks C2, which counts the rotation "
        "tokens mod 2 in the first layer's place (built with negmamba below it); otherwise, "
        "for fewer reflections or narrower keys, no theorem", None,
        rules.norm_at_most_one, rules.householder_predict, parameter="n_h",
        above=rules.householder_above),
    TransitionClass(
        "householder_nonnegative", "products of generalized Householder matrices with beta in "
        "[0, 1] (eigenvalues in [0, 1])", "no theorem claimed here", None, rules.norm_at_most_one),
    TransitionClass(
        "tc0", "constant-depth attention (a transformer)",
        "constant-depth transformers are in TC0, so no fixed depth tracks a non-solvable group "
        "at every length unless TC0 = NC1 (Merrill et al. 2024, paper 002); solvable groups: "
        "no theorem", None, None, rules.tc0_predict),
    TransitionClass("unknown", "not declared", "no theorem", None),
):
  register_class(_c.name, _c.description, _c.theorem, step=_c.step, contains=_c.contains,
                 predict=_c.predict, parameter=_c.parameter, includes=dict(_c.includes),
                 above=_c.above, source=__name__)
