"""Counter languages: not regular, so no DFA and no monoid; a prefix's state is a few integer
counters. The formal-language seed (Sarrof et al. 2024, paper 003) shows SSMs predictively model
Dyck-1, Shuffle-Dyck-k and a^n b^n (c^n) with unbounded integer state values.

Each language has a jittable counter machine (`step` on an int32 state vector, `next_set` of a
state as the predictive-modelling bitmask: bit i for symbol i, bit k for "may end here", as for
the DFA languages) and an independent membership rule in plain Python that the tests check the
machine against. A stream is one long word of the language's Kleene closure: Dyck-1 and
Shuffle-Dyck are closed under concatenation already; the a^n b^n family streams words
a^n b^n (c^n) back to back, n >= 1 drawn uniformly up to length / (number of blocks) per word,
so the counts a model must hold grow with the evaluated length (to 60 / k in training, to
1000 / k at evaluation).
"""
from __future__ import annotations

import dataclasses
from typing import Callable


@dataclasses.dataclass(frozen=True, eq=False)
class CounterLanguage:
  name: str
  alphabet: str
  state_size: int
  step: Callable  # (state int32 (state_size,), symbol) -> state, jnp
  next_set: Callable  # state -> int32 bitmask, jnp
  member: Callable[[str], bool]  # the independent membership rule
  blocks: int = 0  # a^n b^n family: words of `blocks` equal blocks; 0: a uniform walk
  description: str = ""


