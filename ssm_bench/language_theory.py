"""What the theory says about a regular language, from its syntactic monoid.

The syntactic monoid is the transition monoid of the minimal DFA: every map states -> states
that some word induces. A language is star-free iff that monoid is aperiodic (Schutzenberger
1965): m^n = m^(n+1) for every element and some n, equivalently every subgroup is trivial.
Non-negative diagonal SSMs predictively model a regular language iff it is star-free (Sarrof et
al. 2024, paper 003). For a language that is not star-free, the maximal subgroups of its monoid
are the groups a recognizer must track; what the group theorems say about each class is reported
beside them (a necessary condition, not a construction: "no theorem" says the rest).
"""
from __future__ import annotations

import functools
import math

from ssm_bench import theory
from tasks import groups as groups_lib
from tasks import languages


def minimal_dfa(dfa):
  """(delta, start, accept) of the minimal DFA: reachable states, Moore's partition refinement."""
  order = languages.reachable(dfa)
  block = {q: int(q in dfa.accept) for q in order}
  while True:
    sig = {q: (block[q],) + tuple(block[int(t)] for t in dfa.delta[q]) for q in order}
    ids = {s: i for i, s in enumerate(sorted(set(sig.values())))}
    new = {q: ids[sig[q]] for q in order}
    if len(set(new.values())) == len(set(block.values())):
      break
    block = new
  n = len(set(block.values()))
  delta = [[0] * dfa.delta.shape[1] for _ in range(n)]
  for q in order:
    for a, t in enumerate(dfa.delta[q]):
      delta[block[q]][a] = block[int(t)]
  return delta, block[dfa.start], {block[q] for q in order if q in dfa.accept}


def transition_monoid(delta) -> list[tuple]:
  """Every transformation a word induces (the identity first), as tuples of state images."""
  n = len(delta)
  letters = [tuple(delta[q][a] for q in range(n)) for a in range(len(delta[0]))]
  identity = tuple(range(n))
  elements, frontier = {identity: None}, [identity]
  while frontier:
    nxt = []
    for m in frontier:
      for g in letters:
        p = tuple(g[m[q]] for q in range(n))  # m, then the letter
        if p not in elements:
          elements[p] = None
          nxt.append(p)
    frontier = nxt
  return list(elements)


def _compose(m, g):
  return tuple(g[m[q]] for q in range(len(m)))


def is_aperiodic(monoid) -> bool:
  for m in monoid:
    powers, p = [m], m
    while True:
      p = _compose(p, m)
      if p == powers[-1]:
        break  # m^k = m^(k+1)
      if p in powers:
        return False  # a cycle of length > 1: a non-trivial group
      powers.append(p)
  return True


def maximal_subgroups(monoid) -> list[list[tuple]]:
  """The maximal subgroup at each idempotent e (its H-class): the x with e x = x = x e that
  have an inverse y (x y = e = y x); distinct groups only, trivial ones included."""
  elems = set(monoid)
  out = []
  for e in monoid:
    if _compose(e, e) != e:
      continue
    local = [x for x in elems if _compose(e, x) == x and _compose(x, e) == x]
    group = [x for x in local if any(_compose(x, y) == e and _compose(y, x) == e for y in local)]
    out.append(sorted(group))
  return out


def group_name(group: list[tuple]) -> str:
  """A name for a small group of transformations: C<n> when cyclic, an Abelian one as the
  product of its cyclic prime-power factors (`C2xC2`: a name `tasks.groups` reads, so every
  class's theorem can be asked of it), else its order (enough to read the predictions)."""
  n = len(group)
  e = next(x for x in group if _compose(x, x) == x)
  orders = []
  for g in group:
    k, p = 1, g
    while p != e:
      p, k = _compose(p, g), k + 1
    orders.append(k)
  if n in orders:
    return f"C{n}"
  if not all(_compose(a, b) == _compose(b, a) for a in group for b in group):
    return f"order {n}, non-Abelian"
  factors = []
  for q in sorted({q for q in range(2, n + 1) if n % q == 0 and all(q % r for r in range(2, q))}):
    # c[k]: the elements of order dividing q^k; q^(ranks[k]) = c[k] / c[k - 1], where ranks[k]
    # counts the factors C_{q^j} with j >= k
    c = [1]
    while len(c) == 1 or c[-1] > c[-2]:
      c.append(sum(q ** len(c) % o == 0 for o in orders))
    ranks = [round(math.log(c[k] / c[k - 1], q)) for k in range(1, len(c))] + [0]
    factors += [q ** k for k in range(1, len(ranks)) for _ in range(ranks[k - 1] - ranks[k])]
  return "x".join(f"C{f}" for f in sorted(factors))


