"""Fused diagonal-SSM scan in Pallas, parallel over time inside each program (the `pallas_parallel`
method): the layout of Mamba's CUDA selective scan, for every scan family.

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

Time sits on the tile's minor axis, so a scan stays inside a warp's lanes where it can: the
inputs are transposed outside, or read in the layers' layout (`TIME_MAJOR`, `LAYOUTS`). The
phase kind's kernels read cos and sin of theta, not theta. A tile row covers the sequence padded
to a power of two with two extra rows in front: row 0 is empty (a = b = 0) and row 1 starts the recurrence (a = 0,
b = h0), so h0 needs no special case and a_{t+1} is the same tile read one row later; h_{t-1}
comes from h_t - b_t = a_t h_{t-1} where that needs no division (decay, phase: two scans per
state in the backward, as Mamba's), else from a scan read one row earlier (three). The complex
families (rotation: AUSSM, constant: S4D) carry real/imaginary pairs and scan them as complex
numbers. The whole sequence must fit a program's registers:
longer than `MAX_LENGTH` steps (evaluation) go to `pallas.scan` (same contract).

The GPU's `auto` since its H100 timing (BUILD_NOTES, "Scan core"). Off GPU it runs in Pallas's
interpret mode (tests).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

from ssm_bench.scan import factors as F
from ssm_bench.scan import pallas as sequential_kernel
from ssm_bench.scan.recurrence_scan import recurrence_scan

# (channels per program, warps) of each kernel, per kernel kind (`pallas.KINDS`), for a time
# axis of up to TILE_SPAN rows (63 steps: the paper trains at 60). real and phase: the fastest
# forward + backward of `launch.bench --sections=parallel_tiles` on an H100 at the paper cell,
# 27 runs (real on mamba's decay family 0.635 ms per run, phase 1.137; results/bench/README.md).
# const: a guess (16 channels, the step-by-step kernel's best real tile), untimed.
FORWARD = {"real": (8, 2), "phase": (16, 2), "const": (16, 4)}
BACKWARD = {"real": (8, 1), "phase": (16, 2), "const": (16, 4)}
# Which per-step arrays reach the kernels in the layers' own (batch, time, channels) layout, a
# `LAYOUTS` key: time-minor ones are transposed by XLA outside (27.6% of a 27-run mamba step on
# an H100), time-major ones read as they are. False until `--sections=parallel_tiles` times all
# three on a GPU.
TIME_MAJOR = {"real": False, "phase": False, "const": False}
# (channel tiles, per-state rows) time-major: nothing (False); the rows alone ("rows": B, C,
# theta and their gradients, strided row reads and writes, no instruction more); everything
# (True: the tiles transposed in registers, 1.4-1.6x the instructions of the real kernels).
LAYOUTS = {False: (False, False), "rows": (False, True), True: (True, True)}
# Channel blocks of BACKWARD's width that one backward program walks in turn. The gradients of
# arrays shared over channels (B and C of the real kind, theta of phase) are written as one
# partial sum per program, summed outside by XLA: at 1 block per program, (8, 1) tiles and the
# paper cell that is 16 partials of (N, T) per batch row, 134 MB per mamba run-step written and
# read again (its sum, with a transpose, was the costliest op outside the kernel in an H100
# profile: 1.32 ms of a 27-run step of 29.3). With k blocks a program adds its blocks' sums in
# place (a barrier between blocks; no atomics, so the order is fixed and runs stay
# deterministic): k times fewer partials, same registers. 1 until `--sections=parallel_tiles`
# times it on a GPU.
CHANNEL_BLOCKS = {"real": 1, "phase": 1, "const": 1}
# Whether the diagonal layers build their factors channels first, (channels, batch, time), when
# this kernel runs them (`scan.channels_first`): their matmuls then write the time-minor tiles
# directly and the transposes go without a kernel change (`TIME_MAJOR` moves them into the
# kernel instead). False until `--sections=train_many --layer_layouts` times it on a GPU.
CHANNELS_FIRST_LAYERS = False
TILE_SPAN = 64
MAX_LENGTH = 255  # steps; the tile's time axis is the next power of two of length + 1

_COMPLEX = ("Br", "Bi", "Cr", "Ci", "h0r", "h0i")
NAMES = {"real": ("x", "dt", "lam", "B", "C", "h0"), "phase": ("x", "theta") + _COMPLEX,
         "const": ("x", "ar", "ai") + _COMPLEX}
KERNEL_NAMES = {**NAMES, "phase": ("x", "cos", "sin") + _COMPLEX}  # `_kernel_inputs`


def layout(time_major) -> tuple[bool, bool]:
  """(tiles, rows) time-major for a `TIME_MAJOR` value; one error naming the choices."""
  if time_major not in LAYOUTS:  # 1 and 0 would pass as True and False: fine
    raise ValueError(f"pallas_parallel layout {time_major!r}: choose one of {list(LAYOUTS)}")
  return LAYOUTS[time_major]


def default_tile(tile: tuple[int, int], span: int) -> tuple[int, int]:
  """A default tile for a time axis of `span` rows. A program holds its whole sequence, so a
  longer one takes fewer channels and each thread keeps as many elements as at TILE_SPAN: at
  255 steps (16, 4) spills 968-1,400 bytes per thread in the backward, (4, 4) none (ptxas, Triton
  3.3.1, sm_90: `launch.bench --sections=registers`). Tiles passed to `scan` are used as given."""
  channels, warps = tile
  return max(1, channels * TILE_SPAN // max(span, TILE_SPAN)), warps


def rescans(kind: str, neg: bool) -> bool:
  """Whether the backward recomputes h_{t-1} by a second forward scan (a row earlier) rather
  than from h_t and b_t: only where that would divide by a_t (signed decay, const)."""
  return kind == "const" or (kind == "real" and neg)


class _Rows:
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
    at = (slice(None), n) if self.tn else (n, slice(None))
    if add is not False:
      value = value + jnp.where(add, ref[at], 0.0)
    ref[at] = value

  def column(self, name, n):
    """A (channels, 1) column of a per-(state, channel) input at state n."""
    return self.refs[name][n, self.channels][:, None]

  def initial(self, name, n):
    """A (channels, 1) column of h0 at state n: h0 is read as the layers give it, (channels,
    states) per batch row (a transposed copy of its broadcast over the batch cost a pass of
    8 MB per run-step at the paper cell)."""
    return self.refs[name][self.channels, n][:, None]

  def coefficients(self, n, first):
    """(a, b, extra): the transition and input of state n on the view, extra what the
    gradient of a needs (real: e = exp(dt lam) and dt)."""
    tile = self.tiles[first]
    x = tile["x"]
    row = first + jax.lax.broadcasted_iota(jnp.int32, x.shape, 1)  # row of the padded axis
    start, empty = row == 1, row == 0
    if self.kind == "real":
      e = sequential_kernel.fast_exp(tile["dt"] * self.column("lam", n))
      a = jnp.where(row <= 1, 0.0, 2.0 * e - 1.0 if self.neg else e)
      b = jnp.where(start, self.initial("h0", n),
                    jnp.where(empty, 0.0, x * self.row("B", n, first)))
      return a, b, (e, tile["dt"])
    if self.kind == "phase":  # exp(i theta_t[n]), shared over channels
      a = (self.row("cos", n, first), self.row("sin", n, first))
    else:  # a constant a[d, n]
      a = (self.column("ar", n), self.column("ai", n))
    a = tuple(jnp.where(row <= 1, 0.0, jnp.broadcast_to(v, x.shape)) for v in a)
    b = tuple(jnp.where(start, self.initial(h0, n), jnp.where(empty, 0.0, x * self.column(B, n)))
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


def _forward_kernel(*refs, kind, neg, span, n_states, tm):
  names = KERNEL_NAMES[kind]
  r, y_ref = dict(zip(names, refs)), refs[len(names)]
  rows = _Rows(kind, neg, r, span, (1,), tm)

  def body(n, y):
    h = rows.states(n, 1)[0]
    if kind == "real":
      return y + h * rows.row("C", n, 1)
    return y + rows.column("Cr", n) * h[0] - rows.column("Ci", n) * h[1]
  y = jax.lax.fori_loop(0, n_states, body, jnp.zeros(rows.tiles[1]["x"].shape, jnp.float32))
  y_ref[...] = y.T if tm[0] else y


def _backward_kernel(*refs, kind, neg, span, n_states, tm, blocks, barrier, h0_grad):
  """Per state: h (the recurrence), h_{t-1} (`_Rows.previous`), a_{t+1} (the view a row
  later), the adjoint g_t = dy_t C + a_{t+1}^* g_{t+1} as a reversed scan; then the gradients
  (h0's only if `h0_grad`). The program's channels are `blocks` blocks, walked in turn
  (`CHANNEL_BLOCKS`)."""
  names = KERNEL_NAMES[kind]
  r, dy_ref, outs = dict(zip(names, refs)), refs[len(names)], refs[len(names) + 1:]
  width = dy_ref.shape[-1 if tm[0] else 0] // blocks
  block = functools.partial(_backward_block, r, dy_ref, outs, kind=kind, neg=neg, span=span,
                            n_states=n_states, tm=tm, h0_grad=h0_grad)
  if blocks == 1:
    return block(slice(None), False)

  def one(c, carry):
    if barrier:  # the earlier blocks' partial sums are written (by any thread) before reading
      pltriton.debug_barrier()
    block(pl.ds(c * width, width), c > 0)
    return carry
  jax.lax.fori_loop(0, blocks, one, 0)


def _backward_block(r, dy_ref, outs, channels, add, kind, neg, span, n_states, tm, h0_grad):
  """One block of channels: per-channel gradients written, shared ones added (`add`)."""
  rows = _Rows(kind, neg, r, span, (0, 1, 2) if rescans(kind, neg) else (1, 2), tm, channels)
  dy = rows.per_td(dy_ref)
  x = rows.tiles[1]["x"]
  first_row = jax.lax.broadcasted_iota(jnp.int32, dy.shape, 1) == 0
  at_start = lambda v: jnp.sum(jnp.where(first_row, v, 0.0), axis=1)  # the h0 row's value
  n_h0 = _h0_count(kind) if h0_grad else 0
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
    dx_ref, da_refs = outs[0], outs[1:-4]  # phase: d theta; const: d ar, d ai
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


# ---- pallas_call plumbing: per-step arrays time-minor (transposed outside), with `tm` in the
# layers' (batch, time, channels) layout, or with `cf` channels first: (channels, batch, time),
# the time-minor tiles as a channels-first layer wrote them ---------------------------------

def _per_td(bd, rows, tm, cf=False):
  if cf:
    return pl.BlockSpec((bd, None, rows), lambda i, j: (j, i, 0))
  return (pl.BlockSpec((None, rows, bd), lambda i, j: (i, 0, j)) if tm
          else pl.BlockSpec((None, bd, rows), lambda i, j: (i, j, 0)))


def _td_shape(b, D, rows, tm, cf):
  """A per-(step, channel) array's stored shape."""
  return (D, b, rows) if cf else _layout((b, D, rows), tm)


def _layout(shape, tm):
  """A (..., a, time) shape as stored, and back: time-major swaps the last two."""
  return tuple(shape[:-2]) + ((shape[-1], shape[-2]) if tm else tuple(shape[-2:]))


def _in_specs(kind, bd, N, rows, tm, cf):
  per_td = _per_td(bd, rows, tm[0], cf)
  per_tn = (pl.BlockSpec((N, None, rows), lambda i, j: (0, i, 0)) if cf else
            pl.BlockSpec((None,) + _layout((N, rows), tm[1]), lambda i, j: (i, 0, 0)))
  per_nd = pl.BlockSpec((N, bd), lambda i, j: (0, j))
  h0 = pl.BlockSpec((None, bd, N), lambda i, j: (i, j, 0))
  if kind == "real":
    return [per_td, per_td, per_nd, per_tn, per_tn, h0]
  transition = [per_tn] * 2 if kind == "phase" else [per_nd] * 2  # cos, sin or ar, ai
  return [per_td] + transition + [per_nd] * 4 + [h0] * 2


def _kernel_inputs(kind, ins):
  """The kernels' inputs (`KERNEL_NAMES`) from the scan's (`NAMES`): the phase kind's theta as
  its cos and sin, computed by XLA once per (step, state) rather than by libdevice in the
  kernels once per state and view, where their branches were 40-50% of the phase kernels'
  instructions."""
  if kind != "phase":
    return ins
  x, theta, *rest = ins
  return (x, jnp.cos(theta), jnp.sin(theta), *rest)


def _dims(shape, tm, cf):
  """(batch, channels, rows) of a stored per-(step, channel) array."""
  return (shape[1], shape[0], shape[2]) if cf else _layout(shape, tm[0])


def _h0_count(kind):
  """How many h0 arrays the kind has (real 1; complex 2: re, im)."""
  return sum(name.startswith("h0") for name in NAMES[kind])


def _n_states(kind, ins):
  return ins[NAMES[kind].index("h0" if kind == "real" else "h0r")].shape[2]


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _fused(static, *ins):
  kind, neg, (bd, warps), _, interpret, tm, _, cf = static
  b, D, rows = _dims(ins[0].shape, tm, cf)
  N, span = _n_states(kind, ins), rows - 2
  kernel = functools.partial(_forward_kernel, kind=kind, neg=neg, span=span, n_states=N, tm=tm)
  return pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct(_td_shape(b, D, span, tm[0], cf), jnp.float32),
      grid=(b, D // bd), in_specs=_in_specs(kind, bd, N, rows, tm, cf),
      out_specs=_per_td(bd, span, tm[0], cf), interpret=interpret,
      **sequential_kernel._compiler_params(interpret, warps))(*_kernel_inputs(kind, ins))


def _fused_fwd(static, *primals):
  """With symbolic zeros: whether h0 is differentiated (a learned initial state) or not (the
  paper's constant one: the backward then computes no h0 gradient, a reduction over time per
  state fewer). The answer travels as the residuals' structure, which is static."""
  ins = tuple(p.value for p in primals)
  h0 = [i for i, name in enumerate(NAMES[static[0]]) if name.startswith("h0")]
  h0_grad = any(primals[i].perturbed for i in h0)
  return _fused(static, *ins), (ins, ()) if h0_grad else (ins,)


def _fused_bwd(static, res, dy):
  ins, h0_grad = res[0], len(res) == 2
  kind, neg, _, (block, warps), interpret, tm, blocks, cf = static
  b, D, rows = _dims(ins[0].shape, tm, cf)
  bd = block * blocks  # a program's channels
  N, span, n_d = _n_states(kind, ins), rows - 2, D // bd
  f32 = jnp.float32
  per_td = (jax.ShapeDtypeStruct(_td_shape(b, D, span, tm[0], cf), f32),
            _per_td(bd, span, tm[0], cf))
  # gradients of arrays shared over channels: one partial sum per program (no atomics, which
  # would make a run nondeterministic; `CHANNEL_BLOCKS`); of (n, d) arrays, one per batch row
  per_tn = ((jax.ShapeDtypeStruct((n_d, N, b, span), f32),
             pl.BlockSpec((None, N, None, span), lambda i, j: (j, 0, i, 0))) if cf else
            (jax.ShapeDtypeStruct(_layout((b, n_d, N, span), tm[1]), f32),
             pl.BlockSpec((None, None) + _layout((N, span), tm[1]), lambda i, j: (i, j, 0, 0))))
  partials = 0 if cf else 1  # the axis of per_tn's partial sums
  per_nd = (jax.ShapeDtypeStruct((b, N, D), f32),
            pl.BlockSpec((None, N, bd), lambda i, j: (i, 0, j)))
  n_h0 = _h0_count(kind) if h0_grad else 0
  outs = {"real": [per_td, per_td, per_nd, per_tn, per_tn],
          "phase": [per_td, per_tn] + [per_nd] * 4, "const": [per_td] + [per_nd] * 6}[kind]
  outs += [per_nd] * n_h0
  kernel = functools.partial(_backward_kernel, kind=kind, neg=neg, span=span, n_states=N, tm=tm,
                             blocks=blocks, barrier=not interpret, h0_grad=h0_grad)
  g = pl.pallas_call(
      kernel, out_shape=[o[0] for o in outs], grid=(b, n_d),
      in_specs=_in_specs(kind, bd, N, rows, tm, cf) + [per_td[1]],
      out_specs=[o[1] for o in outs],
      interpret=interpret, **sequential_kernel._compiler_params(interpret, warps))(
          *_kernel_inputs(kind, ins), dy)
  # back onto the padded rows of the inputs: row 0 and the last row feed nothing
  td, tn = tm
  rows_of = lambda v, major: jnp.pad(v, [(1, 1) if i == (1 if major else v.ndim - 1) else (0, 0)
                                         for i in range(v.ndim)])
  g, dh0 = g[:len(g) - n_h0], (tuple(jnp.swapaxes(v, 1, 2) for v in g[len(g) - n_h0:])
                               or (None,) * _h0_count(kind))  # (b, N, Dp) -> as h0 came in
  if kind == "real":
    dx, ddt, dlam, dB, dC = g
    return ((rows_of(dx, td), rows_of(ddt, td), dlam.sum(0), rows_of(dB.sum(partials), tn),
             rows_of(dC.sum(partials), tn)) + dh0)
  if kind == "phase":
    dx, dth, dBr, dBi, dCr, dCi = g
    return ((rows_of(dx, td), rows_of(dth.sum(partials), tn))
            + tuple(v.sum(0) for v in (dBr, dBi, dCr, dCi)) + dh0)
  dx, *per_nd_grads = g  # d ar, d ai, d Br, d Bi, d Cr, d Ci
  return (rows_of(dx, td),) + tuple(v.sum(0) for v in per_nd_grads) + dh0


_fused.defvjp(_fused_fwd, _fused_bwd, symbolic_zeros=True)


def supports(f: F.Factors) -> bool:
  """Whether this kernel takes `f`; otherwise `scan` hands it to the sequential kernel."""
  return f.length <= MAX_LENGTH


def scan(f: F.Factors, forward: tuple[int, int] | None = None,
         backward: tuple[int, int] | None = None, interpret: bool | None = None,
         time_major: bool | str | None = None, blocks: int | None = None):
  """y (b, t, d) of the factored recurrence, fused; same contract as the reference.
  `forward` / `backward`: (channels per program, warps) of each kernel; `time_major`: the
  layout the kernels read (a `LAYOUTS` value; default `TIME_MAJOR` of the kind); `blocks`:
  channel blocks per backward program (default `CHANNEL_BLOCKS` of the kind, at most the
  channels need). Channels-first factors are read as they are (their tiles are time-minor
  already: `time_major` does not apply), and y is then (d, b, t)."""
  cf = f.channels_first
  if not supports(f):
    y = sequential_kernel.scan(f.batch_major(), interpret=interpret)
    return jnp.moveaxis(y, -1, 0) if cf else y
  if interpret is None:
    interpret = jax.default_backend() != "gpu"
  D, b, T = f.x.shape if cf else (f.x.shape[2], f.x.shape[0], f.x.shape[1])
  span = sequential_kernel._pow2(T + 1)  # row 0 holds h0, rows 1..T the steps
  N, kind = f.h0.shape[-1], sequential_kernel.KINDS[f.family]
  fwd = sequential_kernel._tile(forward, default_tile(FORWARD[kind], span), D)
  bwd = sequential_kernel._tile(backward, default_tile(BACKWARD[kind], span), D)
  blocks = CHANNEL_BLOCKS[kind] if blocks is None else blocks
  sequential_kernel._check_pow2("channel blocks per program", blocks)
  blocks = max(1, min(blocks, sequential_kernel._pow2(D) // bwd[0]))
  bd = max(fwd[0], bwd[0] * blocks)
  Dp = -(-D // bd) * bd
  tm = (False, False) if cf else layout(TIME_MAJOR[kind] if time_major is None else time_major)
  f32 = lambda v: v.astype(jnp.float32)
  # two rows in front (empty, h0) and span + 2 rows in all; time-minor unless `major`
  per_t = lambda v, width, major: (
      jnp.pad(f32(v), ((0, width - v.shape[0]), (0, 0), (2, span - T))) if cf else
      jnp.pad(f32(v), ((0, 0), (2, span - T), (0, width - v.shape[2]))) if major else
      jnp.pad(jnp.swapaxes(f32(v), 1, 2), ((0, 0), (0, width - v.shape[2]), (2, span - T))))
  tile, row = (lambda v: per_t(v, Dp, tm[0])), (lambda v: per_t(v, N, tm[1]))
  per_nd = lambda v: sequential_kernel._pad(f32(v).T, (None, Dp))  # (d, n) -> (n, Dp)
  h0 = lambda v: sequential_kernel._pad(f32(v), (None, Dp, None))
  if kind == "real":
    ins = (tile(f.x), tile(f.dt), per_nd(f.lam), row(f.B), row(f.C), h0(f.h0))
  else:
    transition = ((row(f.theta),) if kind == "phase"
                  else (per_nd(f.a.real), per_nd(f.a.imag)))
    ins = ((tile(f.x),) + transition + (per_nd(f.B.real), per_nd(f.B.imag), per_nd(f.C.real),
                                             per_nd(f.C.imag), h0(f.h0.real), h0(f.h0.imag)))
  static = (kind, f.family == "signed_decay", fwd, bwd, interpret, tm, blocks, cf)
  y = _fused(static, *ins)  # (b, Dp, span), time-major (b, span, Dp) or cf (Dp, b, span)
  if cf:  # row r + 1 is step r
    return y[:D, :, 1:T + 1]
  return y[:, 1:T + 1, :D] if tm[0] else jnp.swapaxes(y[:, :D, 1:T + 1], 1, 2)
