"""The time-parallel kernels' bodies (`pallas_parallel` calls them): per program a (channels,
time) tile of the whole sequence, a loop over the states n, and for each n one hardware scan
over time (`recurrence_scan`, Triton's `tt.scan`) for every h_t; y += h C_n accumulates in
registers. The backward recomputes h per state (nothing is saved), runs the adjoint as a
reversed scan, and reduces once per state over channels (dB, dC) or time (dlam).

A tile row covers the sequence padded to a power of two with two extra rows in front: row 0 is
empty (a = b = 0) and row 1 starts the recurrence (a = 0, b = h0), so h0 needs no special case
and a_{t+1} is the same tile read one row later; h_{t-1} comes from h_t - b_t = a_t h_{t-1}
where that needs no division (decay, phase: two scans per state in the backward, as Mamba's),
else from a scan read one row earlier (three). The complex families carry real/imaginary pairs
and scan them as complex numbers.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

from ssm_bench.scan import pallas_kernels
from ssm_bench.scan.recurrence_scan import recurrence_scan

_COMPLEX = ("Br", "Bi", "Cr", "Ci", "h0r", "h0i")
# The kernels' inputs per kind, in order: the phase kind reads cos and sin of theta
# (`pallas_parallel` computes them outside).
INPUTS = {"real": ("x", "dt", "lam", "B", "C", "h0"), "phase": ("x", "cos", "sin") + _COMPLEX,
          "const": ("x", "ar", "ai") + _COMPLEX}


def h0_count(kind):
  """How many h0 arrays the kind has (real 1; complex 2: re, im)."""
  return sum(name.startswith("h0") for name in INPUTS[kind])


def rescans(kind: str, neg: bool) -> bool:
  """Whether the backward recomputes h_{t-1} by a second forward scan (a row earlier) rather
  than from h_t and b_t: only where that would divide by a_t (signed decay, const)."""
  return kind == "const" or (kind == "real" and neg)


class Rows:
  """Per-state (a, b) tiles of one program, read from row `first` of the padded time axis:
  first=1 is the recurrence itself (row 0 of the tile is h0's row), 0 is one step earlier (its
  scan is h_{t-1}) and 2 one step later (its a is a_{t+1}). The (channels, time) tiles of the
  per-channel inputs are read once per program, not once per state. Complex values are
  (re, im) pairs. `tm`: which refs are time-major, (tiles, rows) from `layout`; tiles are
  (channels, time) either way."""

  def __init__(self, kind, neg, refs, span, firsts, tm, channels=slice(None)):
    self.kind, self.neg, self.refs, self.span = kind, neg, refs, span
    self.td, self.tn = tm  # (tiles, per-state rows) time-major: `layout`
    self.channels = channels  # this block's channels of the program's refs
    per_channel = ("x", "dt") if kind == "real" else ("x",)
    self.tiles = {k: {name: self.per_td(refs[name], pl.ds(k, span)) for name in per_channel}
                  for k in firsts}

  def per_td(self, ref, rows=slice(None)):
    """A (channels, time) tile of a per-(step, channel) ref, this block's channels."""
    return ref[rows, self.channels].T if self.td else ref[self.channels, rows]

  def put_td(self, ref, value):
    """Write this block's (channels, time) tile of a per-(step, channel) output."""
    if self.td:
      ref[:, self.channels] = value.T
    else:
      ref[self.channels, :] = value

  def put_nd(self, ref, n, value):
    """Write this block's (channels,) row n of a per-(state, channel) output."""
    ref[n, self.channels] = value

  def row(self, name, n, first):
    """A (1, time) row of a per-(step, state) input (B, C, cos and sin of theta) at state n,
    from row `first`."""
    ref, rows = self.refs[name], pl.ds(first, self.span)
    return (ref[rows, n] if self.tn else ref[n, rows])[None, :]

  def put(self, ref, n, value, add=False):
    """Write a (time,) gradient of a per-(step, state) input at state n; `add` (traced: the
    program's blocks after its first) adds it to what the earlier blocks wrote there."""
    accumulate(ref, (slice(None), n) if self.tn else (n, slice(None)), value, add)

  def column(self, name, n):
    """A (channels, 1) column of a per-(state, channel) input at state n."""
    return self.refs[name][n, self.channels][:, None]

  def coefficients(self, n, first):
    """(a, b, extra): the transition and input of state n on the view, extra what the
    gradient of a needs (real: e = exp(dt lam) and dt)."""
    tile = self.tiles[first]
    x = tile["x"]
    row = first + jax.lax.broadcasted_iota(jnp.int32, x.shape, 1)  # row of the padded axis
    start, empty = row == 1, row == 0
    if self.kind == "real":
      e = jnp.exp2(tile["dt"] * pallas_kernels.log2_scaled(self.column("lam", n)))
      a = jnp.where(row <= 1, 0.0, 2.0 * e - 1.0 if self.neg else e)
      b = jnp.where(start, self.column("h0", n),
                    jnp.where(empty, 0.0, x * self.row("B", n, first)))
      return a, b, (e, tile["dt"])
    if self.kind == "phase":  # exp(i theta_t[n]), shared over channels
      a = (self.row("cos", n, first), self.row("sin", n, first))
    else:  # a constant a[d, n]
      a = (self.column("ar", n), self.column("ai", n))
    a = tuple(jnp.where(row <= 1, 0.0, jnp.broadcast_to(v, x.shape)) for v in a)
    b = tuple(jnp.where(start, self.column(h0, n), jnp.where(empty, 0.0, x * self.column(B, n)))
              for h0, B in (("h0r", "Br"), ("h0i", "Bi")))
    return a, b, None

  def states(self, n, first):
    """(h, a, b, extra) of state n on the view: h its recurrence, scanned."""
    a, b, extra = self.coefficients(n, first)
    return recurrence_scan(a, b, axis=1)[1], a, b, extra

  def previous(self, n, h, a, b):
    """h_{t-1} of state n, from h_t = a_t h_{t-1} + b_t where that needs no division: the
    decay family's de/d(dt lam) takes a_t h_{t-1} = h_t - b_t itself, and a unit-modulus a_t
    (phase) has 1/a_t = conj(a_t). Otherwise (signed decay, const) a second scan on the view
    a row earlier. On rows 0 and 1 (a = 0) both give 0, the empty row's state."""
    if 0 not in self.tiles:  # the backward loads the earlier view only where it rescans
      if self.kind == "real":
        return h - b  # a_t h_{t-1}, which is all the decay family's gradient needs
      (ar, ai), (dr, di) = a, (h[0] - b[0], h[1] - b[1])
      return ar * dr + ai * di, ar * di - ai * dr
    return self.states(n, 0)[0]


