"""The chunked kernels' complex kind (`pallas_chunked` calls them): the `complex` family, a_t
any complex value per (step, state), shared over channels. The real kind's recurrence and
exclusive scan across chunks (`pallas_chunked_kernels.states`, `incoming_adjoint`) in complex
(re, im) arithmetic, with the phase kind's inputs, tiles and partial sums: no rotating frame,
which needs |a| = 1 to divide by the running product.

Backward, with g_t = dL/dRe h_t + i dL/dIm h_t: g_t = dy_t conj(C) + conj(a_{t+1}) g_{t+1},
dL/da_t = g_t conj(h_{t-1}) (summed over channels: one partial sum per program, as the phase
kind's phi), dL/dB = sum_t x_t g_t, dL/dC = sum_t dy_t conj(h_t), dL/dx_t = Re conj(B) g_t,
dL/dh0 = conj(a_0) g_0.
"""
from __future__ import annotations

import jax.numpy as jnp

from ssm_bench.scan.pallas_chunked_kernels import (INPUTS, add, first_chunk_sum,
                                                   incoming_adjoint, load, loop_passes, mul,
                                                   phase_reads, states, store, store_time_sums,
                                                   walk_complex_blocks)

COMPLEX_STEP = ("ar", "ai")  # a_t's real and imaginary rows


def _conj(v):
  return v[0], -v[1]


def _complex(inputs, x):
  """(a, B, C, h0, b) of a state from its reads: a_t (re, im) rows (1, G), B, C, h0 complex
  columns, b_t = B x_t per chunk step."""
  ar, ai, B, C, h0 = inputs
  return list(zip(ar, ai)), B, C, h0, [(B[0] * v, B[1] * v) for v in x]


def complex_forward(x_ref, ar_ref, ai_ref, Br_ref, Bi_ref, Cr_ref, Ci_ref, h0r_ref, h0i_ref,
                    y_ref, *, neg, n_states, per_pass="one"):
  del neg
  refs = dict(zip(INPUTS["complex"][1:], (ar_ref, ai_ref, Br_ref, Bi_ref, Cr_ref, Ci_ref,
                                          h0r_ref, h0i_ref)))
  x = load(x_ref)

  def body(n, inputs, ys):
    a, _, C, h0, b = _complex(inputs, x)
    _, after, _ = states(a, b, h0, len(x))  # y_t = Re C h_t
    return tuple(y + C[0] * h[0] - C[1] * h[1] for y, h in zip(ys, after))
  ys = loop_passes(n_states, phase_reads(refs, len(x), per_step=COMPLEX_STEP), body,
                   (jnp.zeros(x[0].shape, jnp.float32),) * len(x), per_pass)
  store(y_ref, ys)


def complex_backward(x_ref, ar_ref, ai_ref, Br_ref, Bi_ref, Cr_ref, Ci_ref, h0r_ref, h0i_ref,
                     dy_ref, dx_ref, dar_ref, dai_ref, dBr_ref, dBi_ref, dCr_ref, dCi_ref,
                     *dh0_refs, neg, n_states, blocks, barrier, per_pass="one"):
  """h_{t-1}, h_t (`states`) and g_t chunk by chunk (`incoming_adjoint` with conj a), then the
  gradients; a's is one partial sum over the program's channels per (state, step), its
  channels walked in `blocks` blocks, B's and C's sums over time."""
  del neg
  walk_complex_blocks("complex", _complex_block, (ar_ref, ai_ref, Br_ref, Bi_ref, Cr_ref,
                                                   Ci_ref, h0r_ref, h0i_ref), x_ref, dy_ref,
                       dx_ref, (dar_ref, dai_ref), (dBr_ref, dBi_ref, dCr_ref, dCi_ref), dh0_refs,
                       n_states, blocks, barrier, per_pass)


def _complex_block(refs, x_ref, dy_ref, dx_ref, da_refs, dBC_refs, dh0_refs, channels, adding,
                   n_states, per_pass):
  steps = x_ref.shape[-1]
  x, dy = load(x_ref, channels), load(dy_ref, channels)

  def body(n, inputs, dx):
    dx = list(dx)
    a, B, C, h0, b = _complex(inputs, x)
    before, after, product = states(a, b, h0, steps)
    u = [(v * C[0], -v * C[1]) for v in dy]  # dy_t conj(C)
    a_conj = [_conj(v) for v in a]
    incoming = incoming_adjoint(a_conj, u, _conj(product), steps)
    da, sums = [None] * steps, None  # x g and dy conj(h) summed over the chunk steps: dB, dC
    for k in range(steps - 1, -1, -1):
      g = add(u[k], incoming)
      incoming = mul(a_conj[k], g)
      da[k] = mul(g, _conj(before[k]))
      h = after[k]
      terms = (x[k] * g[0], x[k] * g[1], dy[k] * h[0], -dy[k] * h[1])
      sums = terms if sums is None else tuple(s + t for s, t in zip(sums, terms))
      dx[k] = dx[k] + g[0] * B[0] + g[1] * B[1]
    for part, ref in enumerate(da_refs):
      store_time_sums(ref, n, [v[part] for v in da], adding)
    for ref, s in zip(dBC_refs, sums):
      ref[n, channels] = jnp.sum(s, axis=1)
    for ref, value in zip(dh0_refs, incoming):  # conj(a_0) g_0
      ref[n, channels] = first_chunk_sum(value)
    return tuple(dx)
  out = loop_passes(n_states, phase_reads(refs, steps, channels, COMPLEX_STEP), body,
                    (jnp.zeros(x[0].shape, jnp.float32),) * steps, per_pass)
  store(dx_ref, out, channels)
