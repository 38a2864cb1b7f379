"""Regular languages as DFAs: a small readable spec, a registry of named ones, and for each an
independent membership predicate (a regular expression or a counting rule) that tests check the
automaton against.

A spec: `alphabet` (one character per symbol), `states`, `start`, `accept` and `delta`, a dict
"state symbol" -> state; transitions left out go to a rejecting sink. The formal-language seed
(Sarrof et al. 2024, paper 003) asks which of these a model predictively models; the theory side
(star-free or not, maximal subgroups) is in `ssm_bench/language_theory.py`.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Callable

import numpy as np


class LanguageError(ValueError):
  """An unknown language name or a malformed spec; the message is one line."""


@dataclasses.dataclass(frozen=True, eq=False)
class DFA:
  name: str
  alphabet: str  # symbol i is alphabet[i]
  delta: np.ndarray  # (states, symbols) -> state; the last state may be the added sink
  start: int
  accept: frozenset
  member: Callable[[str], bool]  # the independent membership rule
  description: str = ""

  @property
  def num_states(self) -> int:
    return self.delta.shape[0]

  def run(self, word: str) -> int:
    q = self.start
    for ch in word:
      q = int(self.delta[q, self.alphabet.index(ch)])
    return q

  def accepts(self, word: str) -> bool:
    return self.run(word) in self.accept


def from_spec(name: str, alphabet: str, states: list, start, accept, delta: dict,
              member: Callable[[str], bool], description: str = "") -> DFA:
  """Build a DFA from named states; a missing transition goes to an added rejecting sink."""
  index = {s: i for i, s in enumerate(states)}
  sink = len(states)
  table = np.full((sink + 1, len(alphabet)), sink, np.int32)
  for key, target in delta.items():
    state, sym = key.rsplit(" ", 1)
    if state not in index or target not in index or sym not in alphabet:
      raise LanguageError(f"{name}: bad transition {key!r} -> {target!r}")
    table[index[state], alphabet.index(sym)] = index[target]
  return DFA(name, alphabet, table, index[start], frozenset(index[a] for a in accept), member,
             description)


def _runs_rule_tomita3(w: str) -> bool:
  """No odd-length block of 1s followed at once by an odd-length block of 0s."""
  blocks = [(m.group()[0], len(m.group())) for m in re.finditer(r"0+|1+", w)]
  return not any(a == ("1", a[1]) and a[1] % 2 and b[0] == "0" and b[1] % 2
                 for a, b in zip(blocks, blocks[1:]))


def _dyck(depth: int):
  def member(w: str) -> bool:
    h = 0
    for ch in w:
      h += 1 if ch == "(" else -1
      if h < 0 or h > depth:
        return False
    return h == 0
  return member


def _all_stacks(opens: str, depth: int) -> list[str]:
  out, frontier = [""], [""]
  for _ in range(depth):
    frontier = [s + c for s in frontier for c in opens]
    out += frontier
  return out


def _dyck_moves(stack: str, depth: int):
  """(symbol, next stack) for the symbols that keep a bounded Dyck prefix live."""
  for o, c in (("(", ")"), ("[", "]")):
    if len(stack) < depth:
      yield o, stack + o
    if stack.endswith(o):
      yield c, stack[:-1]


def _dyck_k(pairs: str, depth: int):
  def member(w: str) -> bool:
    stack = []
    for ch in w:
      i = pairs.index(ch)
      if i % 2 == 0:
        stack.append(i)
      elif not stack or stack.pop() != i - 1:
        return False
      if len(stack) > depth:
        return False
    return not stack
  return member


def _flipflop(w: str) -> bool:
  """Pairs (instruction, bit): w writes the bit, i ignores it, r must read the last written bit
  (Liu et al. 2023; a read before any write reads 0)."""
  if len(w) % 2 or any(w[k] not in "wri" or w[k + 1] not in "01" for k in range(0, len(w), 2)):
    return False
  last = "0"
  for k in range(0, len(w), 2):
    op, bit = w[k], w[k + 1]
    if op == "w":
      last = bit
    elif op == "r" and bit != last:
      return False
  return True


def _regex(pattern: str):
  compiled = re.compile(pattern)
  return lambda w: compiled.fullmatch(w) is not None


def _named() -> dict:
  L = {}

  def add(name, *args, **kw):
    L[name] = lambda: from_spec(name, *args, **kw)

  # Tomita (1982) over {0, 1}.
  add("tomita1", "01", ["a"], "a", ["a"], {"a 1": "a"}, _regex(r"1*"), "1*")
  add("tomita2", "01", ["a", "b"], "a", ["a"], {"a 1": "b", "b 0": "a"}, _regex(r"(10)*"),
      "(10)*")
  add("tomita3", "01", ["e0", "o1", "e1", "o0", "e0b"], "e0", ["e0", "o1", "e1", "e0b"],
      # e0: after 0s (or start, or an even 0-block after an odd 1-block); o1/e1: inside a 1-block
      # of odd/even length; o0: inside a 0-block of odd length after an odd 1-block; e0b: even.
      {"e0 0": "e0", "e0 1": "o1", "o1 1": "e1", "o1 0": "o0", "e1 1": "o1", "e1 0": "e0",
       "o0 0": "e0b", "e0b 0": "o0", "e0b 1": "o1"},
      _runs_rule_tomita3, "no odd block of 1s followed at once by an odd block of 0s")
  add("tomita4", "01", ["z0", "z1", "z2"], "z0", ["z0", "z1", "z2"],
      {"z0 0": "z1", "z1 0": "z2", "z0 1": "z0", "z1 1": "z0", "z2 1": "z0"},
      lambda w: "000" not in w, "no 000")
  add("tomita5", "01", ["ee", "eo", "oe", "oo"], "ee", ["ee"],
      {"ee 0": "oe", "oe 0": "ee", "eo 0": "oo", "oo 0": "eo",
       "ee 1": "eo", "eo 1": "ee", "oe 1": "oo", "oo 1": "oe"},
      lambda w: w.count("0") % 2 == 0 and w.count("1") % 2 == 0, "even 0s and even 1s")
  add("tomita6", "01", ["r0", "r1", "r2"], "r0", ["r0"],
      {"r0 0": "r1", "r1 0": "r2", "r2 0": "r0", "r0 1": "r2", "r1 1": "r0", "r2 1": "r1"},
      lambda w: (w.count("0") - w.count("1")) % 3 == 0, "#0 - #1 = 0 mod 3")
  add("tomita7", "01", ["a", "b", "c", "d"], "a", ["a", "b", "c", "d"],
      {"a 0": "a", "a 1": "b", "b 1": "b", "b 0": "c", "c 0": "c", "c 1": "d", "d 1": "d"},
      _regex(r"0*1*0*1*"), "0*1*0*1*")
  add("parity", "01", ["e", "o"], "e", ["e"], {"e 0": "e", "e 1": "o", "o 0": "o", "o 1": "e"},
      lambda w: w.count("1") % 2 == 0, "an even number of 1s")
  add("aa_star", "a", ["e", "o"], "e", ["e"], {"e a": "o", "o a": "e"}, _regex(r"(aa)*"), "(aa)*")
  add("abab_star", "ab", ["s", "a", "ab", "aba"], "s", ["s"],
      {"s a": "a", "a b": "ab", "ab a": "aba", "aba b": "s"}, _regex(r"(abab)*"), "(abab)*")
  for n in (2, 4):
    add(f"dyck1_depth{n}", "()", [f"h{k}" for k in range(n + 1)], "h0", ["h0"],
        {**{f"h{k} (": f"h{k + 1}" for k in range(n)}, **{f"h{k} )": f"h{k - 1}" for k in
                                                          range(1, n + 1)}},
        _dyck(n), f"Dyck-1 of depth at most {n}")
  # Dyck(K, m): K bracket types nested at most m deep; a state is the stack of open brackets.
  stacks = [s for s in _all_stacks("([", 3)]
  add("dyck2_depth3", "()[]", [s or "e" for s in stacks], "e", ["e"],
      {f"{s or 'e'} {c}": t or "e" for s in stacks for c, t in _dyck_moves(s, 3)},
      _dyck_k("()[]", 3), "Dyck(2, 3): two bracket types nested at most 3 deep")
  add("flipflop_language", "wri01", ["q0", "q1", "w?0", "w?1", "r0?", "r1?", "i0?", "i1?"],
      "q0", ["q0", "q1"],
      # q<b>: between pairs, last written bit b; then the instruction, then its bit.
      {"q0 w": "w?0", "q1 w": "w?1", "w?0 0": "q0", "w?0 1": "q1", "w?1 0": "q0", "w?1 1": "q1",
       "q0 r": "r0?", "q1 r": "r1?", "r0? 0": "q0", "r1? 1": "q1",
       "q0 i": "i0?", "q1 i": "i1?", "i0? 0": "q0", "i0? 1": "q0", "i1? 0": "q1", "i1? 1": "q1"},
      _flipflop, "flip-flop: w/r/i instruction then a bit; a read returns the last write")
  return L


LANGUAGES = _named()


def get(name: str) -> DFA:
  if name not in LANGUAGES:
    raise LanguageError(f"unknown language {name!r}; choose from {', '.join(LANGUAGES)}")
  return LANGUAGES[name]()


# ---- the task: a DFA's transition monoid as the table the task folds tokens with ---------------

def live_states(dfa: DFA) -> np.ndarray:
  """States from which some word reaches acceptance (a prefix of a member ends in one)."""
  live = np.zeros(dfa.num_states, bool)
  live[list(dfa.accept)] = True
  while True:
    grown = live | live[dfa.delta].any(axis=1)
    if (grown == live).all():
      return live
    live = grown


def reachable(dfa: DFA) -> list[int]:
  """The states the start reaches, breadth first."""
  order, seen = [dfa.start], {dfa.start}
  for q in order:
    for r in map(int, dfa.delta[q]):
      if r not in seen:
        seen.add(r)
        order.append(r)
  return order


def membership_by_last_symbol(dfa: DFA) -> bool:
  """On a walk inside the language's prefixes, whether a prefix is a member depends on its last
  symbol alone: always (prefix-closed: Tomita 1, 4, 7), after a 0 ((10)*: Tomita 2), after a bit
  (flip-flop's instruction/bit pairs). Any model reads that: -member is then no task."""
  live = live_states(dfa)
  after = {}  # symbol -> membership of the live states it leads to (a walk stays in them)
  for q in reachable(dfa):
    for a, r in enumerate(dfa.delta[q]):
      if live[r]:
        after.setdefault(a, set()).add(int(r) in dfa.accept)
  return all(len(v) == 1 for v in after.values())


def monoid_table(dfa: DFA):
  """(table, images): the transition monoid of `dfa` with letter i as element i (so tokens are
  element indices), table[a, b] = the element 'a then b', images[m] = the state element m takes
  the start state to. Associative, so the task folds prefixes with the group tasks' scan."""
  n, k = dfa.num_states, len(dfa.alphabet)
  letters = [tuple(int(dfa.delta[q, a]) for q in range(n)) for a in range(k)]
  elements, index = list(letters), {}
  for i, m in enumerate(letters):
    index.setdefault(m, i)
  frontier = list(letters)
  while frontier:
    nxt = []
    for m in frontier:
      for g in letters:
        p = tuple(g[m[q]] for q in range(n))
        if p not in index:
          index[p] = len(elements)
          elements.append(p)
          nxt.append(p)
    frontier = nxt
  table = np.array([[index[tuple(b[a[q]] for q in range(n))] for b in elements]
                    for a in elements], np.int32)
  images = np.array([m[dfa.start] for m in elements], np.int32)
  return table, images


def next_sets(dfa: DFA) -> np.ndarray:
  """Per state, the predictive-modelling label: a bitmask of the symbols that keep a prefix of a
  member (bit i for symbol i) and, at bit k, whether the word may end here (accepting)."""
  live = live_states(dfa)
  k = len(dfa.alphabet)
  out = np.zeros(dfa.num_states, np.int32)
  for q in range(dfa.num_states):
    bits = sum(1 << a for a in range(k) if live[dfa.delta[q, a]])
    out[q] = bits | (int(q in dfa.accept) << k)
  return out


def walk_sampler(dfa: DFA, weights: dict | None = None, repeat: float = 0.0):
  """Jittable (key, batch, length) -> tokens: a walk from the start state choosing among the
  symbols that keep the prefix live (uniformly, or in proportion to `weights` per symbol), so
  streams stay inside the language's prefixes (uniform strings would leave e.g. Dyck-1 at once).
  With `repeat`, the previous symbol comes again with that probability where it may: blocks of
  one symbol grow to a mean of 1 / (1 - repeat)."""
  import jax
  import jax.numpy as jnp
  live = live_states(dfa)
  allowed = jnp.asarray(live[dfa.delta])  # (states, symbols)
  delta = jnp.asarray(dfa.delta)
  w = np.array([float((weights or {}).get(a, 1.0)) for a in dfa.alphabet])
  log_w = jnp.asarray(np.log(w), jnp.float32)

  def sample(key, batch, length):
    def step(carry, k):
      q, prev = carry
      k_sym, k_rep = jax.random.split(k) if repeat else (k, None)  # the plain walk's draws
      logits = jnp.where(allowed[q], log_w, -jnp.inf)                # stay as they were
      a = jax.random.categorical(k_sym, logits).astype(jnp.int32)
      if repeat:
        again = (prev >= 0) & allowed[q, jnp.maximum(prev, 0)] & (
            jax.random.uniform(k_rep, q.shape) < repeat)
        a = jnp.where(again, prev, a)
      return (delta[q, a], a), a
    keys = jax.random.split(key, length)  # one key a step; categorical draws per row
    q0 = jnp.full((batch,), dfa.start, jnp.int32)
    _, tokens = jax.lax.scan(step, (q0, jnp.full((batch,), -1, jnp.int32)), keys)
    return tokens.T
  return sample


# Streams of one language with other statistics: name -> (language, walk_sampler arguments). The
# flip-flop language as in Liu et al. 2023: an instruction is ignore with probability p (sparse:
# 0.98, so reads must reach far back to the last write; dense: 0.1), write or read otherwise.
# Tomita 3's counting is the parity of the current and the previous block; the plain walk's
# blocks are short (mean 2.7; the longest in a 1000-symbol sequence: median 16, at most 32), so a
# bounded counter passes. tomita3_blocks repeats a symbol with probability 0.85 where it may: mean
# 13 at training lengths, the longest at 1000 median 80 (measured), past what training shows.
def _flipflop_weights(p_ignore: float) -> dict:
  return {"weights": {"i": p_ignore, "w": (1 - p_ignore) / 2, "r": (1 - p_ignore) / 2}}


VARIANTS = {"flipflop_sparse": ("flipflop_language", _flipflop_weights(0.98)),
            "flipflop_dense": ("flipflop_language", _flipflop_weights(0.1)),
            "tomita3_blocks": ("tomita3", {"repeat": 0.85})}


def base_name(name: str) -> str:
  """The DFA language a name streams: a variant's base, else the name itself."""
  return VARIANTS.get(name, (name,))[0]
