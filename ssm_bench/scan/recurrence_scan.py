"""An inclusive scan of the first-order recurrence h_r = a_r h_{r-1} + b_r along one axis of a
tile, as one primitive that a Pallas kernel can call.

Pallas's Triton lowering turns `lax.cumsum` into Triton's hardware scan (`tt.scan`), but has no
rule for a scan of pairs, and `lax.associative_scan` traces to slices it cannot lower. This
primitive fills the gap: in interpret mode and off the GPU it is `lax.associative_scan`; in a
Triton kernel it is one `tt.scan` of the pair (a, b) whose combine region is written here in the
arith dialect (not traced from a jaxpr, whose tracing API changes between jax releases).

The combine is (x, y) -> (x_a y_a, y_a x_b + y_b), with x the accumulated side. Forward, x holds
the earlier steps: the result's b part is h_r with h_{-1} = 0. Reversed (flip, scan, flip: the
convention of both lax.associative_scan and Triton), x holds the later steps and the same
combine gives g_r = b_r + a_r g_{r+1}: the adjoint recurrence, when a_r is the next step's
transition. Both outputs (the running product of a, and h) are returned.
"""
from __future__ import annotations

import jax
from jax import lax
from jax.extend import core as jex_core
from jax.interpreters import mlir

recurrence_scan_p = jex_core.Primitive("recurrence_scan")
recurrence_scan_p.multiple_results = True


def _combine(x, y):
  return x[0] * y[0], y[0] * x[1] + y[1]


def _impl(a, b, *, axis, reverse):
  return list(lax.associative_scan(_combine, (a, b), reverse=reverse, axis=axis))


def _abstract(a, b, *, axis, reverse):
  if a.shape != b.shape or a.dtype != b.dtype:
    raise ValueError(f"recurrence_scan: a {a.shape} {a.dtype} and b {b.shape} {b.dtype} differ")
  return [jax.core.ShapedArray(a.shape, a.dtype)] * 2


recurrence_scan_p.def_impl(_impl)
recurrence_scan_p.def_abstract_eval(_abstract)
mlir.register_lowering(recurrence_scan_p, mlir.lower_fun(_impl, multiple_results=True))


def recurrence_scan(a, b, axis: int, reverse: bool = False):
  """(cumulative product of a, h) along `axis`: h_r = a_r h_{r-1} + b_r (reverse: h_{r+1})."""
  return tuple(recurrence_scan_p.bind(a, b, axis=axis, reverse=reverse))


def _register_triton_rule():
  # Private jax modules: imported here so that a jax without them fails only the Triton path.
  from jax._src.lib.mlir import ir
  from jax._src.lib.mlir.dialects import arith
  from jax._src.lib.triton import dialect as tt
  from jax._src.pallas.triton import lowering

  def rule(ctx, a, b, *, axis, reverse):
    del ctx
    element = ir.RankedTensorType(a.type).element_type
    op = tt.ScanOp([a, b], axis, reverse)
    entry = op.regions[0].blocks.append(element, element, element, element)
    with ir.InsertionPoint.at_block_begin(entry):
      xa, xb, ya, yb = entry.arguments
      tt.scan_return([arith.mulf(xa, ya), arith.addf(arith.mulf(ya, xb), yb)])
    op.verify()
    return list(op.results)

  lowering.register_lowering(recurrence_scan_p)(rule)


_register_triton_rule()
