"""The real kind's fused scan with time split into chunks walked in registers (the
`pallas_chunked` method): decay and signed decay; other families go to `pallas_parallel`.

`pallas_parallel` scans each state's whole sequence with Triton's hardware scan, whose layout
Triton picks (4 steps per thread, 16 lanes along time): every scan is shuffle rounds across
lanes, and the backward's adjoint is a reversed scan whose flips cost 88 of its 830 loop
instructions (results/bench/README.md, "Instruction counts"). Here a program holds its (channels,
time) tile as L strided (channels, G) slices, step k of each of G chunks of L steps (t = c L + k):
the recurrence runs k = 0..L-1 elementwise in registers, and only one scan of the G chunks'
summaries crosses lanes: an exclusive one (`exclusive_recurrence_scan`) that hands each chunk
the state its predecessors end in (and, reversed, the adjoint its successors start with). The
backward then has h_{t-1} from the loop itself (no h_t - b_t, no second scan) for every family
member, signed decay included.

Counted for sm_90 at the paper cell (Triton 3.9.0, `launch.bench --sections=registers`): the
backward's state loop 634 instructions against `pallas_parallel`'s 830 at the same (8, 1) tile:
with the tiles below about 0.35 against 0.45 ms per run predicted. Untimed on a GPU: a
method of its own, so `launch.bench --methods=pallas_parallel,pallas_chunked` times the two side
by side. Time is padded to a power of two (at least L) with x = dt = 0 steps (a = 1, b = 0).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from ssm_bench.scan import factors as F
from ssm_bench.scan import pallas as sequential_kernel
from ssm_bench.scan import pallas_parallel
from ssm_bench.scan.recurrence_scan import exclusive_recurrence_scan

FAMILIES = ("decay", "signed_decay")
# (channels per program, warps): the tiles with the fewest predicted warp-instructions per run
# that ptxas compiles without spills at the paper cell (`--sections=registers`; raw
# results/bench/registers/triton-3.9.0_paper_cell_chunked.json): forward 0.093 ms per run,
# backward 0.255, against pallas_parallel's timed tiles at 0.117 and 0.333. Untimed.
FORWARD, BACKWARD = (16, 1), (8, 1)
STEPS = 8  # L: steps per chunk (4 and 16 counted worse: more scan rounds, or spills)
MAX_LENGTH = pallas_parallel.MAX_LENGTH  # the same registers per program


def _strided(k, chunks, steps):
  return pl.ds(k, chunks, stride=steps)


def _coefficients(refs, n, tiles, neg, steps):
  """Per chunk step k: (e, a, b) tiles of state n, and the B and C rows."""
  x, dt = tiles
  chunks = x[0].shape[1]
  lam = refs["lam"][n, :][:, None]
  rows = {name: [refs[name][n, _strided(k, chunks, steps)][None, :] for k in range(steps)]
          for name in ("B", "C")}
  e = [jnp.exp2(dt[k] * sequential_kernel.log2_scaled(lam)) for k in range(steps)]
  a = [2.0 * v - 1.0 for v in e] if neg else e
  b = [x[k] * rows["B"][k] for k in range(steps)]
  return lam, e, a, b, rows


def _states(refs, n, a, b, steps):
  """h_{t-1} and h_t per chunk step: each chunk's local recurrence from 0, the exclusive scan
  of the chunks' (product of a, end state), then the recurrence again from the true start."""
  local, product = b[0], a[0]
  for k in range(1, steps):
    local, product = a[k] * local + b[k], product * a[k]
  q, r = exclusive_recurrence_scan(product, local, axis=1)
  h = q * refs["h0"][n, :][:, None] + r
  before, after = [], []
  for k in range(steps):
    before.append(h)
    h = a[k] * h + b[k]
    after.append(h)
  return before, after, product


def forward_kernel(x_ref, dt_ref, lam_ref, B_ref, C_ref, h0_ref, y_ref, *, neg, steps,
                   n_states):
  refs = dict(lam=lam_ref, B=B_ref, C=C_ref, h0=h0_ref)
  chunks = x_ref.shape[-1] // steps
  tiles = tuple([ref[:, _strided(k, chunks, steps)] for k in range(steps)]
                for ref in (x_ref, dt_ref))

  def body(n, ys):
    _, _, a, b, rows = _coefficients(refs, n, tiles, neg, steps)
    _, after, _ = _states(refs, n, a, b, steps)
    return tuple(y + h * c for y, h, c in zip(ys, after, rows["C"]))
  ys = jax.lax.fori_loop(0, n_states, body, (jnp.zeros(tiles[0][0].shape, jnp.float32),) * steps)
  for k in range(steps):
    y_ref[:, _strided(k, chunks, steps)] = ys[k]


