"""The chunked kernels' bodies (`pallas_chunked` calls them): per program a (channels, G, L) tile,
time as G chunks of L steps (t = c L + k; `pallas_chunked._chunked`), read as L (channels, G)
tiles, step k of every chunk, and a loop over the states n. Per state the recurrence walks
k = 0..L-1 elementwise in registers and one scan of the G chunks' summaries crosses lanes. G is
a power of two (Triton's tiles are), L need not be. A sum over the tile's other axis of a loop
pass's L steps is one reduction of the L tiles stacked (with zero tiles up to a power of two),
written as one contiguous row (`store_time_sums`): per reduction across lanes or warps, one
exchange instead of L.

The real kind (decay, signed decay: a_t per (step, channel)) scans (product of a, end state)
with `exclusive_recurrence_scan`; its backward also comes looping over channels with (states,
G) tiles (`real_backward_by_channel`), and its forward looping over time with no tiles of time
at all (`real_forward_by_time`). Each loop (`loop_passes`) takes one state a pass, or one
with the next one's inputs read ahead, or two. The phase kind (rotation: a_t = exp(i
theta_t[n]), shared over channels; B, C and h0 complex per (channel, state), as (re, im) pairs
multiplied by `ARITH`) needs no product at all: in the frame that rotates with the running
product of a, its recurrence is a running sum, scanned across chunks by a cumsum of two
operands. The complex kind (the `complex` family: a_t any complex value per (step, state)) has
no such frame, as |a| need not be 1: it is the real kind's recurrence and exclusive scan in
complex (re, im) arithmetic, with the phase kind's inputs (`pallas_chunked_complex`).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ssm_bench.scan import pallas as sequential_kernel
from ssm_bench.scan import pallas_kernels
from ssm_bench.scan.mamba_rule import discretize, handed_grads
from ssm_bench.scan.pallas_parallel_kernels import INPUTS as _PARALLEL_INPUTS
from ssm_bench.scan.pallas_parallel_kernels import accumulate, walk_blocks
from ssm_bench.scan.recurrence_scan import ARITH, exclusive_recurrence_scan

KINDS = ("real", "phase", "complex")
# the inputs' names as `pallas_parallel`'s: the phase kind's cos and sin are of phi here, the
# running sum of theta (`pallas_chunked._kernel_inputs`); the complex kind (this module's only)
# reads a's real and imaginary parts where the phase kind reads cos and sin
INPUTS = {kind: _PARALLEL_INPUTS[kind] for kind in KINDS[:2]}
INPUTS["complex"] = ("x", "ar", "ai") + INPUTS["phase"][3:]
mul, add = ARITH.mul, ARITH.add  # of complex (re, im) pairs


def load(ref, channels=slice(None)):
  """A (channels, G, L) ref's L (channels, G) tiles, step k of every chunk, of a block of its
  channels."""
  return [ref[channels, :, k] for k in range(ref.shape[-1])]


def store(ref, tiles, channels=slice(None)):
  for k, tile in enumerate(tiles):
    ref[channels, :, k] = tile


def rows(ref, n, steps):
  """Row n of a (rows, G, L) ref as L (1, G) tiles: a state's B or C, shared over channels."""
  return [ref[n, :, k][None, :] for k in range(steps)]


def _join(tiles):
  """Equal-shaped (..., G) tiles, step k of each of G chunks for k < L (a power of two), stacked
  on L's bits as trailing axes of 2, the most significant first: (..., G, 2, ..., 2) flattens
  over its last axes in time order (t = c L + k). Triton's join keeps each stacked element in
  the thread that held it."""
  if len(tiles) == 1:
    return tiles[0]
  return jnp.stack([_join(tiles[0::2]), _join(tiles[1::2])], axis=-1)


def joined_time_sums(tiles):
  """The sums over the first axis of w (rows, G) tiles (w a power of two) as one reduction, a
  (G w,) row in time order: where the axis crosses warps, one exchange through shared memory
  (and its barriers) instead of one per tile, and one contiguous store instead of w strided."""
  return jnp.sum(_join(tiles), axis=0).reshape(-1)


def row_steps(steps):
  """Steps per chunk in a row of sums (`store_time_sums`): L up to a power of two."""
  return sequential_kernel._pow2(steps)