def _as_group(group: list[tuple]) -> groups_lib.Group:
  """A Cayley table of the subgroup (identity at index 0), for the group theorems."""
  import numpy as np
  e = next(x for x in group if _compose(x, x) == x)
  elems = [e] + [x for x in group if x != e]
  index = {x: i for i, x in enumerate(elems)}
  table = np.array([[index[_compose(a, b)] for b in elems] for a in elems], np.int32)
  return groups_lib.Group(group_name(group), table)


def describe(dfa) -> dict:
  """Monoid size, aperiodicity, maximal subgroups and the predictions with their sources."""
  return _describe(dfa)[0]


def _describe(dfa) -> tuple[dict, tuple]:
  """`describe`'s dict and the non-trivial maximal subgroups as `Group`s (one monoid walk)."""
  delta, _, _ = minimal_dfa(dfa)
  monoid = transition_monoid(delta)
  star_free = is_aperiodic(monoid)
  subgroups = [g for g in maximal_subgroups(monoid) if len(g) > 1]
  names = sorted({group_name(g) for g in subgroups})
  as_groups = tuple(_as_group(g) for g in subgroups)
  preds = {"nonnegative_diagonal": {
      "verdict": star_free,
      "source": "predictively modelled iff star-free (Sarrof et al. 2024, paper 003)"}}
  preds["nonlinear_or_dense"] = {"verdict": True, "source": "a non-linear RNN holds any finite "
                                 "automaton's state, so it recognizes every regular language"}
  # the monoid is a group: its one maximal subgroup is all of it
  group = as_groups[0] if len(as_groups) == 1 and as_groups[0].order == len(monoid) else None
  for cls in ("signed_diagonal", "unit_modulus_diagonal", "complex_diagonal"):
    preds[cls] = (_by_inclusion(cls, STAR_FREE) if star_free else None) or (
        group_prediction(cls, group) if group is not None
        else series_verdict(cls, star_free, as_groups))
  return {"name": dfa.name, "description": dfa.description, "alphabet": dfa.alphabet,
          "minimal_states": len(delta), "monoid_size": len(monoid), "star_free": star_free,
          "aperiodic": star_free, "maximal_subgroups": names,
          "group_language": group is not None, "predictions": preds}, as_groups


STAR_FREE = "star-free"


def _by_inclusion(cls: str, result: str) -> dict | None:
  """✓ for a class that includes the non-negative one, where that class's result holds (every
  such layer is one of this class's); else None."""
  why = theory.inclusion(cls, "nonnegative_diagonal")
  return None if why is None else {"verdict": True, "source": "the class includes the "
                                   f"non-negative one ({why}): {result} (Sarrof et al. 2024)"}


def series_verdict(cls: str, star_free: bool, subgroups) -> dict:
  """What a class with a subgroup series (theory.py) says of a regular language from its
  maximal subgroups (`Group`s): a necessary condition only, so never a ✓ on its own."""
  if star_free:
    return {"verdict": None, "source": "no theorem here for this class on star-free languages "
            "(the non-negative result is about SSMs with non-negative gates)"}
  depths = [theory.min_depth(cls, g) for g in subgroups]
  if any(d is None for d in depths):
    return {"verdict": False, "source": "a maximal subgroup the class cannot track at any depth "
            "(the group theorems in theory.py), so no stack of it recognizes the language at "
            "finite precision"}
  return {"verdict": None, "source": f"every maximal subgroup is trackable (depth <= "
          f"{max(depths)}); whether the rest of the monoid is: no theorem"}


