"""The scan core: one entry point per recurrence shape, interchangeable methods behind it.

- `diagonal_scan(factors, method)`: a diagonal SSM layer's output y_t from its factors (see
  factors.py). Methods: `sequential` / `associative` (the materialized reference: every state is
  an array), `chunked` (plain JAX, any backend, keeps only chunk-boundary states), `pallas`
  (fused GPU kernel with a custom VJP, step by step in time; interpret mode elsewhere, for tests),
  `pallas_parallel` (the same, parallel over time inside a program; see pallas_parallel.py),
  `pallas_chunked` (time as chunks walked in registers, one scan across the chunks; the
  constant family goes to pallas_parallel; see pallas_chunked.py).
- `linear_scan(a, b, h0, method)`: all states of h_t = a_t h_{t-1} + b_t, for layers that need
  the states themselves; `matrix_scan` is the dense form (a full N x N transition per step);
  `householder_scan` the delta rule's (a product of rank-1 corrections of I per step, sequential
  as rank-1 updates). Fused methods map to the reference here.

`auto` picks, per backend (and factor family where they differ: `AUTO_BY_FAMILY`), the method
`launch.bench` measured fastest (BUILD_NOTES);
`recording()` tells which method each call resolved to (what a model's `auto` ran).
"""
from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp

from ssm_bench.scan import chunked
from ssm_bench.scan import factors
from ssm_bench.scan import householder
from ssm_bench.scan import reference
from ssm_bench.scan.factors import FAMILIES, FUSED_FAMILIES, Factors  # noqa: F401

REFERENCE = ("sequential", "associative")
METHODS = ("auto",) + REFERENCE + ("chunked", "pallas", "pallas_parallel", "pallas_chunked")
# Measured by launch.bench (results/bench/README.md): the fastest method per backend. On CPU
# chunked, with its per-family chunk sizes, beat sequential in every whole step timed; on an
# H200 the chunked kernel beat the time-parallel one in 27-run steps with channels-first layers
# (mamba 0.695 vs 0.771 ms per run, negmamba 0.717 vs 0.844, aussm 0.847 vs 1.143), which beat
# the step-by-step one on an H100. Sequences over MAX_LENGTH go on to `pallas`.
AUTO = {"cpu": "chunked", "gpu": "pallas_chunked", "tpu": "associative"}
# Families whose fastest method on a backend is not AUTO's. The constant family (s4d) has no
# chunked kernel: `pallas_chunked` hands it to `pallas_parallel`, and on an H200 s4d's 27-run
# step took 1.149 ms per run there against 0.650 with the step-by-step kernel.
# The complex family's kernel (`pallas_chunked`'s complex kind) is untimed on a GPU, and jax
# 0.10.2's XLA fails to compile a step around it for sm_80, sm_89 and sm_100 when the layer
# hands its factors batch major (0.11.2 compiles all four; channels first compiles on both):
# `auto` keeps the plain-JAX scan there until a GPU times the kernel.
AUTO_BY_FAMILY = {"gpu": {"constant": "pallas", "complex": "chunked"}}
# The delta rule's `auto` on every backend (TPU untimed): its rank-1 form beat the dense
# associative scan on CPU and on an H100 (a deltanet step 7.30 vs 10.56 ms, deltaproduct 7.80 vs
# 14.13, half the memory).
HOUSEHOLDER_AUTO = "sequential"


_RECORDERS = []  # lists collecting each scan call's method while a `recording` block runs


@contextlib.contextmanager
def recording():
  """Collects the method every scan call in the block resolves to (in call order): traced
  through a model, what its scan_method means here, whichever scan its layers call (the
  diagonal layers' AUTO, the delta rule's HOUSEHOLDER_AUTO, the reference scans' choice)."""
  used = []
  _RECORDERS.append(used)
  try:
    yield used
  finally:
    _RECORDERS.remove(used)


def _record(method: str) -> str:
  for used in _RECORDERS:
    used.append(method)
  return method