def store_time_sums(ref, row, tiles, add=False):
  """ref[row] = the sums over the first axis of L (rows, G) tiles as one joined reduction
  (`joined_time_sums`), or with `add` (`accumulate`) plus what is there. Triton's joins, as its
  tiles, are powers of two: for another L the tiles are joined with zero ones up to the next
  power of two L', and the (G L',) row holds them (`pallas_chunked._time_order` drops them
  outside), where one reduction per step or per power-of-two run of steps counted more."""
  zeros = [jnp.zeros_like(tiles[0])] * (row_steps(len(tiles)) - len(tiles))
  accumulate(ref, (row, slice(None)), joined_time_sums(list(tiles) + zeros), add)


def first_chunk_sum(v):
  """Per channel, v's entry in the first chunk (where h0's gradient is what step 0 passes back)."""
  first = jax.lax.broadcasted_iota(jnp.int32, v.shape, 1) == 0
  return jnp.sum(jnp.where(first, v, 0.0), axis=1)


# ---- the real kind: decay, signed decay ----------------------------------------------------

def states(a, b, h0, steps):
  """h_{t-1} and h_t per chunk step, and each chunk's product of a: each chunk's local
  recurrence from 0, the exclusive scan of the chunks' (product of a, end state), then the
  recurrence again from the true start. Real tiles, or (re, im) pairs (the complex kind)."""
  local, product = b[0], a[0]
  for k in range(1, steps):
    local, product = add(mul(a[k], local), b[k]), mul(product, a[k])
  q, r = exclusive_recurrence_scan(product, local, axis=1)
  h = add(mul(q, h0), r)
  before, after = [], []
  for k in range(steps):
    before.append(h)
    h = add(mul(a[k], h), b[k])
    after.append(h)
  return before, after, product


def incoming_adjoint(a, u, product, steps):
  """a_{t+1} g_{t+1} past each chunk's last step, what its successors pass back: the chunk's
  adjoint from 0 (g_t = u_t + a_{t+1} g_{t+1}), then the reversed exclusive scan of the chunks'
  (product of a, a_0 g_0). Real tiles, or (re, im) pairs (the complex kind passes conj a)."""
  local = u[steps - 1]
  for k in range(steps - 2, -1, -1):
    local = add(u[k], mul(a[k + 1], local))
  return exclusive_recurrence_scan(product, mul(a[0], local), axis=1, reverse=True)[1]


def adjoint_steps(a, e, b, u, h0, neg, steps):
  """The real kind's backward per chunk step, the last first: (k, g_t, dL/d(dt lam) through
  a_t, h_t, a_t g_t), from h_{t-1} and h_t (`states`) and the adjoint g_t = u_t + a_{t+1}
  g_{t+1} chunk by chunk (u_t = dy_t C_t); the last a_0 g_0 is what h0's gradient sums."""
  before, after, product = states(a, b, h0, steps)
  incoming = incoming_adjoint(a, u, product, steps)
  for k in range(steps - 1, -1, -1):
    g = u[k] + incoming
    incoming = a[k] * g
    yield k, g, (2.0 * e[k] if neg else a[k]) * g * before[k], after[k], incoming


PASSES = ("one", "ahead", "two")  # what a pass of a kernel's loop takes (`loop_passes`)


def loop_passes(n, read, body, init, per_pass="one"):
  """fori_loop over the loop's n states (or channels) i of body(i, read(i), carry), where `read`
  loads i's inputs. per_pass: "one" state a pass; "ahead", one, with the next one's inputs read
  while it computes (carried to the next pass: their loads' latency hides behind a pass of
  arithmetic instead of stalling its start); "two", two states a pass (two independent
  recurrences to interleave, and the loop's own instructions once per two)."""
  if per_pass == "one":
    return jax.lax.fori_loop(0, n, lambda i, c: body(i, read(i), c), init)
  if per_pass == "two":
    out = jax.lax.fori_loop(0, n // 2, lambda j, c: body(
        2 * j + 1, read(2 * j + 1), body(2 * j, read(2 * j), c)), init)
    return body(n - 1, read(n - 1), out) if n % 2 else out
  if per_pass != "ahead":
    raise ValueError(f"per_pass {per_pass!r}; choose one of {', '.join(PASSES)}")

  def step(i, carry):
    carry, now = carry
    ahead = read(jnp.minimum(i + 1, n - 1))
    return body(i, now, carry), ahead
  return jax.lax.fori_loop(0, n, step, (init, read(0)))[0]