def backward_kernel(x_ref, dt_ref, lam_ref, B_ref, C_ref, h0_ref, dy_ref, dx_ref, ddt_ref,
                    dlam_ref, dB_ref, dC_ref, *dh0_ref, neg, steps, n_states):
  """Per state: h_{t-1}, h_t (`_states`), the adjoint g_t = dy_t C_t + a_{t+1} g_{t+1} chunk by
  chunk (the reversed exclusive scan gives each chunk a_{t+1} g_{t+1} past its last step), then
  the gradients; shared rows (dB, dC) are one partial sum per program, as `pallas_parallel`."""
  refs = dict(lam=lam_ref, B=B_ref, C=C_ref, h0=h0_ref)
  chunks = x_ref.shape[-1] // steps
  load = lambda ref: [ref[:, _strided(k, chunks, steps)] for k in range(steps)]
  x, dt, dy = load(x_ref), load(dt_ref), load(dy_ref)
  first_chunk = jax.lax.broadcasted_iota(jnp.int32, x[0].shape, 1) == 0

  def body(n, carry):
    dx, ddt = list(carry[:steps]), list(carry[steps:])
    lam, e, a, b, rows = _coefficients(refs, n, (x, dt), neg, steps)
    before, after, product = _states(refs, n, a, b, steps)
    u = [dy[k] * rows["C"][k] for k in range(steps)]
    local = u[steps - 1]
    for k in range(steps - 2, -1, -1):
      local = u[k] + a[k + 1] * local
    _, incoming = exclusive_recurrence_scan(product, a[0] * local, axis=1, reverse=True)
    dlam = None
    for k in range(steps - 1, -1, -1):
      g = u[k] + incoming
      incoming = a[k] * g
      de = (2.0 * e[k] if neg else a[k]) * g * before[k]  # dL/d(dt lam) through a_t
      dlam = de * dt[k] if dlam is None else dlam + de * dt[k]
      ddt[k] = ddt[k] + de * lam
      dx[k] = dx[k] + g * rows["B"][k]
      dB_ref[n, _strided(k, chunks, steps)] = jnp.sum(g * x[k], axis=0)
      dC_ref[n, _strided(k, chunks, steps)] = jnp.sum(dy[k] * after[k], axis=0)
    dlam_ref[n, :] = jnp.sum(dlam, axis=1)
    if dh0_ref:  # a_0 g_0: what the first chunk passes back past its first step
      dh0_ref[0][n, :] = jnp.sum(jnp.where(first_chunk, incoming, 0.0), axis=1)
    return tuple(dx) + tuple(ddt)
  zeros = jnp.zeros(x[0].shape, jnp.float32)
  out = jax.lax.fori_loop(0, n_states, body, (zeros,) * (2 * steps))
  for k in range(steps):
    dx_ref[:, _strided(k, chunks, steps)] = out[k]
    ddt_ref[:, _strided(k, chunks, steps)] = out[steps + k]


def _specs(bd, N, S, shared_h0):
  per_td = pl.BlockSpec((None, bd, S), lambda i, j: (i, j, 0))
  per_nd = pl.BlockSpec((N, bd), lambda i, j: (0, j))
  per_tn = pl.BlockSpec((None, N, S), lambda i, j: (i, 0, 0))
  h0 = per_nd if shared_h0 else pl.BlockSpec((None, N, bd), lambda i, j: (i, 0, j))
  return per_td, [per_td, per_td, per_nd, per_tn, per_tn, h0]


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _fused(static, x, dt, lam, B, C, h0):
  neg, (bd, warps), _, steps, interpret = static
  (b, D, S), N = x.shape, lam.shape[0]
  per_td, in_specs = _specs(bd, N, S, h0.ndim == 2)
  kernel = functools.partial(forward_kernel, neg=neg, steps=steps, n_states=N)
  return pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((b, D, S), jnp.float32), grid=(b, D // bd),
      in_specs=in_specs, out_specs=per_td, interpret=interpret,
      **sequential_kernel._compiler_params(interpret, warps))(x, dt, lam, B, C, h0)


