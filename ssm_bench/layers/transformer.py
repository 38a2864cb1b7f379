"""Multi-head self-attention as a layer of the stack (the Illusion paper's transformer baseline).

    q, k, v = W_q x, W_k x, W_v x  (x = v_t, plus a learned position embedding for 'learned'),
    a_ts = softmax_s(q_t . k_s / sqrt(d_head) over s <= t (causal)),  y_t = W_o sum_s a_ts v_s + D v_t.

The stack's block (x + out(act(layer(norm(x))))) supplies the feed-forward part. Positional
scheme (`position`): 'nope' (default: no positional information but the causal mask; NoPE
length-generalises better than learned or rotary positions in Kazemnejad et al. 2023, and the
suite trains at 60 and evaluates to 1000), 'rope' (rotary, base 10,000) or 'learned' (a
table of `max_positions` rows; rows past the training length never train). Long sequences are
attended block of queries by block (`BLOCK`), so evaluating at 10,000 never holds a T x T matrix.
`sink` (default on): every query also attends to a learned key/value per head (a BOS token's
part), so the weights dilute with the prefix length; without it a NoPE layer returns the same
mean for the prefixes `1` and `1 1` and cannot count (BUILD_NOTES, "transformer").
"""
from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

BLOCK = 512  # queries per block beyond this length
POSITIONS = ("nope", "rope", "learned")


def rope(x, base: float = 10000.0):
  """Rotary embedding of (b, h, t, dh) by position t: pairs (x_i, x_{i + dh/2}) rotated."""
  t, dh = x.shape[-2], x.shape[-1]
  half = dh // 2
  freq = base ** (-jnp.arange(half, dtype=jnp.float32) / half)
  ang = jnp.arange(t, dtype=jnp.float32)[:, None] * freq  # (t, half)
  cos, sin = jnp.cos(ang), jnp.sin(ang)
  x1, x2 = x[..., :half], x[..., half:2 * half]
  return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos, x[..., 2 * half:]], -1)


def attend(q, k, v, causal: bool, sink=None):
  """softmax(q k^T / sqrt(dh)) v over (b, h, t, dh), causal masked, in query blocks if long;
  sink: (key, value), each (h, dh), one more key every query sees."""
  t, scale = q.shape[2], 1.0 / math.sqrt(q.shape[-1])

  def block(qs, start):
    logits = jnp.einsum("bhqd,bhkd->bhqk", qs, k) * scale
    if causal:
      rows = start + jnp.arange(qs.shape[2])
      logits = jnp.where(rows[:, None] >= jnp.arange(t)[None, :], logits, -jnp.inf)
    if sink is not None:
      first = jnp.einsum("bhqd,hd->bhq", qs, sink[0])[..., None] * scale
      w = jax.nn.softmax(jnp.concatenate([first, logits], -1), axis=-1)
      return (jnp.einsum("bhqk,bhkd->bhqd", w[..., 1:], v)
              + w[..., :1] * sink[1][None, :, None, :])
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(logits, axis=-1), v)

  if t <= BLOCK:
    return block(q, 0)
  nb = -(-t // BLOCK)
  qp = jnp.pad(q, ((0, 0), (0, 0), (0, nb * BLOCK - t), (0, 0)))
  qb = jnp.moveaxis(qp.reshape(q.shape[:2] + (nb, BLOCK, q.shape[-1])), 2, 0)
  out = jax.lax.map(lambda a: block(a[0], a[1]), (qb, jnp.arange(nb) * BLOCK))
  return jnp.moveaxis(out, 0, 2).reshape(q.shape[:2] + (nb * BLOCK, v.shape[-1]))[:, :, :t]


class Attention(nn.Module):
  cfg: object
  heads: int = 4
  position: str = "nope"
  causal: bool = True
  max_positions: int = 16384
  sink: bool = True  # BUILD_NOTES, "transformer"

  @nn.compact
  def __call__(self, v):
    b, t, d = v.shape
    if self.position not in POSITIONS:
      raise ValueError(f"unknown position {self.position!r}; choose one of {', '.join(POSITIONS)}")
    if self.heads < 1 or self.max_positions < 1:
      raise ValueError(f"heads and max_positions must be at least 1, got heads={self.heads}, "
                       f"max_positions={self.max_positions}")
    if d % self.heads:
      raise ValueError(f"d_model {d} is not a multiple of heads {self.heads}")
    if self.position == "rope" and d // self.heads < 2:  # one dimension: nothing to rotate
      raise ValueError(f"position 'rope' rotates pairs of a head's dimensions: d_model {d} / "
                       f"heads {self.heads} leaves 1")
    x = v
    if self.position == "learned":
      if t > self.max_positions:
        raise ValueError(f"length {t} exceeds max_positions {self.max_positions}")
      x = x + nn.Embed(self.max_positions, d, name="pos")(jnp.arange(t))[None]
    split = lambda y: jnp.swapaxes(y.reshape(b, t, self.heads, d // self.heads), 1, 2)
    q, k, val = (split(nn.Dense(d, name=n)(x)) for n in ("q", "k", "v"))
    if self.position == "rope":
      q, k = rope(q), rope(k)
    sink = None
    if self.sink:
      dh = d // self.heads
      sink = (self.param("sink_k", nn.initializers.zeros, (self.heads, dh)),
              self.param("sink_v", nn.initializers.zeros, (self.heads, dh)))
    y = jnp.swapaxes(attend(q, k, val, self.causal, sink), 1, 2).reshape(b, t, d)
    D = self.param("D", nn.initializers.ones, (d,))
    return nn.Dense(d, name="o")(y) + D * v
