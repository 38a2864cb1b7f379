"""An inclusive scan of the first-order recurrence h_r = a_r h_{r-1} + b_r along one axis of a
tile, as one primitive that a Pallas kernel can call.

Pallas's Triton lowering turns `lax.cumsum` into Triton's hardware scan (`tt.scan`), but has no
rule for a scan of pairs, and `lax.associative_scan` traces to slices it cannot lower. This
primitive fills the gap: in interpret mode and off the GPU it is `lax.associative_scan`; in a
Triton kernel it is one `tt.scan` of the pair (a, b) whose combine region is built here from the
arith dialect's ops (not traced from a jaxpr, whose tracing API changes between jax releases),
by the same combine function that interpret mode applies with Python's operators.

The combine is (x, y) -> (x_a y_a, y_a x_b + y_b), with x the accumulated side. Forward, x holds
the earlier steps: the result's b part is h_r with h_{-1} = 0. Reversed (flip, scan, flip: the
convention of both lax.associative_scan and Triton), x holds the later steps and the same
combine gives g_r = b_r + a_r g_{r+1}: the adjoint recurrence, when a_r is the next step's
transition. Both outputs (the running product of a, and h) are returned.

Complex recurrences (Triton has no complex dtype) pass a and b as real/imaginary pairs: four
operands, the same combine in complex arithmetic. `exclusive_recurrence_scan` is a second
primitive of the same making: each position's state one step before it (`pallas_chunked`).
"""
from __future__ import annotations

import operator

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend import core as jex_core
from jax.interpreters import mlir


class Arith:
  """Arithmetic on real tiles or complex (re, im) pairs from three real ops: the combines below
  are written once over it, run with Python's operators (`ARITH`: interpret mode, off the GPU,
  and the kernels' own complex arithmetic) or with the arith dialect's ops in the Triton rule."""

  def __init__(self, mul, add, sub):
    self._mul, self._add, self._sub = mul, add, sub

  def mul(self, x, y):
    if not isinstance(x, tuple):
      return self._mul(x, y)
    (xr, xi), (yr, yi), m = x, y, self._mul
    return self._sub(m(xr, yr), m(xi, yi)), self._add(m(xr, yi), m(xi, yr))

  def add(self, x, y):
    if not isinstance(x, tuple):
      return self._add(x, y)
    return self._add(x[0], y[0]), self._add(x[1], y[1])


ARITH = Arith(operator.mul, operator.add, operator.sub)


def _recurrence_combine(x, y, ar):
  """Segments as (a, b): h_last = a h_before + b; joining the earlier x to y."""
  (xa, xb), (ya, yb) = x, y
  return ar.mul(xa, ya), ar.add(ar.mul(ya, xb), yb)


def _flat(combine, count):
  """`combine` over flat operand lists: `count` numbers per side, each one operand (real) or
  two adjacent ones (re, im)."""
  def flat(x, y, ar):
    pairs = len(x) == 2 * count
    group = lambda v: list(zip(v[::2], v[1::2])) if pairs else list(v)
    out = combine(group(x), group(y), ar)
    return [part for v in out for part in (v if pairs else (v,))]
  return flat


def _scan_primitive(name, segments, count, operand_counts, what):
  """A primitive scanning `count` numbers per position (each one operand, or two for complex
  ones where `operand_counts` allows) with `segments`' combine: `lax.associative_scan` in
  interpret mode and off the GPU; the Triton rule (`_register_triton_rules`) reuses the
  combine. Returns the primitive and its flat combine."""
  primitive = jex_core.Primitive(name)
  primitive.multiple_results = True
  combine = _flat(segments, count)

  def impl(*operands, axis, reverse):
    return list(lax.associative_scan(lambda x, y: tuple(combine(x, y, ARITH)), operands,
                                     reverse=reverse, axis=axis))

  def abstract(*operands, axis, reverse):
    a = operands[0]
    if len(operands) not in operand_counts or any(o.shape != a.shape or o.dtype != a.dtype
                                                  for o in operands):
      raise ValueError(f"{name}: {what} of one shape and dtype, got "
                       f"{[(o.shape, o.dtype) for o in operands]}")
    return [jax.core.ShapedArray(a.shape, a.dtype)] * len(operands)

  primitive.def_impl(impl)
  primitive.def_abstract_eval(abstract)
  mlir.register_lowering(primitive, mlir.lower_fun(impl, multiple_results=True))
  return primitive, combine