def _real_reads(refs, steps, channels=slice(None)):
  """read(n): state n's (lam, B rows, C rows, h0)."""
  return lambda n: (refs["lam"][n, channels][:, None], rows(refs["B"], n, steps),
                    rows(refs["C"], n, steps), refs["h0"][n, channels][:, None])


def _real(inputs, x, dt, neg):
  """(lam, e, a, b, B rows, C rows, h0) of a state from its inputs (`_real_reads`); e = exp(dt
  lam), a = e or 2 e - 1."""
  steps = len(x)
  lam, B, C, h0 = inputs
  e = [jnp.exp2(dt[k] * pallas_kernels.log2_scaled(lam)) for k in range(steps)]
  a = [2.0 * v - 1.0 for v in e] if neg else e
  b = [x[k] * B[k] for k in range(steps)]
  return lam, e, a, b, B, C, h0


def real_forward(x_ref, dt_ref, lam_ref, B_ref, C_ref, h0_ref, y_ref, *, neg, n_states,
                 per_pass="one", rule="given"):
  refs = dict(lam=lam_ref, B=B_ref, C=C_ref, h0=h0_ref)
  x, dt = discretize(load(x_ref), load(dt_ref), rule)

  def body(n, inputs, ys):
    _, _, a, b, _, C, h0 = _real(inputs, x, dt, neg)
    _, after, _ = states(a, b, h0, len(x))
    return tuple(y + h * c for y, h, c in zip(ys, after, C))
  ys = loop_passes(n_states, _real_reads(refs, len(x)), body,
                   (jnp.zeros(x[0].shape, jnp.float32),) * len(x), per_pass)
  store(y_ref, ys)


def real_forward_by_time(x_ref, dt_ref, lam_ref, B_ref, C_ref, h0_ref, y_ref, *, neg, n_states,
                         per_pass="one", rule="given"):
  """`real_forward` walking time instead of states: a program's channels one per lane, its
  steps one by one (t = c L + k of the (G, L) view), and all N states of each channel unrolled
  as N (channels,) vectors in that lane's registers, so the recurrence needs no scan across
  chunks and y_t's sum over the states none across lanes; B_t and C_t are scalars read in the
  step, shared by every lane. A pass of its loop (`loop_passes`) takes a step, or a step with
  the next one's x and dt read ahead (a lane's strided loads: B and C ahead would hold 2 N more
  registers), or two steps."""
  G, L = x_ref.shape[1:]
  lam = [pallas_kernels.log2_scaled(lam_ref[n, :]) for n in range(n_states)]
  at = lambda t: (jax.lax.div(t, L), jax.lax.rem(t, L))  # (chunk, step in it); t >= 0

  def read(t):
    c, k = at(t)
    (x,), (dt,) = discretize([x_ref[:, c, k]], [dt_ref[:, c, k]], rule)
    return x, dt

  def step(t, inputs, h):
    (c, k), (x, dt) = at(t), inputs
    y, out = None, []
    for n in range(n_states):
      e = jnp.exp2(dt * lam[n])
      hn = (2.0 * e - 1.0 if neg else e) * h[n] + x * B_ref[n, c, k]
      y = C_ref[n, c, k] * hn if y is None else y + C_ref[n, c, k] * hn
      out.append(hn)
    y_ref[:, c, k] = y
    return tuple(out)
  loop_passes(G * L, read, step, tuple(h0_ref[n, :] for n in range(n_states)), per_pass)


