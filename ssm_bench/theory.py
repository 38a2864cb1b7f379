"""What the papers say a stack can express, from the transition class each layer declares.

A layer declares the class of its transitions (the registry's `theory_class`); predictions come
from the class, never from a layer's name. Each class with a theorem maps a subgroup G_i to the
smallest normal subgroup G_{i+1} whose quotient one such layer tracks at finite precision; a
stack expresses G iff the series reaches the trivial group:
- unit_modulus_diagonal (input-dependent complex diagonal, |a| = 1: DCD): Abelian quotients,
  G' = [G, G] (paper 000, Theorems 4.1-4.2), so the minimal depth is the derived length;
- complex_diagonal (input-dependent complex diagonal of any modulus: the paper's DCD in full):
  the same series, as the paper's proofs remove contracting, expanding and drifting coordinates
  first and its constructions are unit-modulus, which the class contains;
- signed_diagonal (real diagonal, eigenvalues in [-1, 1]): elementary Abelian 2-group quotients,
  G^2 [G, G] (Grazzi et al. 2025, Theorem 2; paper 000 Sec. 7), so only 2-groups;
- nonnegative_diagonal and time_invariant: no progress on a non-trivial group (Sarrof et al.
  2024, paper 003; paper 000 Sec. 6);
- nonlinear_or_dense: any finite group in one layer (a finite automaton's transition table);
- householder:<n_h> (products of n_h generalized Householder matrices I - beta k k^T, beta in
  [0, 2], unit keys: DeltaNet, DeltaProduct): one layer tracks a group with a faithful orthogonal
  representation whose every element is a product of at most n_h reflections and whose
  dimension fits the keys (their width: d_state, or the layer's `state_width`; reflections.py:
  the permutations of m points need m - 1, Grazzi et al. 2025; S4 and A5 as the rotations of
  the cube and the icosahedron need 2, in 3 dimensions); one reflection per token above a
  stack that tracks C2 (another such layer, or a signed one) tracks the cyclic and dihedral
  groups (its `above` rule); otherwise no theorem;
- householder_nonnegative (beta in [0, 1]): no theorem claimed here;
- tc0 (constant-depth transformers): no fixed depth tracks a non-solvable group at every length
  unless TC0 = NC1 (Merrill et al. 2024, paper 002); solvable groups: no theorem;
- unknown: no theorem (tables show `?`).
A hybrid stack mixing these tracks what any of its sub-stacks tracks (`expressible`).
A class that names a parameter (register_class's `parameter`) takes one integer after a colon
(`householder:2`); the others refuse one. The classes above (theory_builtin.py)
register through `register_class`, as a plugin's own class does (examples/clock.py).
Each class also says which transitions belong to it, so a layer that sows its transitions can
have its declaration checked (`contains`).
A class may name the classes it includes (`includes`: complex includes signed and unit-modulus,
signed includes non-negative): the language verdicts for the non-negative class follow along,
and a class without a theorem of its own tracks what its included classes track (`≤ k` depths,
never a "no").
"""
from __future__ import annotations

import dataclasses
import re
import sys
from typing import Callable

import numpy as np

from tasks import groups


class TheoryError(ValueError):
  """A bad class registration or a class whose rule misbehaves; the message is one line."""


@dataclasses.dataclass(frozen=True)
class TransitionClass:
  name: str
  description: str
  theorem: str  # the result behind the step, with its source
  # (group, sorted subgroup indices, parameter or None) -> the next subgroup's indices (the
  # smallest normal subgroup whose quotient one layer tracks); None: see predict
  step: Callable | None
  # (transitions, tolerance, parameter or None) -> (belongs, detail); None: nothing to check
  contains: Callable | None = None
  # classes whose theorem is not a subgroup series: (group, depth, parameter, width) -> True
  # (can express), False (cannot), None (no theorem); only for homogeneous stacks
  predict: Callable | None = None
  source: str = ""  # the module that registered it
  # the name of the integer after the colon ('householder:2': n_h); None: the class takes none
  parameter: str | None = None
  # ((class name, why), ...): classes whose every transition is one of this class's
  includes: tuple = ()
  # (group, below, parameter, width) -> True / None: whether one layer of the class tracks the
  # group above other layers, given below(group name) -> the verdict for the stack under it
  # (`expressible`); only ever adds a "yes" to a mixed stack
  above: Callable | None = None


# name -> TransitionClass; filled by register_class, the built-ins' and a plugin's alike
CLASSES: dict[str, TransitionClass] = {}
NAME = re.compile(r"[a-z][a-z0-9_]*\Z")


