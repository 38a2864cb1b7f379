"""Task registry: a name maps to its token stream, its label rule and its evaluation streams.

Names: any group name (`C2`, `S3`, `A4xC5`: uniform stream over the group), `<group>-gen`
(uniform over a generating set), `parity` (C2, evaluated on uniform and adversarial streams),
`modcount<m>` (all-ones input, count mod m), `flipflop` and `offset` (next-token prediction of
an on/off signal, with two generalisation streams).
"""
from __future__ import annotations

import dataclasses
import functools
import re
from typing import Callable

import jax.numpy as jnp
import numpy as np

from tasks import groups
from ssm_bench.config import GRID_STEP
from tasks import counter_languages
from tasks import languages
from tasks import streams


class TaskError(ValueError):
  """An unknown or malformed task name."""


@dataclasses.dataclass(frozen=True, eq=False)
class Task:
  name: str
  vocab_size: int  # input tokens are 0..vocab_size-1
  num_classes: int  # labels are 0..num_classes-1
  table: np.ndarray | None  # associative table that folds tokens into states (None: next token)
  stream: Callable  # (key, batch, length) -> tokens, the training stream
  eval_streams: dict  # name -> stream, evaluated after training
  label_map: np.ndarray | None = None  # state -> class, when states are not the classes
  group: groups.Group | None = None
  main_stream: str = "uniform"  # the eval stream behind max_len; the others are also stored
  # (tokens, labels) -> {event: bool mask}: positions whose accuracy summaries report apart, and
  # a sign that per-position curves and an example output are worth storing
  events: Callable | None = None
  # tokens (batch, length) -> labels, for tasks whose state is not a finite table (counter
  # languages); None: labels are folded through `table`
  label_fn: Callable | None = None
  # positions per acc(L) point (evaluation.on_grid): 1 for the paper's groups; a window for
  # streams whose labels are periodic in the position
  acc_window: int = 1
  # max_len from whole strings: L counts when >90% of the streams are right at every position
  # up to L (Bhattamishra et al. 2020's criterion, "predictively models"). A language walk's
  # positions are mostly answered by its last symbol (a^n b^n c^n at n up to 333: a last-symbol
  # rule is right at 99.5% of them), so a per-position score passes a model that never counts.
  whole_strings: bool = False

  @property
  def next_token(self) -> bool:
    """Labels are the next input token (no table to fold, no label rule)."""
    return self.table is None and self.label_fn is None

  def labels(self, tokens):
    if self.label_fn is not None:
      return self.label_fn(tokens)
    y = streams.prefix_products(self.table, tokens)
    return y if self.label_map is None else jnp.asarray(self.label_map)[y]

  def sample(self, key, batch: int, length: int, stream: str | None = None):
    """Jittable with batch and length static: (tokens, labels), both int32 (batch, length)."""
    fn = self.stream if stream is None else self.eval_streams[stream]
    if self.next_token:
      tokens = fn(key, batch, length + 1)
      return tokens[:, :-1], tokens[:, 1:]
    tokens = fn(key, batch, length)
    return tokens, self.labels(tokens)


def _group_task(name: str, g: groups.Group) -> Task:
  uniform = streams.uniform(g.order)
  return Task(name=name, vocab_size=g.order, num_classes=g.order, table=g.table,
              stream=uniform, eval_streams={"uniform": uniform}, group=g)


def _generators_task(name: str, g: groups.Group) -> Task:
  """Trained and scored on the generating-set stream: the other tokens' embeddings never train."""
  gen = streams.from_set(g.generating_set)
  return Task(name=name, vocab_size=g.order, num_classes=g.order, table=g.table, stream=gen,
              eval_streams={"generators": gen}, group=g, main_stream="generators")


def parity() -> Task:
  g = groups.get_group("C2")
  uniform = streams.uniform(2)
  return Task("parity", 2, 2, g.table, uniform,
              {"uniform": uniform, "adversarial": streams.adversarial_parity()}, group=g)


def modcount(m: int) -> Task:
  g = groups.cyclic(m)
  ones = streams.constant(1)
  return Task(f"modcount{m}", 2, m, g.table, ones, {"uniform": ones}, group=g)


def flipflop() -> Task:
  s = streams.flipflop()
  return Task("flipflop", 3, 2, streams.FLIPFLOP_TABLE, s, {"uniform": s},
              label_map=streams.FLIPFLOP_READ)


def _offset_events(tokens, labels):
  """Inside an ISI (next is 1), its offset (last ISI step: next is 0), onsets (last ITI step:
  next is 1) and the rest of the ITI. Counting shows as high accuracy on both of the first two:
  copying the input fails offsets, always predicting 0 fails the inside."""
  on, nxt = tokens == 1, labels == 1
  return {"in_isi": on & nxt, "offset": on & ~nxt, "onset": ~on & nxt, "iti": ~on & ~nxt}


