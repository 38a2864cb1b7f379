"""The fused scan with time split into chunks walked in registers (the `pallas_chunked`
method): decay, signed decay, rotation and the complex family (a per step of any modulus: no
other kernel reads it); the constant family goes to `pallas_parallel`.

`pallas_parallel` scans each state's whole sequence with Triton's hardware scan, whose layout
Triton picks (4 steps per thread, 16 lanes along time): every scan is shuffle rounds across
lanes, and the backward's adjoint is a reversed scan whose flips cost 88 of its 830 loop
instructions (results/bench/README.md, "Instruction counts"). Here a program holds its (channels,
time) tile as G chunks of L steps (t = c L + k; the kernels read the time axis as (G, L), a free
reshape), step k of every chunk one (channels, G) tile: the recurrence runs k = 0..L-1
elementwise in registers, and only one scan of the G chunks' summaries crosses lanes: an
exclusive one (`exclusive_recurrence_scan`) that hands each chunk the state its predecessors end
in (and, reversed, the adjoint its successors start with). The backward then has h_{t-1} from the
loop itself (no h_t - b_t, no second scan) for every family member, signed decay included. The
rotation family's unit-modulus a_t makes it simpler still: in the rotating frame its recurrence
is a running sum, and the scan across chunks a cumsum (`pallas_chunked_kernels`, where the
kernels' bodies are).

Counted for sm_90 at the paper cell (Triton 3.9.0, `launch.bench --sections=registers`), with
the tiles below, predicted ms per run in the kernels (forward + backward) against
`pallas_parallel`'s: real 0.35 against 0.45, phase 0.58 against 1.16. Timed on an H200 (the
scan alone, 27 runs, each kernel at the sweep's best tiles): real 0.495 against 0.587, phase
0.696 against 0.970; the GPU's `auto`. `launch.bench --methods=pallas_parallel,pallas_chunked`
times the two side by side. G is a power of two (Triton's tiles are), L need not be: by default
the L in `STEPS` that pads time least once the warps are filled (`steps_for`: the paper cell's
60 steps are 4 chunks of 15, nothing padded); padded steps have x = dt = theta = 0 (a = 1,
b = 0; handed before Mamba's rule, dt' = log 2, but padded steps come last and take dy = 0,
so nothing reaches a real step). Channels-first factors (`scan.channels_first`) are read as
they are, like `pallas_parallel`'s. The real kind's backward can loop over channels instead
of states (`BACKWARD_LOOP`): all states in a program's tiles, so the gradients shared over
channels (dB, dC) are summed in registers rather than left as one partial sum per program; its
forward can loop over time instead of states (`FORWARD_LOOP`: one channel a lane, all states in its
registers, no scan across chunks). This module is the call: tiles, block specs, the custom VJP.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from ssm_bench.scan import factors as F
from ssm_bench.scan import mamba_rule
from ssm_bench.scan import pallas as sequential_kernel
from ssm_bench.scan import pallas_chunked_complex
from ssm_bench.scan import pallas_chunked_kernels as kernels
from ssm_bench.scan import pallas_parallel

FAMILIES = ("decay", "signed_decay", "rotation", "complex")
KIND = {**sequential_kernel.KINDS, "complex": "complex"}  # the complex family: this kernel's only
# (channels per program, warps) per kernel kind: tiles with the fewest predicted
# warp-instructions per run that ptxas compiles without spills at the paper cell
# (`--sections=registers`; raw results/bench/registers/triton-3.9.0_paper_cell_chunked*.json):
# real forward 0.093 ms per run, backward 0.255, against pallas_parallel's timed tiles at 0.117
# and 0.333; phase (raw ..._chunked_phase.json) 0.143 and 0.439 against 0.283 and 0.874 (its
# forward at (32, 1) counts 0.119 but takes 255 registers, an occupancy the count cannot see).
# On an H200 the sweeps' best: real (8, 1) / (8, 1), 0.494 ms per run (forward 0.150 against
# (16, 1)'s 0.183; the same pair checked on channels-first factors, 2.3e-6), taken; phase
# (8, 1) / (4, 1) 0.696 against 0.711, and no whole step got faster with it: kept.
# A forward tile may add its own steps per chunk L as a third entry (`plan`): the forward
# kernel scans one recurrence where the backward scans two and sums over channels per step, and
# at L = 16 its body counts fewer instructions (real (8, 1) 0.0960 against 0.1029 predicted ms
# per run, (16, 1) 0.0790; phase (16, 1) 0.1318 against 0.1426) where the backward's count more
# (results/bench/README.md, "Steps per chunk"). Untimed on a GPU: `chunked_tiles` sweeps both.
FORWARD = {"real": (8, 1), "phase": (16, 1)}
BACKWARD = {"real": (8, 1), "phase": (8, 1)}
# Channel blocks of BACKWARD's width that one backward program walks in turn, adding the
# shared gradients' partial sums in place (as `pallas_parallel.CHANNEL_BLOCKS`: at (8, 1) and
# the paper cell 1 block leaves 16 partials of (N, T) per batch row to sum outside, about 0.05
# ms of a 27-run mamba step per run on an H100). 2-16 blocks lost on an H200 (0.70-0.79 ms against 0.50).
CHANNEL_BLOCKS = {"real": 1, "phase": 1}
# What a backward program loops over (`pallas_chunked_kernels`): "states" (tiles of channels,
# shared gradients one partial sum per program) or, for the real kind, "channels" (tiles of all
# states, the shared gradients summed in registers: `real_backward_by_channel`; BACKWARD's
# tile is then (channels per program, warps)). Untimed on a GPU: `.ci/gpu_plan 1` times both.
BACKWARD_LOOP = {"real": "states", "phase": "states"}
LOOPS = ("states", "channels")
# What a forward program loops over: "states" (`kernels.FORWARD`) or, for the real kind,
# "time" (`kernels.real_forward_by_time`: one channel a lane, all N states in its registers;
# its tile, in FORWARD_BY_TIME, is (channels, warps), 32 a warp). Counted for sm_90 at the
# paper cell: 28.6 M SASS warp-instructions per run at (32, 1) against the state loop's 43.8 M
# (results/bench/README.md, "The forward walking time"). Untimed on a GPU: `chunked_tiles` times
# it (tiles marked "time").
FORWARD_LOOP = {"real": "states", "phase": "states"}
FORWARD_LOOPS = ("states", "time")
FORWARD_BY_TIME = {"real": (32, 1)}
# A lane holds 2 N + about 40 registers in the time loop: at (32, 1) 96 states take 255 and
# 128 spill 124 bytes (sm_90, Triton 3.9.0), so past this many the default is the state loop.
TIME_LOOP_MAX_STATES = 96
# What a pass of each kernel's loop takes (`kernels.loop_passes`), per kind, (forward,
# backward): "one" state (the channel loop: channel), "ahead" (one, the next one's inputs read
# while it computes) or "two" (two a pass). The chunked kernels' H200 times did not follow their
# instruction counts (forward 0.150 ms per run against 0.093 counted), and their SASS shows
# stalls the counts miss: a pass uses its loads a median 25-104 instructions after issuing them,
# and walks one dependent recurrence per thread. Read ahead, ptxas issues the loads 240-440
# instructions before use (30 more registers in the forward, none in the state loop's
# backward); two a pass, the forward interleaves two recurrences at the same 96 registers (the
# backward needs 254). Sm_90 at the paper cell, results/bench/README.md ("A pass of the
# kernels' loops"). Untimed on a GPU: `chunked_tiles` times them. Same values (to float32
# rounding: the loop compiles differently).
PASS = {"real": ("one", "one"), "phase": ("one", "one")}
# L, steps per chunk, by default per kind: of range(*STEPS[kind]), the one that leaves a thread
# the fewest steps, then pads the time axis least (`steps_for`): 60 steps are 4 chunks of 15 (no
# padding, where 8 pads them to 64), 64 are 8 of 8. The backward's 4 and 16 counted worse than
# 8 (more scan rounds, or spills). At the paper cell, 15 against 8 (predicted H100 ms per run,
# forward + backward at the default tiles): mamba 0.341 against 0.353, negmamba 0.360 against 0.373,
# aussm 0.517 against 0.579, and no pad or slice of a sequence around the kernels
# (results/bench/README.md, "Steps per chunk that pad least"). Untimed on a GPU:
# `chunked_tiles` times the best pair at 8 too, and where that wins, (8, 9) (pad to powers of
# two, as before) is what `--apply_tiles` sets.
STEPS = {"real": (8, 16), "phase": (8, 16)}
# The complex kind (the `complex` family: a per (step, state), any modulus) takes the phase
# kind's tunables: its loops and tiles are the phase kind's shape, never timed on a GPU.
for _tunables in (FORWARD, BACKWARD, CHANNEL_BLOCKS, BACKWARD_LOOP, FORWARD_LOOP, PASS, STEPS):
  _tunables["complex"] = _tunables["phase"]
MAX_LENGTH = pallas_parallel.MAX_LENGTH  # the same registers per program
# The scan's inputs per kind (`pallas_parallel.NAMES`: the phase kind's theta, which the
# kernels read as cos and sin)
NAMES = {kind: pallas_parallel.NAMES[kind] for kind in kernels.KINDS[:2]}
NAMES["complex"] = kernels.INPUTS["complex"]
# the kernels per kind: the complex kind's in their own module
FORWARD_KERNELS = {**kernels.FORWARD, "complex": pallas_chunked_complex.complex_forward}
BACKWARD_KERNELS = {**kernels.BACKWARD, "complex": pallas_chunked_complex.complex_backward}
PER_STEP = ("x", "dt", "B", "C", "cos", "sin", "ar", "ai")  # the kernels' inputs with a time axis


def _specs(kind, bd, N, G, L, shared_h0, cf):
  """(the per-(channel, step) spec, the inputs' specs in `kernels.INPUTS` order). Per-step
  arrays are (batch, channels or states, G, L), or with `cf` (channels or states, batch, G, L)
  as channels-first layers build them (`_chunked`: their time axis as G chunks of L steps); a
  program's blocks are (channels, G, L) either way."""
  per_td = (pl.BlockSpec((bd, None, G, L), lambda i, j: (j, i, 0, 0)) if cf
            else pl.BlockSpec((None, bd, G, L), lambda i, j: (i, j, 0, 0)))
  per_tn = (pl.BlockSpec((N, None, G, L), lambda i, j: (0, i, 0, 0)) if cf
            else pl.BlockSpec((None, N, G, L), lambda i, j: (i, 0, 0, 0)))
  per_nd = pl.BlockSpec((N, bd), lambda i, j: (0, j))
  h0 = per_nd if shared_h0 else pl.BlockSpec((None, N, bd), lambda i, j: (i, 0, j))
  if kind == "real":
    return per_td, [per_td, per_td, per_nd, per_tn, per_tn, h0]
  return per_td, [per_td, per_tn, per_tn] + [per_nd] * 4 + [h0] * 2


def _chunked(v, steps):
  """A per-step array's time axis (last, S steps) as (G, L): G chunks of L steps, so that a
  kernel reads step k of every chunk as v[..., :, k] (a free reshape of the same memory)."""
  return v.reshape(v.shape[:-1] + (v.shape[-1] // steps, steps))


def _unchunked(v):
  return v.reshape(v.shape[:-2] + (-1,))


def _dims(ins, cf):
  """(batch, channels, time, states) of the scan's inputs."""
  x, h0 = ins[0], ins[-1]
  return (x.shape[1], x.shape[0]) if cf else x.shape[:2], x.shape[2], h0.shape[-2]


def _kernel_inputs(kind, ins, steps):
  """The kernels' inputs (`kernels.INPUTS`) from the scan's (`NAMES`), per-step ones in chunks
  of `steps` (`_chunked`): the phase kind's theta as cos and sin of its running sum phi (the
  rotating frame, `pallas_chunked_kernels`). float32 rounds phi to its own magnitude: y is
  1.2e-6 off float64 at 60 steps and 7.3e-6 at 255 (the sequential scan 2.8e-7 and 5.6e-7;
  relative to max |y|, theta in [-3, 3])."""
  if kind == "phase":
    x, theta, *rest = ins
    phi = jnp.cumsum(theta, axis=-1)
    ins = (x, jnp.cos(phi), jnp.sin(phi), *rest)
  return tuple(_chunked(v, steps) if name in PER_STEP else v
               for name, v in zip(kernels.INPUTS[kind], ins))


def _h0_positions(kind):
  return [i for i, name in enumerate(NAMES[kind]) if name.startswith("h0")]


def _name(kind, kernel):
  """The kernel's name in a GPU trace: the kernel function's own name ("real_backward") says
  nothing of the scan, and `launch.bench --sections=profile` finds scan kernels by "pallas"."""
  return f"pallas_chunked_{kind}_{kernel}"


def _rule(kind, rule):
  """The real kernels' keyword for x and dt handed before Mamba's rule (`F.Factors.discretize`):
  they apply it to what they read, and write the gradients of what they were handed."""
  return {"rule": rule} if kind == "real" else {}


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _fused(static, *ins):
  kind, neg, (bd, warps), _, (steps, _), interpret, cf, _, _, (per_pass, _), fwd_loop, rule = (
      static)
  (b, D), S, N = _dims(ins, cf)
  per_td, in_specs = _specs(kind, bd, N, S // steps, steps, ins[-1].ndim == 2, cf)
  kernel = functools.partial(kernels.real_forward_by_time if fwd_loop == "time" else
                             FORWARD_KERNELS[kind], neg=neg, n_states=N, per_pass=per_pass,
                             **_rule(kind, rule))
  y = pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct(_chunked(ins[0], steps).shape, jnp.float32),
      grid=(b, D // bd), in_specs=in_specs, out_specs=per_td, interpret=interpret,
      name=_name(kind, "forward"), **sequential_kernel._compiler_params(interpret, warps))(
          *_kernel_inputs(kind, ins, steps))
  return _unchunked(y)


def _fused_fwd(static, *primals):
  """Symbolic zeros, as `pallas_parallel`: a constant h0 gets no gradient computed."""
  ins = tuple(p.value for p in primals)
  h0_grad = any(primals[i].perturbed for i in _h0_positions(static[0]))
  return _fused(static, *ins), (ins, h0_grad)


def _time_order(v, steps):
  """A row of sums (`kernels.store_time_sums`: G chunks of `kernels.row_steps`) as the (S,) time
  axis, the steps past L of each chunk dropped; the row itself when L is a power of two."""
  if kernels.row_steps(steps) == steps:
    return v
  chunks = v.reshape(v.shape[:-1] + (-1, kernels.row_steps(steps)))[..., :steps]
  return chunks.reshape(v.shape[:-1] + (-1,))


def _fused_bwd(static, res, dy):
  ins, h0_grad = res
  kind, neg, _, (block, warps), (_, steps), interpret, cf, blocks, loop, (_, per_pass), _, rule = (
      static)
  (b, D), S, N = _dims(ins, cf)
  bd, G = block * blocks, S // steps  # a backward program's channels; chunks
  f32, n_d, shared = jnp.float32, D // bd, ins[-1].ndim == 2
  chunked_td, in_specs = _specs(kind, bd, N, G, steps, shared, cf)
  # A gradient is written step by step, in the (G, L) view of its time axis, or as rows of
  # sums (`kernels.store_time_sums`), flat: per channel (dx, dt's) when the backward loops over
  # channels, else per state. Rows shared over channels: one partial sum per program (no
  # atomics), on the axis `partials`, the rest in the rows' own layout.
  rows = lambda flat: (G * kernels.row_steps(steps),) if flat else (G, steps)
  zeros = lambda flat: (0,) * len(rows(flat))
  per_td = lambda flat: (
      jax.ShapeDtypeStruct(ins[0].shape[:2] + rows(flat), f32),
      chunked_td if not flat else
      pl.BlockSpec((bd, None) + rows(flat), lambda i, j: (j, i, 0)) if cf else
      pl.BlockSpec((None, bd) + rows(flat), lambda i, j: (i, j, 0)))
  partials = 0 if cf else 1
  per_tn = lambda flat: (
      (jax.ShapeDtypeStruct((n_d, N, b) + rows(flat), f32),
       pl.BlockSpec((None, N, None) + rows(flat), lambda i, j: (j, 0, i) + zeros(flat))) if cf
      else (jax.ShapeDtypeStruct((b, n_d, N) + rows(flat), f32),
            pl.BlockSpec((None, None, N) + rows(flat), lambda i, j: (i, j, 0) + zeros(flat))))
  per_nd = (jax.ShapeDtypeStruct((b, N, D), f32),
            pl.BlockSpec((None, N, bd), lambda i, j: (i, 0, j)))
  by_channel = loop == "channels"
  # The channel loop reads a channel's x and dt rows per pass, where Mamba's rule doubled its
  # loop and spilled (SASS at the paper cell: 1039 -> 2147 per channel, 88 -> 308 bytes): XLA
  # applies it around that kernel instead, in passes fused with their neighbours.
  outside = by_channel and rule != "given"
  if outside:
    x, dt = mamba_rule.discretize([ins[0]], [ins[1]], rule)  # once, for both sides
    ins = (x[0], dt[0]) + ins[2:]
  outs = ([per_td(by_channel)] * 2 + [per_nd] + [per_tn(not by_channel)] * 2 if kind == "real"
          else [per_td(False)] + [per_tn(True)] * (2 if kind == "complex" else 1)
          + [per_nd] * 4)
  n_h0 = len(_h0_positions(kind)) if h0_grad else 0
  outs += [per_nd] * n_h0
  kernel = (functools.partial(kernels.real_backward_by_channel, neg=neg, n_states=N,
                              per_pass=per_pass)
            if by_channel else
            functools.partial(BACKWARD_KERNELS[kind], neg=neg, n_states=N, blocks=blocks,
                              per_pass=per_pass, barrier=not interpret, **_rule(kind, rule)))
  g = pl.pallas_call(
      kernel, out_shape=[o[0] for o in outs], grid=(b, n_d), in_specs=in_specs + [chunked_td],
      out_specs=[o[1] for o in outs], interpret=interpret, name=_name(kind, "backward"),
      **sequential_kernel._compiler_params(interpret, warps))(
          *_kernel_inputs(kind, ins, steps), _chunked(dy, steps))
  g, dh0 = g[:len(g) - n_h0], g[len(g) - n_h0:]
  dh0 = tuple(v.sum(0) if shared else v for v in dh0) or (None,) * len(_h0_positions(kind))
  restore = lambda v, flat: _time_order(v, steps) if flat else _unchunked(v)
  if kind == "real":
    dx, ddt, dlam, dB, dC = (restore(v, by_channel) if i < 2 else v for i, v in enumerate(g))
    if outside:
      (dx,), (ddt,) = mamba_rule.handed_grads([dx], [ddt], x, dt, rule)
    return (dx, ddt, dlam.sum(0),
            restore(dB.sum(partials), not by_channel),
            restore(dC.sum(partials), not by_channel)) + dh0
  if kind == "complex":  # d ar, d ai summed over the programs' partials, then B's, C's
    dx, dar, dai, *per_nd_grads = g
    return (_unchunked(dx), restore(dar.sum(partials), True), restore(dai.sum(partials), True)
            ) + tuple(v.sum(0) for v in per_nd_grads) + dh0
  dx, dphi, *per_nd_grads = g  # d phi, then d Br, d Bi, d Cr, d Ci
  # phi_t = theta_0 + ... + theta_t
  dtheta = jax.lax.cumsum(restore(dphi.sum(partials), True), axis=2, reverse=True)
  return (_unchunked(dx), dtheta) + tuple(v.sum(0) for v in per_nd_grads) + dh0


_fused.defvjp(_fused_fwd, _fused_bwd, symbolic_zeros=True)


def _odd_part(n: int) -> int:
  return n >> ((n & -n).bit_length() - 1)


def span(length: int, *steps: int) -> int:
  """The time block S both kernels tile as G chunks of L steps (G a power of two, as Triton's
  tiles are): the least S >= length that every kernel's L divides into a power of two of
  chunks. L need not be a power of two, but the kernels' L must differ by a power-of-two factor:
  60 steps are 4 chunks of 15 with no padding, where L = 8 pads them to 64."""
  if any(not isinstance(v, int) or v < 1 for v in steps):
    raise ValueError(f"pallas_chunked: steps per chunk must be positive integers, got {steps}")
  odd = {_odd_part(v) for v in steps}
  if len(odd) > 1:
    raise ValueError(f"pallas_chunked: the kernels' steps per chunk {steps} must differ by a "
                     f"power of two (one time block holds a power of two of chunks of each)")
  m = odd.pop()
  return m * sequential_kernel._pow2(-(-max(length, *steps) // m))


def steps_for(length: int, kind: str, like: int | None = None, lanes: int = 1) -> int:
  """The kind's default steps per chunk for `length` steps: of `STEPS[kind]`, the L that leaves
  a thread the fewest steps to walk, L max(G, lanes) where G chunks of L span the length and
  `lanes` chunks fill the backward tile's warps (with fewer, lanes hold copies: at 60 steps
  (4, 1) counts 0.53 ms per run with 4 chunks of 15 against 0.29 with 8 of 8); then the least
  span (the least padding), then the least L. With `like` (the other kernel's L) only those
  that differ from it by a power of two (`span`), or `like` itself if none does."""
  fits = [L for L in range(*STEPS[kind])
          if like is None or _odd_part(L) == _odd_part(like)] or [like]
  spans = {L: span(length, L, *([like] if like else [])) for L in fits}
  return min(fits, key=lambda L: (L * max(spans[L] // L, lanes), spans[L], L))


def _steps_of(tile) -> int | None:
  """A forward tile's own steps per chunk: its third entry, if it has one."""
  return tile[2] if tile is not None and len(tile) > 2 else None


class Plan(NamedTuple):
  """What a scan of given sizes runs (`plan`): tiles (forward's without its L), channel blocks
  per backward program, the backward's loop, (the forward's L, the backward's L), the span,
  the forward's loop."""
  forward: tuple[int, int]
  backward: tuple[int, int]
  blocks: int
  loop: str
  steps: tuple[int, int]
  span: int
  forward_loop: str


def plan(kind: str, length: int, channels: int, states: int, forward=None, backward=None,
         steps: int | None = None, blocks: int | None = None, loop: str | None = None,
         forward_loop: str | None = None) -> Plan:
  """`scan`'s arguments resolved against the defaults for `length` steps of `channels` and
  `states`. Steps per chunk: `steps` for both kernels unless the forward tile names its own;
  by default the default forward tile's, if it has one, and `steps_for` the length. A forward
  that loops over time reads the backward's chunks (its steps one by one, whatever L is)."""
  P = sequential_kernel._pow2(length)  # default tiles as for time padded to a power of two
  if forward_loop is None:  # by default, not past the states a lane holds; by name it runs
    forward_loop = FORWARD_LOOP[kind]
    forward_loop = "states" if states > TIME_LOOP_MAX_STATES else forward_loop
  if forward_loop not in FORWARD_LOOPS or (forward_loop == "time" and kind != "real"):
    raise ValueError(f"forward loop {forward_loop!r} for the {kind} kind; choose one of "
                     f"{', '.join(FORWARD_LOOPS if kind == 'real' else FORWARD_LOOPS[:1])}")
  default_fwd = FORWARD_BY_TIME[kind] if forward_loop == "time" else FORWARD[kind]
  if forward_loop == "time" and forward is not None and len(forward) > 2:
    raise ValueError(f"pallas_chunked: a forward that loops over time walks steps one by one; "
                     f"its tile is (channels, warps), got {tuple(forward)}")
  fwd = sequential_kernel._tile(forward and forward[:2],
                                pallas_parallel.default_tile(default_fwd[:2], P), channels)
  bwd = sequential_kernel._tile(backward, pallas_parallel.default_tile(BACKWARD[kind], P),
                                channels)
  blocks = CHANNEL_BLOCKS[kind] if blocks is None else blocks
  sequential_kernel._check_pow2("channel blocks per program", blocks)
  loop = loop or BACKWARD_LOOP[kind]
  if loop not in LOOPS or (loop == "channels" and kind != "real"):
    raise ValueError(f"backward loop {loop!r} for the {kind} kind; choose one of "
                     f"{', '.join(LOOPS if kind == 'real' else LOOPS[:1])}")
  blocks = 1 if loop == "channels" else blocks  # the channel loop sums shared rows itself
  blocks = max(1, min(blocks, sequential_kernel._pow2(channels) // bwd[0]))
  own = None if forward_loop == "time" else (_steps_of(forward) or steps
                                              or _steps_of(default_fwd))
  # chunks that fill the backward tile's warps: its tiles are (rows, G), rows its channels, or
  # all states where it loops over channels
  lanes = max(1, 32 * bwd[1] // (states if loop == "channels" else bwd[0]))
  bwd_steps = steps or steps_for(length, kind, own, lanes)
  fwd_steps = own or bwd_steps
  return Plan(fwd, bwd, blocks, loop, (fwd_steps, bwd_steps),
              span(length, fwd_steps, bwd_steps), forward_loop)


def _passes(kind: str, per_pass) -> tuple[str, str]:
  """(forward, backward) of `scan`'s per_pass, checked (`kernels.PASSES`)."""
  pair = (PASS[kind] if per_pass is None else
          (per_pass, per_pass) if isinstance(per_pass, str) else tuple(per_pass))
  if len(pair) != 2 or not set(pair) <= set(kernels.PASSES):
    raise ValueError(f"pallas_chunked: per_pass {per_pass!r}; choose one of "
                     f"{', '.join(kernels.PASSES)}, or a (forward, backward) pair of them")
  return pair


def scan(f: F.Factors, forward: tuple[int, ...] | None = None,
         backward: tuple[int, int] | None = None, steps: int | None = None,
         interpret: bool | None = None, blocks: int | None = None, loop: str | None = None,
         per_pass: str | tuple[str, str] | None = None, forward_loop: str | None = None):
  """y (b, t, d) of the factored recurrence, fused; same contract as the reference; for
  channels-first factors (read as they are) y is (d, b, t). The constant family goes to
  `pallas_parallel`, sequences longer than MAX_LENGTH steps to `pallas` (as `pallas_parallel`
  hands them). `forward` (default `FORWARD`): (channels per program, warps) or, with the
  forward's own steps per chunk, (channels, warps, L); `steps`: L of both kernels unless the
  forward tile passed names its own (default: `plan`);
  `blocks`: channel blocks per backward program (default `CHANNEL_BLOCKS`); `loop`: what a
  backward program loops over (default `BACKWARD_LOOP`); `per_pass`: what a pass of each
  kernel's loop takes, (forward, backward) or one for both (default `PASS`; for a forward that
  loops over time, steps); `forward_loop`: what a forward program loops over (default
  `FORWARD_LOOP`)."""
  if f.family == "complex" and f.length > MAX_LENGTH:  # no other kernel reads the family
    from ssm_bench.scan import chunked
    return chunked.scan(f)
  if f.family not in FAMILIES or f.length > MAX_LENGTH:
    return pallas_parallel.scan(f, interpret=interpret)
  if interpret is None:
    interpret = jax.default_backend() != "gpu"
  kind, cf = KIND[f.family], f.channels_first
  D, b, T = f.x.shape if cf else (f.x.shape[2], f.x.shape[0], f.x.shape[1])
  N = f.h0.shape[-1]
  if not interpret and N & (N - 1) and (loop or BACKWARD_LOOP[kind]) == "channels":
    # the channel loop's tiles hold all N states, and Triton's tiles are powers of two
    if loop:
      raise ValueError(f"pallas_chunked: the backward that loops over channels holds all "
                       f"{N} states in its tiles, which compiled must be a power of two")
    loop = "states"
  fwd, bwd, blocks, loop, (fwd_steps, bwd_steps), S, fwd_loop = plan(
      kind, T, D, N, forward, backward, steps, blocks, loop, forward_loop)
  Dp = -(-D // max(fwd[0], bwd[0] * blocks)) * max(fwd[0], bwd[0] * blocks)
  f32 = lambda v: v.astype(jnp.float32)
  per_t = lambda v, width: (  # (batch, width, S), channels first (width, batch, S)
      sequential_kernel._pad(f32(v), (width, None, S)) if cf else
      sequential_kernel._pad(jnp.swapaxes(f32(v), 1, 2), (None, width, S)))
  per_nd = lambda v: sequential_kernel._pad(f32(v).T, (None, Dp))  # (d, n) -> (n, Dp)
  h0 = lambda v: (per_nd(v) if v.ndim == 2 else  # shared (d, n), or (b, d, n) -> (b, n, Dp)
                  sequential_kernel._pad(jnp.swapaxes(f32(v), 1, 2), (None, None, Dp)))
  if kind == "real":
    ins = (per_t(f.x, Dp), per_t(f.dt, Dp), per_nd(f.lam), per_t(f.B, N), per_t(f.C, N),
           h0(f.h0))
  else:  # padded steps have theta = 0 (a = 1) or a = 0, and x = 0: after every real step
    per_step = (f.theta,) if kind == "phase" else (f.a.real, f.a.imag)
    ins = ((per_t(f.x, Dp),) + tuple(per_t(v, N) for v in per_step)
           + tuple(per_nd(v) for v in (f.B.real, f.B.imag, f.C.real, f.C.imag))
           + (h0(f.h0.real), h0(f.h0.imag)))
  static = (kind, f.family == "signed_decay", fwd, bwd, (fwd_steps, bwd_steps), interpret, cf,
            blocks, loop, _passes(kind, per_pass), fwd_loop, f.discretize)
  y = _fused(static, *ins)
  return y[:D, :, :T] if cf else jnp.swapaxes(y[:, :D, :T], 1, 2)