recurrence_scan_p, _combine = _scan_primitive(
    "recurrence_scan", _recurrence_combine, 2, (2, 4), "(a, b) or (a_re, a_im, b_re, b_im)")


def recurrence_scan(a, b, axis: int, reverse: bool = False):
  """(cumulative product of a, h) along `axis`: h_r = a_r h_{r-1} + b_r (reverse: h_{r+1}).
  Complex: a and b are (re, im) pairs, and so are the two results."""
  if isinstance(a, tuple):
    ar, ai, hr, hi = recurrence_scan_p.bind(*a, *b, axis=axis, reverse=reverse)
    return (ar, ai), (hr, hi)
  return tuple(recurrence_scan_p.bind(a, b, axis=axis, reverse=reverse))


def _exclusive_segments(x, y, ar):
  """Segments as (A, H, Q, R): h_last = A h_before + H and h_(last-1) = Q h_before + R; a
  one-step segment is (a, b, 1, 0), and joining the earlier x to y gives the joined segment's."""
  (xa, xh, _, _), (ya, yh, yq, yr) = x, y  # x's Q, R drop out: the step before last is y's
  return ar.mul(xa, ya), ar.add(ar.mul(ya, xh), yh), ar.mul(yq, xa), ar.add(ar.mul(yq, xh), yr)


exclusive_scan_p, _exclusive_combine = _scan_primitive(
    "exclusive_recurrence_scan", _exclusive_segments, 4, (4, 8),
    "(A, H, Q, R) or their (re, im) pairs")


def exclusive_recurrence_scan(a, b, axis: int, reverse: bool = False):
  """(Q, R) along `axis`: the state one step before each, h_{r-1} = Q_r h_init + R_r, of
  h_r = a_r h_{r-1} + b_r (reverse: h_{r+1} of g_r = a_r g_{r+1} + b_r). One hardware scan of
  four operands: what a kernel needs to hand each chunk the state its predecessors end in, with
  no shift across lanes (Triton has none) and no division by a running product. Complex: a and
  b are (re, im) pairs (a broadcast to b's shape: one transition shared by a tile's rows), and
  so are Q and R, eight operands."""
  if not isinstance(a, tuple):
    _, _, q, r = exclusive_scan_p.bind(a, b, jnp.ones_like(a), jnp.zeros_like(b), axis=axis,
                                       reverse=reverse)
    return q, r
  a = tuple(jnp.broadcast_to(v, b[0].shape) for v in a)
  zero = jnp.zeros_like(b[0])
  *_, qr, qi, rr, ri = exclusive_scan_p.bind(*a, *b, jnp.ones_like(zero), zero, zero, zero,
                                             axis=axis, reverse=reverse)
  return (qr, qi), (rr, ri)


def _register_triton_rules():
  # Private jax modules: imported here so that a jax without them fails only the Triton path.
  from jax._src.lib.mlir import ir
  from jax._src.lib.mlir.dialects import arith
  from jax._src.lib.triton import dialect as tt
  from jax._src.pallas.triton import lowering
  ops = Arith(arith.mulf, arith.addf, arith.subf)

  def triton_rule(combine):
    """One `tt.scan` of the operands, its combine region `combine` over the arith ops."""
    def rule(ctx, *operands, axis, reverse):
      del ctx
      element = ir.RankedTensorType(operands[0].type).element_type
      op = tt.ScanOp(list(operands), axis, reverse)
      entry = op.regions[0].blocks.append(*[element] * (2 * len(operands)))
      with ir.InsertionPoint.at_block_begin(entry):
        args, n = list(entry.arguments), len(operands)
        tt.scan_return(list(combine(args[:n], args[n:], ops)))
      op.verify()
      return list(op.results)
    return rule

  lowering.register_lowering(recurrence_scan_p)(triton_rule(_combine))
  lowering.register_lowering(exclusive_scan_p)(triton_rule(_exclusive_combine))


_register_triton_rules()