def real_backward(x_ref, dt_ref, lam_ref, B_ref, C_ref, h0_ref, dy_ref, dx_ref, ddt_ref,
                  dlam_ref, dB_ref, dC_ref, *dh0_ref, neg, n_states, blocks, barrier,
                  per_pass="one", rule="given"):
  """Per state: h_{t-1}, h_t (`states`), the adjoint g_t = dy_t C_t + a_{t+1} g_{t+1} chunk by
  chunk, then the gradients; shared rows (dB, dC) are one partial sum per program (a state's L
  steps summed over channels at once and written as one row: `joined_time_sums`), its channels
  walked in `blocks` blocks (`walk_blocks`)."""
  refs = dict(lam=lam_ref, B=B_ref, C=C_ref, h0=h0_ref)
  walk_blocks(lambda channels, adding: _real_block(
      refs, x_ref, dt_ref, dy_ref, dx_ref, ddt_ref, dlam_ref, dB_ref, dC_ref, dh0_ref, channels,
      adding, neg=neg, n_states=n_states, per_pass=per_pass, rule=rule), x_ref.shape[0],
      blocks, barrier)


def _real_block(refs, x_ref, dt_ref, dy_ref, dx_ref, ddt_ref, dlam_ref, dB_ref, dC_ref, dh0_ref,
                channels, adding, neg, n_states, per_pass, rule):
  steps = x_ref.shape[-1]
  x, dt = discretize(load(x_ref, channels), load(dt_ref, channels), rule)
  dy = load(dy_ref, channels)

  def body(n, inputs, carry):
    dx, ddt = list(carry[:steps]), list(carry[steps:])
    lam, e, a, b, B, C, h0 = _real(inputs, x, dt, neg)
    dlam, dB, dC = None, [None] * steps, [None] * steps
    for k, g, de, h, incoming in adjoint_steps(a, e, b, [dy[k] * C[k] for k in range(steps)],
                                               h0, neg, steps):
      dlam = de * dt[k] if dlam is None else dlam + de * dt[k]
      ddt[k] = ddt[k] + de * lam
      dx[k] = dx[k] + g * B[k]
      dB[k], dC[k] = g * x[k], dy[k] * h
    store_time_sums(dB_ref, n, dB, adding)
    store_time_sums(dC_ref, n, dC, adding)
    dlam_ref[n, channels] = jnp.sum(dlam, axis=1)
    if dh0_ref:
      dh0_ref[0][n, channels] = first_chunk_sum(incoming)
    return tuple(dx) + tuple(ddt)
  zeros = jnp.zeros(x[0].shape, jnp.float32)
  out = loop_passes(n_states, _real_reads(refs, steps, channels), body,
                    (zeros,) * (2 * steps), per_pass)
  dx, ddt = handed_grads(out[:steps], out[steps:], x, dt, rule)
  store(dx_ref, dx, channels)
  store(ddt_ref, ddt, channels)


def real_backward_by_channel(x_ref, dt_ref, lam_ref, B_ref, C_ref, h0_ref, dy_ref, dx_ref,
                             ddt_ref, dlam_ref, dB_ref, dC_ref, *dh0_ref, neg, n_states,
                             per_pass="one"):
  """`real_backward` with the roles of states and channels swapped: a program's tiles are
  (states, G) (all N states across lanes) and it loops over its channels. The gradients shared
  over channels (dB, dC) then add up elementwise in registers across the loop and are written
  once per program, where the state loop leaves one partial sum per 8-channel block (at the
  paper cell 16 per batch row: 3.6 GB written and summed again per 27-run mamba step, about 9%
  of it; results/bench/README.md); per-channel ones (dx, dt's) are sums over the states, a
  channel's L steps at once (`joined_time_sums`: the states span warps, and each reduction
  across warps goes through shared memory behind barriers)."""
  del n_states
  steps = x_ref.shape[-1]
  B, C = load(B_ref), load(C_ref)

  def read(d):  # channel d's (x, dt, dy rows, lam, h0)
    return tuple(rows(ref, d, steps) for ref in (x_ref, dt_ref, dy_ref)) + (
        lam_ref[:, d][:, None], h0_ref[:, d][:, None])

  def body(d, inputs, carry):
    dB, dC = list(carry[:steps]), list(carry[steps:])
    x, dt, dy, lam, h0 = inputs
    e = [jnp.exp2(dt[k] * pallas_kernels.log2_scaled(lam)) for k in range(steps)]
    a = [2.0 * v - 1.0 for v in e] if neg else e
    dlam, dx, ddt = None, [None] * steps, [None] * steps  # summed over the states at once
    for k, g, de, h, incoming in adjoint_steps(a, e, [x[k] * B[k] for k in range(steps)],
                                               [dy[k] * C[k] for k in range(steps)], h0, neg,
                                               steps):
      dlam = de * dt[k] if dlam is None else dlam + de * dt[k]
      dx[k], ddt[k] = g * B[k], de * lam
      dB[k] = dB[k] + g * x[k]
      dC[k] = dC[k] + dy[k] * h
    store_time_sums(dx_ref, d, dx)
    store_time_sums(ddt_ref, d, ddt)
    dlam_ref[:, d] = jnp.sum(dlam, axis=1)
    if dh0_ref:
      dh0_ref[0][:, d] = first_chunk_sum(incoming)
    return tuple(dB) + tuple(dC)
  zeros = jnp.zeros(B[0].shape, jnp.float32)
  out = loop_passes(x_ref.shape[0], read, body, (zeros,) * (2 * steps), per_pass)
  store(dB_ref, out[:steps])
  store(dC_ref, out[steps:])