def register_class(name: str, description: str, theorem: str, *, step: Callable | None = None,
                   contains: Callable | None = None, predict: Callable | None = None,
                   parameter: str | None = None, includes: dict | None = None,
                   above: Callable | None = None, source: str | None = None) -> TransitionClass:
  """Add a transition class, so layers can declare it (`register_layer(theory_class=name)`, or
  'name:<int>' for a class with a parameter) and every table, profile and card predicts from it.

  step(group, subgroup, param) -> next subgroup: the group theorem as a subgroup series (a
  `tasks.groups.Group`, a sorted index array of a subgroup, the class's integer parameter or
  None); one layer of the class tracks exactly the groups whose step reaches {identity}, k
  layers those whose series does in k steps, and a step that returns its subgroup whole means
  never. predict(group, depth, param, width) -> True / False / None (no theorem), for a theorem
  that is no subgroup series (homogeneous stacks only). Neither: no theorem (tables show `?`).
  contains(transitions, tol, param) -> (bool, detail): whether sown transitions lie in its set
  (the declaration check); None: nothing to check. parameter: the name of the integer a
  layer may give after a colon ('name:4'), which the rules receive as param; None: the class
  takes none, and 'name:4' is refused. includes: {registered class: why} for the classes whose
  every transition is one of this class's (`inclusion`): a result that holds for every layer of
  an included class then holds for this one (the language verdicts read it, and a class with
  neither step nor predict is credited with what its included classes track: `expressible`,
  `depth_bound`). above(group, below, param, width) -> True / None: whether one layer of the
  class tracks the group on top of a stack of layers, where below(group name) is that stack's
  verdict (a layer that needs only a parity computed under it); a hybrid stack's card then says
  yes. Registering the same rules again under
  their name is a no-op (a plugin imported twice); other rules under a taken name are an error.
  """
  source = source or _caller_module()
  if not isinstance(name, str) or not NAME.match(name):
    raise TheoryError(f"theory class name {name!r} must be lower-case letters, digits and '_', "
                      "starting with a letter (a parameter goes after a colon when declared)")
  for what, fn in (("step", step), ("contains", contains), ("predict", predict),
                   ("above", above)):
    if fn is not None and not callable(fn):
      raise TheoryError(f"theory class {name!r}: {what} must be callable, got {fn!r}")
  if step is not None and predict is not None:
    raise TheoryError(f"theory class {name!r}: give step (a subgroup series) or predict, not both")
  for what, text in (("description", description), ("theorem", theorem)):
    if not isinstance(text, str) or not text.strip():
      raise TheoryError(f"theory class {name!r}: {what} must be a non-empty string")
  if parameter is not None and not (isinstance(parameter, str) and parameter.isidentifier()):
    raise TheoryError(f"theory class {name!r}: parameter must name the integer after the "
                      f"colon (e.g. 'm'), got {parameter!r}")
  cls = TransitionClass(name, description, theorem, step, contains, predict, source, parameter,
                        _checked_includes(name, includes), above)
  old = CLASSES.get(name)
  if old is not None:
    if _rules(old) == _rules(cls):
      return old
    raise TheoryError(f"theory class {name!r} is already registered by {old.source} with other "
                      "rules; choose another name")
  CLASSES[name] = cls
  return cls


def _rules(c: TransitionClass) -> tuple:
  """What a class says, with its functions by name (a module imported again makes new ones)."""
  origin = lambda fn: None if fn is None else (
      getattr(fn, "__module__", "?"), getattr(fn, "__qualname__", repr(fn)),
      getattr(getattr(fn, "__code__", None), "co_firstlineno", None))  # two lambdas differ
  return (c.description, c.theorem, origin(c.step), origin(c.contains), origin(c.predict),
          c.parameter, c.includes, origin(c.above))


def _checked_includes(name: str, includes) -> tuple:
  """register_class's `includes` as sorted (name, why) pairs, each a class registered before."""
  if includes is None:
    return ()
  if not isinstance(includes, dict):
    raise TheoryError(f"theory class {name!r}: includes must be a dict from a registered class "
                      f"to why it is included, got {includes!r}")
  for other, why in includes.items():
    if other not in CLASSES or other == name:
      raise TheoryError(f"theory class {name!r}: includes {other!r}, which is no other class "
                        "registered before it (a plugin's own: register it first); choose from "
                        f"{', '.join(CLASSES)}")
    if not isinstance(why, str) or not why.strip():
      raise TheoryError(f"theory class {name!r}: includes {other!r} without a reason (a "
                        "non-empty string saying why its transitions are this class's)")
  return tuple(sorted(includes.items()))


