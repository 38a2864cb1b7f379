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
