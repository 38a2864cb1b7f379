"""Fused diagonal-SSM scan in Pallas, parallel over time inside each program (the `pallas_parallel`
method): the layout of Mamba's CUDA selective scan, for the real (decay, signed_decay) family.

`pallas.py` walks time step by step with the whole (channels, states) state in registers, so
each step pays a cross-thread reduction over the states for y_t (the backward, four per step)
and every program is a chain of T dependent steps. On an H100 it ran at 1.8% of its memory
floor and was 73% of a mamba training step (BUILD_NOTES, Performance). Here a program holds a
(channels, time) tile of the whole sequence and loops over the states n instead: for each n,
a_t and b_t of that state are a tile, one hardware scan over time (`recurrence_scan`, Triton's
`tt.scan`) gives every h_t, and y += h C_n accumulates in registers: no reduction over the
states at all, and the steps of a state run in parallel across threads. The backward recomputes
h per state (nothing is saved), runs the adjoint as a reversed scan, and reduces once per state
over channels (dB, dC) or time (dlam) instead of once per step.

Time sits on the tile's minor axis (the inputs are transposed outside), so a scan stays inside
a warp's lanes where it can. A tile row covers the sequence padded to a power of two with two
extra rows in front: row 0 is empty (a = b = 0) and row 1 starts the recurrence (a = 0,
b = h0), so h0 needs no special case and h_{t-1}, a_{t+1} are the same scan read one row
earlier or later. The whole sequence must fit a program's registers: longer than
`MAX_LENGTH` steps, or the complex families, go to `pallas.scan` (same contract).

Untimed on a GPU so far: `launch.bench --sections=scan,tiles` compares it with `pallas`.
Off GPU it runs in Pallas's interpret mode (tests).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from ssm_bench.scan import factors as F
from ssm_bench.scan import pallas as sequential_kernel
from ssm_bench.scan.recurrence_scan import recurrence_scan

# (channels per program, warps) of each kernel: a first guess (16 channels, as the sequential
# kernel's best tile), to be replaced by the tiles section's measurement.
FORWARD = (16, 4)
BACKWARD = (16, 4)
MAX_LENGTH = 255  # steps; the tile's time axis is the next power of two of length + 1
REAL = ("decay", "signed_decay")


def _pow2(n: int) -> int:
  return 1 << max(0, (n - 1).bit_length())


class _Rows:
  """Per-state (a, b) tiles of one program, read from row `first` of the padded time axis:
  first=1 is the recurrence itself (row 0 of the tile is h0's row), 0 is one step earlier (its
  scan is h_{t-1}) and 2 one step later (its a is a_{t+1}). The (channels, time) tiles of x and
  dt are read once per program, not once per state."""

  def __init__(self, refs, neg, span, firsts):
    self.refs, self.neg = refs, neg
    self.tiles = {k: (refs["x"][:, pl.ds(k, span)], refs["dt"][:, pl.ds(k, span)],
                      pl.ds(k, span)) for k in firsts}

  def coefficients(self, n, first):
    x, dt, rows = self.tiles[first]
    lam, B = self.refs["lam"][n, :], self.refs["B"][n, rows]
    e = jnp.exp(dt * lam[:, None])
    a = 2.0 * e - 1.0 if self.neg else e
    row = first + jax.lax.broadcasted_iota(jnp.int32, x.shape, 1)  # row of the padded axis
    a = jnp.where(row <= 1, 0.0, a)
    b = jnp.where(row == 1, self.refs["h0"][n, :][:, None],
                  jnp.where(row == 0, 0.0, x * B[None, :]))
    return e, dt, a, b

  def states(self, n, first):
    e, dt, a, b = self.coefficients(n, first)
    return e, dt, recurrence_scan(a, b, axis=1)[1]


def _refs(refs):
  return dict(zip(("x", "dt", "lam", "B", "C", "h0"), refs))


def _forward_kernel(*refs, neg, span, n_states):
  r, y_ref = _refs(refs), refs[6]
  rows = _Rows(r, neg, span, (1,))

  def body(n, y):
    _, _, h = rows.states(n, 1)
    return y + h * r["C"][n, pl.ds(1, span)][None, :]
  y_ref[...] = jax.lax.fori_loop(0, n_states, body, jnp.zeros(y_ref.shape, jnp.float32))


def _backward_kernel(*refs, neg, span, n_states):
  r, dy_ref = _refs(refs), refs[6]
  dx_ref, ddt_ref, dlam_ref, dB_ref, dC_ref, dh0_ref = refs[7:]
  rows = _Rows(r, neg, span, (0, 1, 2))
  dy = dy_ref[...]
  x = rows.tiles[1][0]
  first_row = jax.lax.broadcasted_iota(jnp.int32, dy.shape, 1) == 0

  def body(n, carry):
    dx, ddt = carry
    e, dt, h = rows.states(n, 1)
    _, _, prev = rows.states(n, 0)  # h_{t-1}
    _, _, a_next, _ = rows.coefficients(n, 2)  # a_{t+1}
    B, C, lam = r["B"][n, pl.ds(1, span)], r["C"][n, pl.ds(1, span)], r["lam"][n, :]
    g = recurrence_scan(a_next, dy * C[None, :], axis=1, reverse=True)[1]  # dL/dh_t
    de = (2.0 * g if neg else g) * prev * e  # dL/d(dt lam) through a_t
    dlam_ref[n, :] = jnp.sum(de * dt, axis=1)
    dB_ref[n, :] = jnp.sum(g * x, axis=0)
    dC_ref[n, :] = jnp.sum(dy * h, axis=0)
    dh0_ref[n, :] = jnp.sum(jnp.where(first_row, g, 0.0), axis=1)
    return dx + g * B[None, :], ddt + de * lam[:, None]
  zeros = jnp.zeros(dy.shape, jnp.float32)
  dx_ref[...], ddt_ref[...] = jax.lax.fori_loop(0, n_states, body, (zeros, zeros))


# ---- pallas_call plumbing: every array is time-minor (transposed outside) ---------------------

def _in_specs(bd, N, rows):
  per_td = pl.BlockSpec((None, bd, rows), lambda i, j: (i, j, 0))
  per_tn = pl.BlockSpec((None, N, rows), lambda i, j: (i, 0, 0))
  return [per_td, per_td, pl.BlockSpec((N, bd), lambda i, j: (0, j)), per_tn, per_tn,
          pl.BlockSpec((None, N, bd), lambda i, j: (i, 0, j))]


def _params(interpret, warps):
  return sequential_kernel._compiler_params(interpret, warps)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _fused(static, *ins):
  neg, (bd, warps), _, interpret = static
  b, D, rows = ins[0].shape
  N, span = ins[2].shape[0], rows - 2
  kernel = functools.partial(_forward_kernel, neg=neg, span=span, n_states=N)
  return pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((b, D, span), jnp.float32), grid=(b, D // bd),
      in_specs=_in_specs(bd, N, rows),
      out_specs=pl.BlockSpec((None, bd, span), lambda i, j: (i, j, 0)), interpret=interpret,
      **_params(interpret, warps))(*ins)


def _fused_fwd(static, *ins):
  return _fused(static, *ins), ins


def _fused_bwd(static, ins, dy):
  neg, _, (bd, warps), interpret = static
  b, D, rows = ins[0].shape
  N, span, n_d = ins[2].shape[0], rows - 2, D // bd
  f32 = jnp.float32
  per_td = (jax.ShapeDtypeStruct((b, D, span), f32),
            pl.BlockSpec((None, bd, span), lambda i, j: (i, j, 0)))
  # gradients of arrays shared over channels: one partial sum per channel block (no atomics,
  # which would make a run nondeterministic); of (n, d) arrays, one per batch row
  per_tn = (jax.ShapeDtypeStruct((b, n_d, N, span), f32),
            pl.BlockSpec((None, None, N, span), lambda i, j: (i, j, 0, 0)))
  per_nd = (jax.ShapeDtypeStruct((b, N, D), f32), pl.BlockSpec((None, N, bd), lambda i, j: (i, 0, j)))
  outs = [per_td, per_td, per_nd, per_tn, per_tn, per_nd]
  kernel = functools.partial(_backward_kernel, neg=neg, span=span, n_states=N)
  dx, ddt, dlam, dB, dC, dh0 = pl.pallas_call(
      kernel, out_shape=[o[0] for o in outs], grid=(b, n_d),
      in_specs=_in_specs(bd, N, rows) + [per_td[1]], out_specs=[o[1] for o in outs],
      interpret=interpret, **_params(interpret, warps))(*ins, dy)
  # back onto the padded rows of the inputs: row 0 and the last row feed nothing
  rows_of = lambda v: jnp.pad(v, [(0, 0)] * (v.ndim - 1) + [(1, 1)])
  return rows_of(dx), rows_of(ddt), dlam.sum(0), rows_of(dB.sum(1)), rows_of(dC.sum(1)), dh0


_fused.defvjp(_fused_fwd, _fused_bwd)


def supports(f: F.Factors) -> bool:
  """Whether this kernel takes `f`; otherwise `scan` hands it to the sequential kernel."""
  return f.family in REAL and f.length <= MAX_LENGTH


def scan(f: F.Factors, forward: tuple[int, int] | None = None,
         backward: tuple[int, int] | None = None, interpret: bool | None = None):
  """y (b, t, d) of the factored recurrence, fused; same contract as the reference.
  `forward` / `backward`: (channels per program, warps) of each kernel."""
  if not supports(f):
    return sequential_kernel.scan(f, interpret=interpret)
  if interpret is None:
    interpret = jax.default_backend() != "gpu"
  b, T, D = f.x.shape
  span = _pow2(T + 1)  # row 0 holds h0, rows 1..T the steps
  fwd = sequential_kernel._tile(forward, FORWARD, D)
  bwd = sequential_kernel._tile(backward, BACKWARD, D)
  bd = max(fwd[0], bwd[0])
  Dp = -(-D // bd) * bd
  f32 = lambda v: v.astype(jnp.float32)
  # time-minor, two rows in front (empty, h0) and up to span + 2 rows in all
  per_t = lambda v, width: jnp.pad(jnp.swapaxes(f32(v), 1, 2),
                                   ((0, 0), (0, width - v.shape[2]), (2, span - T)))
  ins = (per_t(f.x, Dp), per_t(f.dt, Dp), sequential_kernel._pad(f32(f.lam).T, (None, Dp)),
         per_t(f.B, f.B.shape[2]), per_t(f.C, f.C.shape[2]),
         sequential_kernel._pad(jnp.swapaxes(f32(f.h0), 1, 2), (None, None, Dp)))
  static = (f.family == "signed_decay", fwd, bwd, interpret)
  y = _fused(static, *ins)  # (b, Dp, span): row r + 1 is step r
  return jnp.swapaxes(y[:, :D, 1:T + 1], 1, 2)