def included(cls: str) -> dict:
  """{class: why} for every class whose transitions are all class `cls`'s: its registered
  `includes`, followed through classes in between (the shortest chain, its reasons from the
  included class up). Parameters are not read: 'householder:2' includes what 'householder' does."""
  start = parse(cls)[0].name
  reasons, frontier = {start: []}, [start]
  while frontier:  # breadth first: the shortest chain of reasons
    nxt = []
    for name in frontier:
      for inc, why in CLASSES[name].includes:
        if inc not in reasons:
          reasons[inc] = [why] + reasons[name]
          nxt.append(inc)
    frontier = nxt
  return {name: "; ".join(why) for name, why in reasons.items() if name != start}


def inclusion(cls: str, other: str) -> str | None:
  """Why every transition of class `other` is one of class `cls` (`included`); None where no
  chain of registered inclusions says so."""
  return included(cls).get(parse(other)[0].name)


def _caller_module() -> str:
  frame = sys._getframe(2)
  return frame.f_globals.get("__name__", "?")


def parse(cls: str) -> tuple:
  """'householder:2' -> (CLASSES['householder'], 2); 'signed_diagonal' -> (..., None).
  ValueError naming the classes for anything else."""
  name, colon, param = str(cls).partition(":")
  if name not in CLASSES or (colon and not param.isdigit()):
    raise ValueError(f"unknown theory class {cls!r}; choose one of {', '.join(CLASSES)}"
                     + _parameters())
  if colon and CLASSES[name].parameter is None:
    raise ValueError(f"theory class {cls!r}: {name} takes no parameter" + _parameters())
  return CLASSES[name], (int(param) if param else None)


def _parameters() -> str:
  """' (householder takes :<n_h>, e.g. householder:2; ...)': the classes that take one."""
  takes = [f"{n} takes :<{c.parameter}>, e.g. {n}:2" for n, c in CLASSES.items() if c.parameter]
  return f" ({'; '.join(takes)})" if takes else ""


def _group(group):
  return groups.get_group(group) if isinstance(group, str) else group


def expressible(classes, group, width: int | None = None) -> bool | None:
  """Can a stack with these transition classes (first = bottom) track the group at finite
  precision? None when no theorem decides it. width: the dimensions the stack's state lives in,
  which a class with a width condition reads (householder: the keys' width,
  `state_widths.state_width`); None assumes wide enough.

  A mixed stack can do what any of its sub-stacks can (the layers kept in their order): a layer
  whose output projection is zero leaves the residual stream as it was. So it tracks the group
  when its series classes' series, layers of other classes skipped, reaches the identity, or
  when one of its classes that predicts depth by depth (householder) tracks it at that class's
  count of layers; otherwise it is "no" only when every layer is a series class. Where that
  leaves no verdict, a layer whose class has no theorem of its own may be read as any class it
  includes that has one (`included`): "yes" when one such reading tracks the group, never a
  "no" (a lower bound: the wider class may do more)."""
  verdict = _expressible(classes, group, width)
  if verdict is None and any(_readings(c) for c in classes):
    g = _group(group)
    *_, last = _reach(classes, g)
    return True if any(len(h) == 1 for h in last) else None
  return verdict


def _readings(cls: str) -> list:
  """The (class, parameter) steps a layer of a class without a theorem may be read as: the
  subgroup series of the classes it includes ([] for a class with a theorem)."""
  if has_theorem(cls):
    return []
  return [parse(i) for i in included(cls) if CLASSES[i].step is not None]


def _reach(classes, g):
  """After each layer in turn, the subgroups the series can reach with each layer read as
  itself (its step; a layer without one leaves the subgroup) or, for a class without a
  theorem, as any series class it includes (`_readings`): a set of index tuples."""
  reach = {tuple(range(g.order))}
  for cls in classes:
    c, param = parse(cls)
    options = [(c, param)] if c.step is not None else [None] + _readings(cls)
    reach = {h if o is None else tuple(_next_subgroup(o[0], o[1], g, np.array(h)))
             for h in reach for o in options}
    yield reach


def _expressible(classes, group, width: int | None = None) -> bool | None:
  """`expressible` from the classes' own theorems alone."""
  g, classes = _group(group), list(classes)
  parsed = [parse(c) for c in classes]
  if len(set(classes)) == 1 and parsed[0][0].predict:
    return parsed[0][0].predict(g, len(classes), parsed[0][1], width)
  h = np.arange(g.order)
  for c, param in parsed:
    if c.step is not None:
      h = _next_subgroup(c, param, g, h)
  if h.size == 1:
    return True
  if any(c.predict(g, classes.count(name), param, width) is True
         for name, (c, param) in zip(classes, parsed) if c.predict):
    return True
  if any(c.above(g, lambda below, i=i: expressible(classes[:i], below, width), param,
                 width) is True for i, (c, param) in enumerate(parsed) if i and c.above):
    return True
  return False if all(c.step is not None for c, _ in parsed) else None