def forward_kernel(*refs, kind, neg, span, n_states, tm):
  names = INPUTS[kind]
  r, y_ref = dict(zip(names, refs)), refs[len(names)]
  rows = Rows(kind, neg, r, span, (1,), tm)

  def body(n, y):
    h = rows.states(n, 1)[0]
    if kind == "real":
      return y + h * rows.row("C", n, 1)
    return y + rows.column("Cr", n) * h[0] - rows.column("Ci", n) * h[1]
  y = jax.lax.fori_loop(0, n_states, body, jnp.zeros(rows.tiles[1]["x"].shape, jnp.float32))
  y_ref[...] = y.T if tm[0] else y


def backward_kernel(*refs, kind, neg, span, n_states, tm, blocks, barrier, h0_grad):
  """Per state: h (the recurrence), h_{t-1} (`Rows.previous`), a_{t+1} (the view a row
  later), the adjoint g_t = dy_t C + a_{t+1}^* g_{t+1} as a reversed scan; then the gradients
  (h0's only if `h0_grad`). The program's channels are `blocks` blocks, walked in turn
  (`CHANNEL_BLOCKS`)."""
  names = INPUTS[kind]
  r, dy_ref, outs = dict(zip(names, refs)), refs[len(names)], refs[len(names) + 1:]
  block = functools.partial(_backward_block, r, dy_ref, outs, kind=kind, neg=neg, span=span,
                            n_states=n_states, tm=tm, h0_grad=h0_grad)
  walk_blocks(block, dy_ref.shape[-1 if tm[0] else 0], blocks, barrier)


def walk_blocks(block, channels: int, blocks: int, barrier: bool):
  """block(channels, add) for each of a program's `blocks` blocks of its `channels`, in turn;
  `add` (traced) is true after the first: shared gradients add to what earlier blocks wrote
  (`accumulate`). `barrier`: on the GPU, those writes land before the next block reads them."""
  if blocks == 1:
    return block(slice(None), False)
  width = channels // blocks

  def one(c, carry):
    if barrier:  # the earlier blocks' partial sums are written (by any thread) before reading
      pltriton.debug_barrier()
    block(pl.ds(c * width, width), c > 0)
    return carry
  jax.lax.fori_loop(0, blocks, one, 0)


