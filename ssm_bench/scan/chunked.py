"""Chunked scan in plain JAX, for every backend: memory O(b (t/L) d n) instead of O(b t d n).

A `lax.scan` over time chunks of L steps carries the state; each chunk's body is
`jax.checkpoint`ed and computes y inside the chunk, so the backward pass keeps only the states at
chunk boundaries and recomputes the L states of one chunk at a time. Even at L = 1 (the complex
families' chunk) it holds only the states, never a_t or b_t for the whole sequence.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ssm_bench.scan import factors as F

# Steps per chunk on CPU, per family: the fastest scan (forward + backward, chunks 1-8) on a
# 2-core CPU, whole training steps then timed against sequential (BUILD_NOTES, "Scan core"). The
# complex families run fastest one step per chunk: XLA's CPU code for an unrolled complex chunk
# was 2-7x slower.
CPU_CHUNK = {"decay": 4, "signed_decay": 4, "rotation": 1, "constant": 1}
# Elsewhere chunked is the memory-light method, not the default: a boundary state every 16 steps.
CHUNK = 16


def default_chunk(family: str) -> int:
  return CPU_CHUNK[family] if jax.default_backend() == "cpu" else CHUNK


def pad_time(f: F.Factors, multiple: int) -> F.Factors:
  """Append steps with x = 0 (and dt = theta = 0) so the length is a multiple of `multiple`;
  they change no output at a real position, and their outputs are cut off."""
  pad = -f.length % multiple
  if not pad:
    return f
  return f.with_steps(**{k: jnp.pad(v, [(0, 0), (0, pad)] + [(0, 0)] * (v.ndim - 2))
                         for k, v in f.steps().items()})


def scan(f: F.Factors, chunk: int | None = None):
  length = f.length
  chunk = min(chunk or default_chunk(f.family), length)
  f = pad_time(f, chunk)
  n_chunks = f.length // chunk
  # (b, t, ...) -> (chunks, b, L, ...): the scan runs over the leading axis
  split = lambda v: jnp.swapaxes(v.reshape(v.shape[0], n_chunks, chunk, *v.shape[2:]), 0, 1)
  steps = {k: split(v) for k, v in f.steps().items()}

  @jax.checkpoint
  def body(h, window):
    a, b, C = F.materialize(f.with_steps(**window))
    a = jnp.broadcast_to(a, b.shape)
    C = jnp.broadcast_to(C, b.shape)
    ys = []
    for k in range(chunk):  # unrolled: XLA fuses the L elementwise steps of one chunk
      h = a[:, k] * h + b[:, k]
      ys.append(F.readout(h, C[:, k]))
    return h, jnp.stack(ys, 1)

  h0 = f.batched_h0().astype(jnp.complex64 if f.is_complex else f.x.dtype)
  _, ys = jax.lax.scan(body, h0, steps)
  return jnp.swapaxes(ys, 0, 1).reshape(f.x.shape[0], n_chunks * chunk, -1)[:, :length]