def _fused_fwd(static, *primals):
  """Symbolic zeros, as `pallas_parallel`: a constant h0 gets no gradient computed."""
  ins = tuple(p.value for p in primals)
  return _fused(static, *ins), (ins, primals[-1].perturbed)


def _fused_bwd(static, res, dy):
  (x, dt, lam, B, C, h0), h0_grad = res
  neg, _, (bd, warps), steps, interpret = static
  (b, D, S), N, f32 = x.shape, lam.shape[0], jnp.float32
  n_d = D // bd
  per_td, in_specs = _specs(bd, N, S, h0.ndim == 2)
  per_nd = (jax.ShapeDtypeStruct((b, N, D), f32),
            pl.BlockSpec((None, N, bd), lambda i, j: (i, 0, j)))
  per_tn = (jax.ShapeDtypeStruct((b, n_d, N, S), f32),
            pl.BlockSpec((None, None, N, S), lambda i, j: (i, j, 0, 0)))
  outs = [(jax.ShapeDtypeStruct((b, D, S), f32), per_td)] * 2 + [per_nd, per_tn, per_tn]
  outs += [per_nd] * h0_grad
  kernel = functools.partial(backward_kernel, neg=neg, steps=steps, n_states=N)
  dx, ddt, dlam, dB, dC, *dh0 = pl.pallas_call(
      kernel, out_shape=[o[0] for o in outs], grid=(b, n_d), in_specs=in_specs + [per_td],
      out_specs=[o[1] for o in outs], interpret=interpret,
      **sequential_kernel._compiler_params(interpret, warps))(x, dt, lam, B, C, h0, dy)
  dh0 = (dh0[0].sum(0) if h0.ndim == 2 else dh0[0]) if dh0 else None
  return dx, ddt, dlam.sum(0), dB.sum(1), dC.sum(1), dh0


_fused.defvjp(_fused_fwd, _fused_bwd, symbolic_zeros=True)


def scan(f: F.Factors, forward: tuple[int, int] | None = None,
         backward: tuple[int, int] | None = None, steps: int | None = None,
         interpret: bool | None = None):
  """y (b, t, d) of the factored recurrence, fused; same contract as the reference. Families
  other than decay and signed decay go to `pallas_parallel`, longer than MAX_LENGTH steps to
  `pallas` (as `pallas_parallel` hands them)."""
  if f.family not in FAMILIES or f.length > MAX_LENGTH:
    return pallas_parallel.scan(f, interpret=interpret)
  if f.channels_first:  # not built for this method (`scan.channels_first`), but accepted
    return jnp.moveaxis(scan(f.batch_major(), forward, backward, steps, interpret), -1, 0)
  if interpret is None:
    interpret = jax.default_backend() != "gpu"
  b, T, D = f.x.shape
  S = max(sequential_kernel._pow2(T), steps or STEPS)
  steps = min(steps or STEPS, S)
  sequential_kernel._check_pow2("steps per chunk", steps)
  fwd = sequential_kernel._tile(forward, pallas_parallel.default_tile(FORWARD, S), D)
  bwd = sequential_kernel._tile(backward, pallas_parallel.default_tile(BACKWARD, S), D)
  Dp = -(-D // max(fwd[0], bwd[0])) * max(fwd[0], bwd[0])
  f32 = lambda v: v.astype(jnp.float32)
  per_t = lambda v, width: jnp.pad(jnp.swapaxes(f32(v), 1, 2),
                                   ((0, 0), (0, width - v.shape[2]), (0, S - T)))
  per_nd = lambda v: sequential_kernel._pad(f32(v).T, (None, Dp))  # (d, n) -> (n, Dp)
  h0 = (per_nd(f.h0) if f.h0.ndim == 2 else  # shared (d, n), or (b, d, n) -> (b, n, Dp)
        sequential_kernel._pad(jnp.swapaxes(f32(f.h0), 1, 2), (None, None, Dp)))
  N = f.h0.shape[-1]
  static = (f.family == "signed_decay", fwd, bwd, steps, interpret)
  y = _fused(static, per_t(f.x, Dp), per_t(f.dt, Dp), per_nd(f.lam), per_t(f.B, N),
             per_t(f.C, N), h0)
  return jnp.swapaxes(y[:, :D, :T], 1, 2)