def accumulate(ref, at, value, add=False):
  """ref[at] = value, or with `add` (`walk_blocks`) value plus what is there."""
  if add is not False:
    value = value + jnp.where(add, ref[at], 0.0)
  ref[at] = value


def _backward_block(r, dy_ref, outs, channels, add, kind, neg, span, n_states, tm, h0_grad):
  """One block of channels: per-channel gradients written, shared ones added (`add`)."""
  rows = Rows(kind, neg, r, span, (0, 1, 2) if rescans(kind, neg) else (1, 2), tm, channels)
  dy = rows.per_td(dy_ref)
  x = rows.tiles[1]["x"]
  first_row = jax.lax.broadcasted_iota(jnp.int32, dy.shape, 1) == 0
  at_start = lambda v: jnp.sum(jnp.where(first_row, v, 0.0), axis=1)  # the h0 row's value
  n_h0 = h0_count(kind) if h0_grad else 0
  outs, dh0_refs = outs[:len(outs) - n_h0], outs[len(outs) - n_h0:]

  def real(n, carry):
    dx_ref, ddt_ref, dlam_ref, dB_ref, dC_ref = outs
    dx, ddt = carry
    h, a, b, (e, dt) = rows.states(n, 1)
    prev = rows.previous(n, h, a, b)  # decay: already a_t h_{t-1}, i.e. times e
    a_next = rows.coefficients(n, 2)[0]
    B, C = rows.row("B", n, 1), rows.row("C", n, 1)
    g = recurrence_scan(a_next, dy * C, axis=1, reverse=True)[1]  # dL/dh_t
    de = 2.0 * g * prev * e if neg else g * prev  # dL/d(dt lam) through a_t
    rows.put_nd(dlam_ref, n, jnp.sum(de * dt, axis=1))
    rows.put(dB_ref, n, jnp.sum(g * x, axis=0), add)
    rows.put(dC_ref, n, jnp.sum(dy * h, axis=0), add)
    for ref in dh0_refs:
      rows.put_nd(ref, n, at_start(g))
    return dx + g * B, ddt + de * rows.column("lam", n)

  def complex_(n, carry):
    da_refs = outs[1:-4]  # phase: d theta; const: d ar, d ai (outs[0], dx: from the carry)
    dBr_ref, dBi_ref, dCr_ref, dCi_ref = outs[-4:]
    (dx,) = carry
    (hr, hi), (ar, ai), b, _ = rows.states(n, 1)
    pr, pi = rows.previous(n, (hr, hi), (ar, ai), b)
    nr, ni = rows.coefficients(n, 2)[0]
    u = (dy * rows.column("Cr", n), -dy * rows.column("Ci", n))  # dL/dh_t from y_t = Re C h_t
    gr, gi = recurrence_scan((nr, -ni), u, axis=1, reverse=True)[1]  # through conj(a_{t+1})
    dar, dai = gr * pr + gi * pi, gi * pr - gr * pi  # dL/da_t, as a conjugate cogradient
    if kind == "phase":  # a = cos + i sin of theta_t[n]: per step, summed over channels
      rows.put(da_refs[0], n, jnp.sum(dai * ar - dar * ai, axis=0), add)
    else:  # a[d, n]: summed over time
      rows.put_nd(da_refs[0], n, jnp.sum(dar, axis=1))
      rows.put_nd(da_refs[1], n, jnp.sum(dai, axis=1))
    for ref, v in ((dBr_ref, x * gr), (dBi_ref, x * gi), (dCr_ref, dy * hr), (dCi_ref, -dy * hi)):
      rows.put_nd(ref, n, jnp.sum(v, axis=1))
    for ref, v in zip(dh0_refs, (gr, gi)):
      rows.put_nd(ref, n, at_start(v))
    return (dx + gr * rows.column("Br", n) + gi * rows.column("Bi", n),)

  zeros = jnp.zeros(dy.shape, jnp.float32)
  per_channel = (jax.lax.fori_loop(0, n_states, real, (zeros, zeros)) if kind == "real"
                 else jax.lax.fori_loop(0, n_states, complex_, (zeros,)))
  for ref, v in zip(outs, per_channel):
    rows.put_td(ref, v)