def _dyck_member(pairs: str):
  """Every bracket type balanced on its own (pairs = "()[]": one counter per type, no nesting
  constraint between types: Shuffle-Dyck; one type: Dyck-1)."""
  def member(w: str) -> bool:
    depth = [0] * (len(pairs) // 2)
    for ch in w:
      i = pairs.index(ch)
      depth[i // 2] += 1 if i % 2 == 0 else -1
      if depth[i // 2] < 0:
        return False
    return not any(depth)
  return member


def _dyck(name: str, pairs: str, description: str) -> CounterLanguage:
  import jax.numpy as jnp
  k = len(pairs) // 2
  opens = jnp.arange(k)

  def step(state, a):
    return state.at[a // 2].add(jnp.where(a % 2 == 0, 1, -1))

  def next_set(state):
    close_ok = (state > 0).astype(jnp.int32)
    bits = jnp.sum(jnp.left_shift(1, 2 * opens)) + jnp.sum(jnp.left_shift(close_ok, 2 * opens + 1))
    return bits + jnp.left_shift(jnp.all(state == 0).astype(jnp.int32), 2 * k)

  return CounterLanguage(name, pairs, k, step, next_set, _dyck_member(pairs),
                         description=description)


def _blocks(name: str, letters: str) -> CounterLanguage:
  """(a^n b^n ...)*: words of len(letters) equal blocks. State: the block being read (-1 at the
  start) and the count of each letter in the current word."""
  import jax.numpy as jnp
  k = len(letters)

  def step(state, a):
    new_word = (a == 0) & (state[0] != 0)  # an 'a' after another block starts a word
    counts = jnp.where(new_word, jnp.zeros(k, jnp.int32), state[1:])
    return jnp.concatenate([a[None].astype(jnp.int32), counts.at[a].add(1)])

  def next_set(state):
    block, counts = state[0], state[1:]
    n = counts[0]
    last = block == k - 1
    done = counts[jnp.clip(block, 0, k - 1)] == n  # the current block is as long as the a's
    bit = lambda i: jnp.left_shift(1, i)
    in_a = bit(0) | bit(1)  # more a's, or the first b
    in_block = jnp.where(done, jnp.where(last, bit(0) | bit(k), bit(jnp.minimum(block + 1, k - 1))),
                         bit(jnp.clip(block, 0, k - 1)))
    start = bit(0) | bit(k)  # before any symbol: a word starts, or the empty word ends
    return jnp.where(block < 0, start, jnp.where(block == 0, in_a, in_block)).astype(jnp.int32)

  def member(w: str) -> bool:
    i = 0
    while i < len(w):  # one word: n >= 1 a's, then exactly n of each later letter
      n = len(w[i:]) - len(w[i:].lstrip(letters[0]))
      if n == 0:
        return False
      i += n
      for c in letters[1:]:
        if w[i:i + n] != c * n:
          return False
        i += n
    return True

  return CounterLanguage(name, letters, k + 1, step, next_set, member, blocks=k,
                         description="(" + " ".join(f"{c}^n" for c in letters) + ")*, n >= 1")


LANGUAGES = {
    "dyck1": lambda: _dyck("dyck1", "()", "Dyck-1 (balanced parentheses, unbounded depth)"),
    "shuffle_dyck2": lambda: _dyck("shuffle_dyck2", "()[]",
                                   "Shuffle-Dyck-2: two bracket types, each balanced alone"),
    "anbn": lambda: _blocks("anbn", "ab"),
    "anbncn": lambda: _blocks("anbncn", "abc"),
}


def initial_state(lang: CounterLanguage):
  import jax.numpy as jnp
  if lang.blocks:
    return jnp.concatenate([jnp.array([-1], jnp.int32), jnp.zeros(lang.blocks, jnp.int32)])
  return jnp.zeros(lang.state_size, jnp.int32)


def label_fn(lang: CounterLanguage, membership: bool = False):
  """Jittable tokens (batch, length) -> labels: the next-set bitmask after each prefix, or with
  `membership` whether the prefix is a word of the language (the bitmask's end bit)."""
  import jax
  import jax.numpy as jnp
  k = len(lang.alphabet)

  def one(tokens):
    def f(state, a):
      state = lang.step(state, a)
      return state, lang.next_set(state)
    _, masks = jax.lax.scan(f, initial_state(lang), tokens)
    return jnp.right_shift(masks, k) & 1 if membership else masks
  return jax.vmap(one)


def sampler(lang: CounterLanguage):
  """Jittable (key, batch, length) -> tokens that stay inside the language's prefixes: Dyck
  languages choose uniformly among the allowed symbols; the a^n b^n family draws each word's n
  log-uniformly in 1..max(1, length // blocks) and writes its blocks. Log-uniform, not uniform:
  uniform n at length 1000 made most first words hundreds long, so 90% of strings scored whole
  by a rule that never counts (the next set from the last symbol) stayed right to 100; this way
  short words come early in most strings and words longer than training's still appear."""
  import jax
  import jax.numpy as jnp
  k = len(lang.alphabet)

  if lang.blocks:
    def sample(key, batch, length):
      top = max(1, length // lang.blocks)

      def step(carry, key):
        pos, n = carry  # position inside the current word, its n
        log_uniform = jnp.floor((top + 1.0) ** jax.random.uniform(key, n.shape)).astype(n.dtype)
        n = jnp.where(pos == 0, jnp.clip(log_uniform, 1, top), n)
        sym = pos // n
        pos = jnp.where(pos + 1 == n * lang.blocks, 0, pos + 1)
        return (pos, n), sym.astype(jnp.int32)
      zeros = jnp.zeros((batch,), jnp.int32)
      _, tokens = jax.lax.scan(step, (zeros, zeros + 1), jax.random.split(key, length))
      return tokens.T
    return sample

  def sample(key, batch, length):
    def one(key):
      def step(state, key):
        mask = lang.next_set(state)
        allowed = (jnp.right_shift(mask, jnp.arange(k)) & 1) == 1
        a = jax.random.categorical(key, jnp.where(allowed, 0.0, -jnp.inf)).astype(jnp.int32)
        return lang.step(state, a), a
      _, tokens = jax.lax.scan(step, initial_state(lang), jax.random.split(key, length))
      return tokens
    return jax.vmap(one)(jax.random.split(key, batch))
  return sample


def get(name: str) -> CounterLanguage:
  return LANGUAGES[name]()