# ---- the phase kind: rotation, in the rotating frame -----------------------------------------
# A unit-modulus a_t is divided by exactly, through its conjugate: with P_t = a_0 ... a_t =
# exp(i phi_t), phi the running sum of theta (XLA computes it, and cos and sin of it, outside),
#     h_t = P_t (h0 + B U_t),   U_t = sum_{s <= t} conj(P_s) x_s,
# so the recurrence is a running sum: within a chunk in registers, across chunks one exclusive
# cumsum of two operands (re, im), where the recurrence's exclusive scan takes eight. Backward,
# with G~_t = sum_{t' >= t} dy_t' conj(C P_t'), dL/dh_t = g_t = P_t G~_t (a conjugate
# cogradient), dL/dh0 = G~_0, and dL/dphi_t = sum_d x_t Im(B conj(g_t)) - dy_t Im(C h_t); the
# kernel writes dL/dphi and XLA sums it back over time into dL/dtheta.

def _exclusive_sums(v):
  """(per chunk, the sum of v over the chunks before it; each chunk's own sum), v L complex
  (channels, G) tiles."""
  own = tuple(sum(t[i] for t in v[1:]) + v[0][i] for i in (0, 1))
  return tuple(jnp.cumsum(part, axis=1) - part for part in own), own


def phase_reads(refs, steps, channels=slice(None), per_step=("cos", "sin")):
  """read(n): state n's (cos rows, sin rows, B, C, h0 as (re, im) columns); the complex kind's
  a as (re, im) rows in place of cos and sin (`per_step`)."""
  def read(n):
    column = lambda name: refs[name][n, channels][:, None]
    return (*(rows(refs[name], n, steps) for name in per_step),
            *((column(name + "r"), column(name + "i")) for name in ("B", "C", "h0")))
  return read


def _phase(inputs, x):
  """(P, B, C, h0, v) of a state from its reads: P_t = (cos, sin) of phi rows (1, G), B, C,
  h0 complex columns, v_t = conj(P_t) x_t per chunk step."""
  cos, sin, B, C, h0 = inputs
  P = list(zip(cos, sin))
  v = [(P[k][0] * x[k], -P[k][1] * x[k]) for k in range(len(x))]
  return P, B, C, h0, v


def _running(v, steps):
  """U_t per chunk step: the exclusive sums across chunks, then the chunk's own steps."""
  U, _ = _exclusive_sums(v)
  out = []
  for k in range(steps):
    U = add(U, v[k])
    out.append(U)
  return out


def phase_forward(x_ref, cos_ref, sin_ref, Br_ref, Bi_ref, Cr_ref, Ci_ref, h0r_ref, h0i_ref,
                  y_ref, *, neg, n_states, per_pass="one"):
  del neg
  refs = dict(zip(INPUTS["phase"][1:], (cos_ref, sin_ref, Br_ref, Bi_ref, Cr_ref, Ci_ref,
                                        h0r_ref, h0i_ref)))
  x = load(x_ref)
  steps = len(x)

  def body(n, inputs, ys):
    P, B, C, h0, v = _phase(inputs, x)
    CB, Ch0 = mul(C, B), mul(C, h0)  # y_t = Re C h_t = Re P_t (C h0 + C B U_t)
    out = []
    for y, p, U in zip(ys, P, _running(v, steps)):
      z = add(Ch0, mul(CB, U))
      out.append(y + p[0] * z[0] - p[1] * z[1])
    return tuple(out)
  ys = loop_passes(n_states, phase_reads(refs, steps), body,
                   (jnp.zeros(x[0].shape, jnp.float32),) * steps, per_pass)
  store(y_ref, ys)


