"""The chunked kernels' bodies (`pallas_chunked` calls them): per program a (channels, time) tile
read as L strided (channels, G) slices, step k of each of G chunks of L steps (t = c L + k), and
a loop over the states n. Per state the recurrence walks k = 0..L-1 elementwise in registers and
one exclusive scan of the G chunks' summaries crosses lanes (`exclusive_recurrence_scan`).

Two kinds, one recurrence code: the real kind (decay, signed decay: a_t per (step, channel)) and
the phase kind (rotation: a_t = exp(i theta_t[n]) per (step, state), shared over channels, so a
chunk's product of a is one (1, G) row; B, C and h0 complex per (channel, state)). Complex values
are (re, im) pairs, multiplied by `ARITH`, the arithmetic the scan primitives' combines use.
The backward's adjoint runs through conj(a) (real: a itself): g_t = u_t + a_{t+1}^* g_{t+1}.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from ssm_bench.scan import pallas as sequential_kernel
from ssm_bench.scan.pallas_parallel_kernels import INPUTS as _PARALLEL_INPUTS
from ssm_bench.scan.recurrence_scan import ARITH, exclusive_recurrence_scan

KINDS = ("real", "phase")
INPUTS = {kind: _PARALLEL_INPUTS[kind] for kind in KINDS}  # the phase kind reads cos, sin
mul, add = ARITH.mul, ARITH.add


def conj(v):
  return (v[0], -v[1]) if isinstance(v, tuple) else v


def _like(v, like):
  """v broadcast to the shape of `like` (the scan's operands share one shape)."""
  if isinstance(v, tuple):
    return tuple(jnp.broadcast_to(p, like[0].shape) for p in v)
  return jnp.broadcast_to(v, like.shape)


def strided(k, chunks, steps):
  return pl.ds(k, chunks, stride=steps)


def load(ref, chunks, steps):
  """A (channels, time) ref's L strided (channels, G) tiles."""
  return [ref[:, strided(k, chunks, steps)] for k in range(steps)]


def store(ref, tiles, chunks, steps):
  for k, tile in enumerate(tiles):
    ref[:, strided(k, chunks, steps)] = tile


def states(a, b, h0, steps):
  """h_{t-1} and h_t per chunk step, and each chunk's product of a: each chunk's local
  recurrence from 0, the exclusive scan of the chunks' (product of a, end state), then the
  recurrence again from the true start."""
  local, product = b[0], a[0]
  for k in range(1, steps):
    local, product = add(mul(a[k], local), b[k]), mul(product, a[k])
  q, r = exclusive_recurrence_scan(_like(product, local), local, axis=1)
  h = add(mul(q, h0), r)
  before, after = [], []
  for k in range(steps):
    before.append(h)
    h = add(mul(a[k], h), b[k])
    after.append(h)
  return before, after, product


def incoming_adjoint(a, u, product, steps):
  """a_{t+1}^* g_{t+1} past each chunk's last step, what its successors pass back: the chunk's
  adjoint from 0 (g_t = u_t + a_{t+1}^* g_{t+1}), then the reversed exclusive scan of the
  chunks' (product of a^*, a_0^* g_0)."""
  local = u[steps - 1]
  for k in range(steps - 2, -1, -1):
    local = add(u[k], mul(conj(a[k + 1]), local))
  passed = mul(conj(a[0]), local)
  return exclusive_recurrence_scan(_like(conj(product), passed), passed, axis=1, reverse=True)[1]


def first_chunk_sum(v):
  """Per channel, v's entry in the first chunk: a_0^* g_0 there is h0's gradient."""
  first = jax.lax.broadcasted_iota(jnp.int32, v.shape, 1) == 0
  return jnp.sum(jnp.where(first, v, 0.0), axis=1)


# ---- the real kind: decay, signed decay ----------------------------------------------------

def _real(refs, n, x, dt, neg, chunks, steps):
  """(lam, e, a, b, B rows, C rows, h0) of state n; e = exp(dt lam), a = e or 2 e - 1."""
  lam = refs["lam"][n, :][:, None]
  rows = {name: [refs[name][n, strided(k, chunks, steps)][None, :] for k in range(steps)]
          for name in ("B", "C")}
  e = [jnp.exp2(dt[k] * sequential_kernel.log2_scaled(lam)) for k in range(steps)]
  a = [2.0 * v - 1.0 for v in e] if neg else e
  b = [x[k] * rows["B"][k] for k in range(steps)]
  return lam, e, a, b, rows["B"], rows["C"], refs["h0"][n, :][:, None]


def real_forward(x_ref, dt_ref, lam_ref, B_ref, C_ref, h0_ref, y_ref, *, neg, steps, n_states):
  refs = dict(lam=lam_ref, B=B_ref, C=C_ref, h0=h0_ref)
  chunks = x_ref.shape[-1] // steps
  x, dt = load(x_ref, chunks, steps), load(dt_ref, chunks, steps)

  def body(n, ys):
    _, _, a, b, _, C, h0 = _real(refs, n, x, dt, neg, chunks, steps)
    _, after, _ = states(a, b, h0, steps)
    return tuple(y + h * c for y, h, c in zip(ys, after, C))
  ys = jax.lax.fori_loop(0, n_states, body, (jnp.zeros(x[0].shape, jnp.float32),) * steps)
  store(y_ref, ys, chunks, steps)


def real_backward(x_ref, dt_ref, lam_ref, B_ref, C_ref, h0_ref, dy_ref, dx_ref, ddt_ref,
                  dlam_ref, dB_ref, dC_ref, *dh0_ref, neg, steps, n_states):
  """Per state: h_{t-1}, h_t (`states`), the adjoint g_t = dy_t C_t + a_{t+1} g_{t+1} chunk by
  chunk, then the gradients; shared rows (dB, dC) are one partial sum per program."""
  refs = dict(lam=lam_ref, B=B_ref, C=C_ref, h0=h0_ref)
  chunks = x_ref.shape[-1] // steps
  x, dt, dy = (load(ref, chunks, steps) for ref in (x_ref, dt_ref, dy_ref))

  def body(n, carry):
    dx, ddt = list(carry[:steps]), list(carry[steps:])
    lam, e, a, b, B, C, h0 = _real(refs, n, x, dt, neg, chunks, steps)
    before, after, product = states(a, b, h0, steps)
    u = [dy[k] * C[k] for k in range(steps)]
    incoming = incoming_adjoint(a, u, product, steps)
    dlam = None
    for k in range(steps - 1, -1, -1):
      g = u[k] + incoming
      incoming = a[k] * g
      de = (2.0 * e[k] if neg else a[k]) * g * before[k]  # dL/d(dt lam) through a_t
      dlam = de * dt[k] if dlam is None else dlam + de * dt[k]
      ddt[k] = ddt[k] + de * lam
      dx[k] = dx[k] + g * B[k]
      dB_ref[n, strided(k, chunks, steps)] = jnp.sum(g * x[k], axis=0)
      dC_ref[n, strided(k, chunks, steps)] = jnp.sum(dy[k] * after[k], axis=0)
    dlam_ref[n, :] = jnp.sum(dlam, axis=1)
    if dh0_ref:
      dh0_ref[0][n, :] = first_chunk_sum(incoming)
    return tuple(dx) + tuple(ddt)
  zeros = jnp.zeros(x[0].shape, jnp.float32)
  out = jax.lax.fori_loop(0, n_states, body, (zeros,) * (2 * steps))
  store(dx_ref, out[:steps], chunks, steps)
  store(ddt_ref, out[steps:], chunks, steps)


# ---- the phase kind: rotation ----------------------------------------------------------------

def _phase(refs, n, x, chunks, steps):
  """(a, b, B, C, h0) of state n: a_t = (cos, sin) rows (1, G), the rest complex columns."""
  column = lambda name: refs[name][n, :][:, None]
  row = lambda name, k: refs[name][n, strided(k, chunks, steps)][None, :]
  a = [(row("cos", k), row("sin", k)) for k in range(steps)]
  B, C, h0 = ((column(name + "r"), column(name + "i")) for name in ("B", "C", "h0"))
  b = [(x[k] * B[0], x[k] * B[1]) for k in range(steps)]
  return a, b, B, C, h0


def phase_forward(x_ref, cos_ref, sin_ref, Br_ref, Bi_ref, Cr_ref, Ci_ref, h0r_ref, h0i_ref,
                  y_ref, *, neg, steps, n_states):
  del neg
  refs = dict(zip(INPUTS["phase"][1:], (cos_ref, sin_ref, Br_ref, Bi_ref, Cr_ref, Ci_ref,
                                        h0r_ref, h0i_ref)))
  chunks = x_ref.shape[-1] // steps
  x = load(x_ref, chunks, steps)

  def body(n, ys):
    a, b, _, (cr, ci), h0 = _phase(refs, n, x, chunks, steps)
    _, after, _ = states(a, b, h0, steps)
    return tuple(y + cr * h[0] - ci * h[1] for y, h in zip(ys, after))  # y = Re C h
  ys = jax.lax.fori_loop(0, n_states, body, (jnp.zeros(x[0].shape, jnp.float32),) * steps)
  store(y_ref, ys, chunks, steps)


def phase_backward(x_ref, cos_ref, sin_ref, Br_ref, Bi_ref, Cr_ref, Ci_ref, h0r_ref, h0i_ref,
                   dy_ref, dx_ref, dth_ref, dBr_ref, dBi_ref, dCr_ref, dCi_ref, *dh0_refs, neg,
                   steps, n_states):
  """As the real kind's, in complex pairs: u_t = dL/dh_t = dy_t conj(C), the adjoint through
  conj(a), dL/da_t = g_t conj(h_{t-1}) (a conjugate cogradient); theta's gradient is one
  partial sum over the program's channels per (state, step), B's and C's sums over time."""
  del neg
  refs = dict(zip(INPUTS["phase"][1:], (cos_ref, sin_ref, Br_ref, Bi_ref, Cr_ref, Ci_ref,
                                        h0r_ref, h0i_ref)))
  chunks = x_ref.shape[-1] // steps
  x, dy = load(x_ref, chunks, steps), load(dy_ref, chunks, steps)

  def body(n, dx):
    dx = list(dx)
    a, b, (br, bi), (cr, ci), h0 = _phase(refs, n, x, chunks, steps)
    before, after, product = states(a, b, h0, steps)
    u = [(dy[k] * cr, -dy[k] * ci) for k in range(steps)]
    incoming = incoming_adjoint(a, u, product, steps)
    sums = None  # x g and dy conj(h), summed over the chunk steps: dB and dC per channel
    for k in range(steps - 1, -1, -1):
      g = add(u[k], incoming)
      incoming = mul(conj(a[k]), g)
      (gr, gi), (pr, pi), (ar, ai) = g, before[k], a[k]
      dar, dai = gr * pr + gi * pi, gi * pr - gr * pi
      dth_ref[n, strided(k, chunks, steps)] = jnp.sum(dai * ar - dar * ai, axis=0)
      terms = (x[k] * gr, x[k] * gi, dy[k] * after[k][0], -dy[k] * after[k][1])
      sums = terms if sums is None else tuple(s + t for s, t in zip(sums, terms))
      dx[k] = dx[k] + gr * br + gi * bi
    for ref, s in zip((dBr_ref, dBi_ref, dCr_ref, dCi_ref), sums):
      ref[n, :] = jnp.sum(s, axis=1)
    for ref, v in zip(dh0_refs, incoming):
      ref[n, :] = first_chunk_sum(v)
    return tuple(dx)
  out = jax.lax.fori_loop(0, n_states, body, (jnp.zeros(x[0].shape, jnp.float32),) * steps)
  store(dx_ref, out, chunks, steps)


FORWARD = {"real": real_forward, "phase": phase_forward}
BACKWARD = {"real": real_backward, "phase": phase_backward}