def group_prediction(cls: str, group, width: int | None = None) -> dict | None:
  """What a class with a theorem says of a group language (its syntactic monoid is `group`):
  the minimal DFA's state is a function of the running product of the letters in the group, so
  a stack that tracks the group (on a stream of its generators: the letters) models the
  language, from the class's minimal depth on ("min_depth"; width as in theory.min_depth); a
  class that never tracks it cannot. None where the class has no theorem for the group."""
  try:
    depth = theory.min_depth(cls, group, width=width)
  except ValueError:  # no theorem for this group (a class without one, householder too narrow)
    bound = theory.depth_bound(cls, group, width=width)
    return None if bound is None else {
        "verdict": True, "min_depth": bound,
        "source": f"the syntactic monoid is the group {group.name}, which a stack of this class "
        f"tracks from depth {bound} on, read as a class it includes ({', '.join(theory.included(cls))}"
        "; the group theorems in theory.py); shallower: no theorem"}
  if depth is None:
    return {"verdict": False, "source": f"the syntactic monoid is the group {group.name}, which "
            "the class cannot track at any depth (the group theorems in theory.py)"}
  return {"verdict": True, "min_depth": max(depth, 1),
          "source": f"the syntactic monoid is the group {group.name}: the state is a function of "
          f"the running product, which a stack of this class tracks from depth {max(depth, 1)} "
          "on (the group theorems in theory.py); shallower: no theorem"}


def class_prediction(name: str, cls: str, width: int | None = None) -> dict | None:
  """`describe_language(name)`'s prediction for a class, with its parameter; for a class it does
  not list (a plugin's own, householder), on a group language the group's (`group_prediction`,
  width as there), on another regular language its subgroup series' verdict
  (`series_verdict`); None where no rule applies (no theorem, or a counter language). A
  verdict with "min_depth" holds from that depth on."""
  d = describe_language(name)
  if cls in d["predictions"]:
    return d["predictions"][cls]
  if not d["regular"]:
    return None
  subgroups = _regular(languages.base_name(name))[1]
  if d["group_language"]:
    return group_prediction(cls, subgroups[0], width)
  by_inclusion = _by_inclusion(cls, STAR_FREE) if d["star_free"] else None
  if by_inclusion:
    return by_inclusion
  if theory.parse(cls)[0].step is None:
    return None
  return series_verdict(cls, d["star_free"], subgroups)


def stack_prediction(name: str, classes: tuple, width: int | None = None) -> dict | None:
  """A hybrid stack's prediction (its layers' classes, bottom first): on a group language the
  stack's own verdict on the group (`theory.expressible`: ✓ where it tracks it); None
  elsewhere (the single-class rules above are not claimed for a mix of classes)."""
  d = describe_language(name)
  if not d["regular"] or not d["group_language"]:
    return None
  group = _regular(languages.base_name(name))[1][0]
  if theory.expressible(list(classes), group, width) is not True:
    return None
  return {"verdict": True, "source": f"the syntactic monoid is the group {group.name}, which "
          "this stack tracks (the group theorems in theory.py)"}


def verdict_at(prediction: dict | None, depth: int) -> bool | None:
  """A class prediction's verdict for a stack of `depth` layers: a verdict that holds from a
  minimal depth on says nothing (None) below it."""
  if prediction is None or depth < prediction.get("min_depth", 0):
    return None
  return prediction["verdict"]


@functools.lru_cache(maxsize=None)
def _regular(base: str) -> tuple[dict, tuple]:
  """`_describe` of a DFA language by name, once per process (tables ask per cell)."""
  return _describe(languages.get(base))


def describe_counter(lang) -> dict:
  """A counter language has no finite monoid; the seed's result needs unbounded integer state
  values, which float32 holds exactly to 2^24, past every length evaluated here."""
  preds = {"nonnegative_diagonal": {
      "verdict": True, "source": "predictively modelled by an SSM with unbounded integer state "
      "values (a counter with a = 1; Sarrof et al. 2024, paper 003)"}}
  for cls in theory.CLASSES:  # a plugin's class too: this dict is built on every call
    by_inclusion = _by_inclusion(cls, "the same counters")
    if by_inclusion:
      preds[cls] = by_inclusion
  return {"name": lang.name, "description": lang.description, "alphabet": lang.alphabet,
          "regular": False, "minimal_states": None, "monoid_size": None, "star_free": None,
          "aperiodic": None, "maximal_subgroups": [], "predictions": preds}


def describe_language(name: str) -> dict:
  """`describe` for any name lang-<name> accepts (a DFA language, a stream variant of one, or a
  counter language); raises languages.LanguageError naming the choices."""
  from tasks import counter_languages
  from tasks import registry
  if name in counter_languages.LANGUAGES:
    return describe_counter(counter_languages.get(name))
  base = languages.base_name(name)
  if base not in languages.LANGUAGES:
    raise languages.LanguageError(f"unknown language {name!r}; choose from "
                                  f"{', '.join(registry.language_names())}")
  d = _regular(base)[0]
  return {**d, "predictions": {k: dict(v) for k, v in d["predictions"].items()}, "regular": True}