def offset() -> Task:
  """Next-token prediction of an ITI/ISI on/off signal (paper 001, Sec. 5, App. C)."""
  cycles = streams.offset_signal("cycles")
  return Task("offset", 2, 2, None, cycles,
              {v: streams.offset_signal(v) for v in ("cycles", "two_isi", "double_isi")},
              main_stream="cycles", events=_offset_events)


# A language's acc(L) averages the grid step's positions ending at L: with one position per grid
# length (all multiples of 20), (aa)*, (abab)* and flip-flop would be scored on one phase.
LANGUAGE_ACC_WINDOW = GRID_STEP


def language(name: str, membership: bool = False) -> Task:
  """lang-<name>: the predictive-modelling target (at each position the set of symbols that may
  come next, with 'may end here', as one class per set: exact-set accuracy), or with -member the
  membership of each prefix; streams are walks that stay inside the language's prefixes."""
  if name in counter_languages.LANGUAGES:
    return _counter_language(name, membership)
  base, walk_args = languages.VARIANTS.get(name, (name, {}))
  if base not in languages.LANGUAGES:
    raise languages.LanguageError(f"unknown language {name!r}; choose from "
                                  f"{', '.join(language_names())}")
  dfa = languages.get(base)
  if membership and languages.membership_by_last_symbol(dfa):
    raise TaskError(f"task 'lang-{name}-member': on {name}'s walks a prefix's membership is "
                    f"decided by its last symbol alone, so any model reads it; use lang-{name} "
                    "(the next-symbol set)")
  table, images = languages.monoid_table(dfa)
  labels = (np.array([int(q in dfa.accept) for q in range(dfa.num_states)], np.int32)
            if membership else languages.next_sets(dfa))
  walk = languages.walk_sampler(dfa, **walk_args)
  events = None
  if "r" in dfa.alphabet and base == "flipflop_language":
    read = dfa.alphabet.index("r")  # the position of a read predicts the bit it must return
    events = lambda tokens, labels: {"after_read": tokens == read}
  return Task(f"lang-{name}" + ("-member" if membership else ""), len(dfa.alphabet),
              2 if membership else 2 ** (len(dfa.alphabet) + 1), table, walk, {"walk": walk},
              label_map=labels[images], main_stream="walk", events=events,
              acc_window=LANGUAGE_ACC_WINDOW, whole_strings=True)


def _counter_language(name: str, membership: bool) -> Task:
  """A counter language (tasks/counter_languages.py): labels from its counter machine."""
  lang = counter_languages.get(name)
  walk = counter_languages.sampler(lang)
  return Task(f"lang-{name}" + ("-member" if membership else ""), len(lang.alphabet),
              2 if membership else 2 ** (len(lang.alphabet) + 1), None, walk, {"walk": walk},
              main_stream="walk", label_fn=counter_languages.label_fn(lang, membership),
              acc_window=LANGUAGE_ACC_WINDOW, whole_strings=True)


def language_names() -> list[str]:
  """Every name lang-<name> accepts: the DFA languages, their stream variants, the counter
  languages."""
  return list(languages.LANGUAGES) + list(languages.VARIANTS) + list(counter_languages.LANGUAGES)


# Fixed names; group names (and their '-gen' variants) are parsed on top of these.
TASKS = {"parity": parity, "flipflop": flipflop, "offset": offset}
GRAMMAR = ("tasks: " + ", ".join(sorted(TASKS)) + ", modcount<m> (m>=2), lang-<language>[-member] "
           "(tasks/languages.py, tasks/counter_languages.py), a group name "
           "(uniform stream) or <group>-gen (stream over a generating set); " + groups.GRAMMAR)


@functools.lru_cache(maxsize=64)
def get_task(name: str) -> Task:
  """Build a task by name; raises TaskError naming the valid choices for anything else."""
  if name in TASKS:
    return TASKS[name]()
  if m := re.fullmatch(r"lang-([a-z0-9_]+?)(-member)?", name or ""):
    try:
      return language(m.group(1), membership=bool(m.group(2)))
    except languages.LanguageError as e:
      raise TaskError(f"unknown task {name!r}: {e}") from None
  if m := re.fullmatch(r"modcount(\d+)", name or ""):
    if int(m.group(1)) < 2:
      raise TaskError(f"unknown task {name!r}: modcount needs m >= 2; {GRAMMAR}")
    return modcount(int(m.group(1)))
  gen = (name or "").endswith("-gen")
  group_name = name[:-4] if gen else name
  try:
    g = groups.get_group(group_name)
  except groups.GroupError as e:
    if "too large" in str(e):
      raise TaskError(str(e)) from None
    raise TaskError(f"unknown task {name!r}; {GRAMMAR}") from None
  return _generators_task(name, g) if gen else _group_task(name, g)


def validate(name: str) -> str:
  """Flag validator helper: the one-line reason `name` is not a task, or '' if it is."""
  try:
    get_task(name)
    return ""
  except (TaskError, groups.GroupError) as e:
    return str(e)