def phase_backward(x_ref, cos_ref, sin_ref, Br_ref, Bi_ref, Cr_ref, Ci_ref, h0r_ref, h0i_ref,
                   dy_ref, dx_ref, dphi_ref, dBr_ref, dBi_ref, dCr_ref, dCi_ref, *dh0_refs, neg,
                   n_states, blocks, barrier, per_pass="one"):
  """h_t and g_t per step (above), then the gradients; phi's is one partial sum over the
  program's channels per (state, step), its channels walked in `blocks` blocks, B's and C's
  sums over time."""
  del neg
  walk_complex_blocks("phase", _phase_block, (cos_ref, sin_ref, Br_ref, Bi_ref, Cr_ref, Ci_ref,
                                               h0r_ref, h0i_ref), x_ref, dy_ref, dx_ref, dphi_ref,
                       (dBr_ref, dBi_ref, dCr_ref, dCi_ref), dh0_refs, n_states, blocks, barrier,
                       per_pass)


def walk_complex_blocks(kind, block, ins, x_ref, dy_ref, dx_ref, per_step_grads, dBC_refs,
                         dh0_refs, n_states, blocks, barrier, per_pass):
  """A complex kind's backward (phase, complex): `block` over the program's channels in
  `blocks` blocks (`walk_blocks`), its inputs by name (`INPUTS[kind]`)."""
  refs = dict(zip(INPUTS[kind][1:], ins))
  walk_blocks(lambda channels, adding: block(
      refs, x_ref, dy_ref, dx_ref, per_step_grads, dBC_refs, dh0_refs, channels, adding,
      n_states=n_states, per_pass=per_pass), x_ref.shape[0], blocks, barrier)


def _phase_block(refs, x_ref, dy_ref, dx_ref, dphi_ref, dBC_refs, dh0_refs, channels, adding,
                 n_states, per_pass):
  steps = x_ref.shape[-1]
  x, dy = load(x_ref, channels), load(dy_ref, channels)

  def body(n, inputs, dx):
    dx = list(dx)
    P, (br, bi), C, h0, v = _phase(inputs, x)
    U = _running(v, steps)
    q = []  # dy_t conj(C P_t)
    for k in range(steps):
      cp = mul(C, P[k])
      q.append((dy[k] * cp[0], -dy[k] * cp[1]))
    before, own = _exclusive_sums(q)  # the chunks after each: all less the inclusive sum
    later = tuple(jnp.sum(o, axis=1, keepdims=True) - b - o for b, o in zip(before, own))
    sums, dphi = None, [None] * steps  # x g and dy conj(h) summed over the chunk steps: dB, dC
    for k in range(steps - 1, -1, -1):
      later = add(later, q[k])  # G~_t
      gr, gi = mul(P[k], later)
      hr, hi = mul(P[k], add(h0, mul((br, bi), U[k])))
      dphi[k] = x[k] * (bi * gr - br * gi) - dy[k] * (C[0] * hi + C[1] * hr)
      terms = (x[k] * gr, x[k] * gi, dy[k] * hr, -dy[k] * hi)
      sums = terms if sums is None else tuple(s + t for s, t in zip(sums, terms))
      dx[k] = dx[k] + gr * br + gi * bi
    store_time_sums(dphi_ref, n, dphi, adding)
    for ref, s in zip(dBC_refs, sums):
      ref[n, channels] = jnp.sum(s, axis=1)
    for ref, value in zip(dh0_refs, later):  # G~_0
      ref[n, channels] = first_chunk_sum(value)
    return tuple(dx)
  out = loop_passes(n_states, phase_reads(refs, steps, channels), body,
                    (jnp.zeros(x[0].shape, jnp.float32),) * steps, per_pass)
  store(dx_ref, out, channels)


# the complex kind's are in `pallas_chunked_complex` (`pallas_chunked.FORWARD_KERNELS`)
FORWARD = {"real": real_forward, "phase": phase_forward}
BACKWARD = {"real": real_backward, "phase": phase_backward}