def default_method(family: str | None = None) -> str:
  """This backend's `auto`; for a factor family, that family's (`AUTO_BY_FAMILY`)."""
  backend = jax.default_backend()
  return AUTO_BY_FAMILY.get(backend, {}).get(family) or AUTO.get(backend, "associative")


def resolve(method: str, family: str | None = None) -> str:
  if method not in METHODS:
    raise ValueError(f"unknown scan method {method!r}; choose one of {', '.join(METHODS)}")
  return default_method(family) if method == "auto" else method


def _reference_method(method: str) -> str:
  method = resolve(method)
  return method if method in REFERENCE else ("sequential" if jax.default_backend() == "cpu"
                                             else "associative")


# The Pallas kernels: each reads B and C in the built-in layers' layout (`Factors.kernel_layout`)
FUSED = ("pallas", "pallas_parallel", "pallas_chunked")
# The fused methods that read channels-first factors as they are (the others get them moved)
READS_CHANNELS_FIRST = ("pallas_parallel", "pallas_chunked")


def routed(method: str, family: str | None = None) -> str:
  """The method `diagonal_scan` runs for a family's factors in the kernels' layout: `method`
  resolved, and a fused method asked for the complex family is the one kernel that reads it."""
  method = resolve(method, family)
  if method in FUSED and family is not None and family not in FUSED_FAMILIES:
    return "pallas_chunked"
  return method


def channels_first(method: str, length: int, family: str | None = None) -> bool:
  """Whether a diagonal layer should build its factors channels first (`Factors`) for this
  method, length and factor family: where a kernel that reads that layout runs them
  (`READS_CHANNELS_FIRST`) and `pallas_parallel.CHANNELS_FIRST_LAYERS` says to. Elsewhere it
  would only cost transposes."""
  if routed(method, family) not in READS_CHANNELS_FIRST:
    return False
  from ssm_bench.scan import pallas_parallel
  return pallas_parallel.CHANNELS_FIRST_LAYERS and length <= pallas_parallel.MAX_LENGTH


def diagonal_scan(f: Factors, method: str = "auto"):
  """y (batch, time, d_model) = Re sum_n C_t h_t for the recurrence the factors describe;
  (d_model, batch, time) for channels-first factors. Factors whose B and C are not in the
  kernels' layout run chunked wherever a fused method was asked for (`recording` shows it)."""
  f.check()
  method = routed(method, f.family)
  if method in FUSED and not f.kernel_layout:
    method = "chunked"  # the kernels read B and C as the built-in layers build them
  method = _record(method)
  if f.channels_first and method not in READS_CHANNELS_FIRST:
    return jnp.moveaxis(_diagonal_scan(f.batch_major(), method), -1, 0)
  return _diagonal_scan(f, method)


def _diagonal_scan(f: Factors, method: str):
  if method == "chunked":
    return chunked.scan(f)
  if method == "pallas":
    from ssm_bench.scan import pallas  # deferred: imports jax.experimental.pallas
    return pallas.scan(f)
  if method == "pallas_parallel":
    from ssm_bench.scan import pallas_parallel
    return pallas_parallel.scan(f)
  if method == "pallas_chunked":
    from ssm_bench.scan import pallas_chunked
    return pallas_chunked.scan(f)
  a, b, C = factors.materialize(f)
  return factors.readout(reference.linear_scan(a, b, f.batched_h0(), method), C)


def linear_scan(a, b, h0=None, method: str = "auto"):
  return reference.linear_scan(a, b, h0, _record(_reference_method(method)))


def matrix_scan(A, b, h0=None, method: str = "auto"):
  return reference.matrix_scan(A, b, h0, _record(_reference_method(method)))


def householder_scan(k, beta, v, h0, method: str = "auto"):
  """All states of the delta rule (DeltaNet, DeltaProduct): see householder.py."""
  if method == "auto" or resolve(method) not in REFERENCE:  # an explicit reference is kept
    method = HOUSEHOLDER_AUTO
  return householder.scan(k, beta, v, h0, _record(method))