def _next_subgroup(c: TransitionClass, param, g, h) -> np.ndarray:
  """c's step from subgroup h, checked: a plugin's rule that leaves h, or returns no subgroup,
  would make every prediction after it wrong without a sign."""
  nxt = np.unique(np.asarray(c.step(g, h, param)).astype(np.int64).ravel())
  if nxt.size == 0 or nxt[0] != 0 or not np.isin(nxt, h).all() or not np.array_equal(
      g.generate(nxt), nxt):
    raise TheoryError(f"theory class {c.name!r}: its step from a subgroup of order {h.size} of "
                      f"{g.name} returned {nxt.size} elements that are not a subgroup of it")
  return nxt


def min_depth(cls: str, group, max_depth: int = 16, width: int | None = None):
  """Smallest depth of a homogeneous stack of this class that tracks the group; None if never.
  Raises ValueError for a class without a theorem (ask `has_theorem` first)."""
  c, param = parse(cls)
  g = _group(group)
  if g.order == 1 and (c.predict or c.step):  # the trivial group needs no layer, as a series
    return 0  # of length 0 says (a predict rule is asked from depth 1 up)
  if c.predict:
    verdicts = [c.predict(g, d, param, width) for d in range(1, max_depth + 1)]
    if True in verdicts:
      return verdicts.index(True) + 1
    if all(v is False for v in verdicts):
      return None
    raise ValueError(f"class {cls!r} has no theorem for {g.name}")
  step = c.step
  if step is None:
    raise ValueError(f"class {cls!r} has no theorem")
  h = np.arange(g.order)
  for depth in range(0, max_depth + 1):
    if h.size == 1:
      return depth
    nxt = _next_subgroup(c, param, g, h)
    if nxt.size == h.size:
      return None
    h = nxt
  return None


def has_theorem(cls: str) -> bool:
  c, _ = parse(cls)
  return c.step is not None or c.predict is not None


def min_depth_text(cls: str, group, width: int | None = None) -> str:
  """The class's minimal depth for the group as reports show it: a number, 'never', '≤ k'
  (a class without a theorem that includes one tracking it at depth k: `depth_bound`) or
  'no theorem'. A rule that misbehaves raises its TheoryError: a ValueError too, but shown as
  "no theorem" a broken plugin rule would read as a gap in the theory."""
  try:
    d = min_depth(cls, group, 3 if parse(cls)[0].predict else 16, width)
  except TheoryError:
    raise
  except ValueError:
    bound = depth_bound(cls, group, width=width)
    return "no theorem" if bound is None else f"≤ {bound}"
  return "never" if d is None else str(d)


def depth_bound(cls: str, group, max_depth: int = 16, width: int | None = None) -> int | None:
  """For a class without a theorem of its own: the smallest depth at which a stack of it tracks
  the group by a class it includes (`expressible`), an upper bound on its minimal depth; None
  where no included class tracks the group up to max_depth (or the class has a theorem)."""
  if not _readings(cls):
    return None
  g, previous = _group(group), None
  for depth, reach in enumerate(_reach([cls] * max_depth, g), 1):
    if any(len(h) == 1 for h in reach):
      return depth
    if reach == previous:  # no new subgroup: no deeper stack gets further
      return None
    previous = reach
  return None


def prediction(classes, group, width: int | None = None) -> dict:
  """For tables: whether the stack can express the group (None: no theorem) and, for a
  homogeneous stack, the class's minimal depth (None: never, or no theorem); width as in
  `expressible`."""
  classes = list(classes)
  kinds = sorted(set(classes))
  known = all(has_theorem(c) for c in kinds)
  depth = None
  if len(kinds) == 1 and known:
    try:
      depth = min_depth(kinds[0], group, 3 if parse(kinds[0])[0].predict else 16, width)
    except TheoryError:  # a rule that misbehaves: an error, as min_depth_text
      raise
    except ValueError:  # a class whose theorem says nothing about this group
      known = False
  return {"expressible": expressible(classes, group, width), "min_depth": depth,
          "theorem": known}


def check(cls: str, transitions, tol: float = 1e-4) -> dict:
  """Does the sampled transition array lie in the class's set? {"checked", "ok", "detail"}."""
  c, param = parse(cls)
  if c.contains is None:
    return {"checked": False, "ok": None, "detail": f"nothing to check for class {cls}"}
  ok, detail = c.contains(np.asarray(transitions), tol, param)
  return {"checked": True, "ok": bool(ok), "detail": detail}


# the built-in classes register through register_class, as a plugin's do (after everything they
# use is defined: theory_builtin imports this module back)
from ssm_bench import theory_builtin  # noqa: E402,F401
