"""Jittable token streams and their prefix-product labels.

Every sampler has the signature `sample(key, batch, length) -> int32 (batch, length)` with
`batch` and `length` static, so it compiles once and runs on the accelerator. Labels are the
running product y_t = x_1 . x_2 ... x_t of a Cayley (or monoid) table, computed by an
associative scan of table lookups.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def prefix_products(table, tokens):
  """y[:, t] = tokens[:, 0] . ... . tokens[:, t] (left to right) for an associative table."""
  table = jnp.asarray(table)
  return jax.lax.associative_scan(lambda a, b: table[a, b], tokens, axis=1)


def prefix_products_numpy(table, tokens):
  """The test oracle: a plain left fold."""
  table = np.asarray(table)
  out = np.empty_like(np.asarray(tokens))
  acc = None
  for t in range(out.shape[1]):
    acc = tokens[:, t] if acc is None else table[acc, tokens[:, t]]
    out[:, t] = acc
  return out


def uniform(num_symbols: int):
  """i.i.d. uniform over all symbols 0..n-1."""
  def sample(key, batch, length):
    return jax.random.randint(key, (batch, length), 0, num_symbols, dtype=jnp.int32)
  return sample


def from_set(symbols):
  """i.i.d. uniform over a subset of symbols (for example a generating set)."""
  symbols = np.asarray(symbols, np.int32)
  def sample(key, batch, length):
    return jnp.asarray(symbols)[jax.random.randint(key, (batch, length), 0, len(symbols))]
  return sample


def adversarial_parity(max_k: int = 8, max_m: int = 9):
  """(0^k 1^m)^* with k in 1..max_k and odd m in 1..max_m drawn per sequence (paper 001, L4.3)."""
  def sample(key, batch, length):
    kk, km, kp = jax.random.split(key, 3)
    k = jax.random.randint(kk, (batch, 1), 1, max_k + 1)
    m = 2 * jax.random.randint(km, (batch, 1), 0, (max_m + 1) // 2) + 1
    phase = jax.random.randint(kp, (batch, 1), 0, max_k + max_m)  # start anywhere in the period
    pos = (jnp.arange(length)[None, :] + phase) % (k + m)
    return (pos >= k).astype(jnp.int32)
  return sample


def constant(symbol: int):
  """Every token is `symbol` (modular counting feeds all ones)."""
  def sample(key, batch, length):
    del key
    return jnp.full((batch, length), symbol, jnp.int32)
  return sample


def flipflop(p_ignore: float = 0.8):
  """Flip-flop tokens 0=ignore, 1=write 0, 2=write 1; writes are rare so memory matters."""
  def sample(key, batch, length):
    k1, k2 = jax.random.split(key)
    write = jax.random.bernoulli(k1, 1.0 - p_ignore, (batch, length))
    bit = jax.random.randint(k2, (batch, length), 1, 3, dtype=jnp.int32)
    return jnp.where(write, bit, 0).astype(jnp.int32)
  return sample


# Offset prediction (paper 001, Sec. 5 and App. C): a stimulus of 1 for ISI steps after a gap of
# 0s (the ITI) of random length, repeated; every sequence starts with an ITI.
ISI = 10
ITI = (20, 40)  # the training ITI range, both ends included
LONG_ITI = (60, 100)  # the two_isi stream's second gap: longer than any trained ITI


def offset_signal(variant: str = "cycles", isi: int = ISI, iti=ITI, long_iti=LONG_ITI):
  """ITI/ISI cycles. variant 'two_isi': two ISIs, the second after a gap in `long_iti`, then
  0s; 'double_isi': the first ISI is followed at once by a second (2 x isi ones), then cycles."""
  def sample(key, batch, length):
    n = length // (iti[0] + isi) + 2  # cycles enough to fill the sequence
    k_gap, k_long = jax.random.split(key)
    gaps = jax.random.randint(k_gap, (batch, n), iti[0], iti[1] + 1)
    if variant == "two_isi":
      gaps = gaps.at[:, 1].set(jax.random.randint(k_long, (batch,), long_iti[0], long_iti[1] + 1))
      gaps = gaps.at[:, 2:].set(length)  # no third ISI inside the sequence
    elif variant == "double_isi":
      gaps = gaps.at[:, 1].set(0)
    starts = jnp.cumsum(gaps, axis=1) + isi * jnp.arange(n)  # ISI i begins here
    pos = jnp.arange(length)[None, None, :]
    on = (pos >= starts[..., None]) & (pos < starts[..., None] + isi)
    return on.any(axis=1).astype(jnp.int32)
  return sample


# The flip-flop monoid {identity, set0, set1}: x . ignore = x, x . setb = setb.
FLIPFLOP_TABLE = np.array([[0, 1, 2], [1, 1, 2], [2, 1, 2]], np.int32)
FLIPFLOP_READ = np.array([0, 0, 1], np.int32)  # the bit read out in each monoid state
