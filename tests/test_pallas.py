"""The step-by-step fused kernel (`pallas`): its tiles, joined reductions and prefetch, the
padding of time, runs under vmap, what its forward saves, and its lowering for CUDA.

Its agreement with the float64 loop, every family, is in test_diagonal_scan.py (the method is in
scan.METHODS); the kernels run in interpret mode here.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpr_walk import equations
from ssm_bench import scan
from test_diagonal_scan import (assert_runs_under_vmap_match_the_sequential_scan, factored_inputs,
                       to_factors)

pytestmark = pytest.mark.heavy  # a minute or more in all: scheduled first (conftest.py)


@pytest.mark.parametrize("family", scan.FUSED_FAMILIES)
def test_pallas_forward_and_backward_tiles_are_independent(family):
  """Any power-of-two tile per kernel and any chunk give the reference's values and gradients,
  also when the backward's channel block differs from the forward's (padding to the larger)."""
  from ssm_bench.scan import pallas
  f = to_factors(family, factored_inputs(family, 37, d=5, n=3))
  w = jnp.asarray(np.random.default_rng(4).normal(size=f.x.shape), jnp.float32)
  value_and_grad = lambda fn: jax.jit(jax.value_and_grad(lambda f: jnp.sum(w * fn(f))))(f)
  want = value_and_grad(lambda f: scan.diagonal_scan(f, "sequential"))
  for kw in (dict(forward=(8, 1), backward=(2, 2), chunk=4),
             dict(forward=(2, 4), backward=(8, 1), chunk=16, join=True),
             dict(forward=(4, 2), backward=(4, 2), chunk=8, prefetch=True)):
    got = value_and_grad(lambda f: pallas.scan(f, **kw))
    for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
      np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-4, atol=1e-5,
                                 err_msg=f"{family}, tiles {kw}: differs from the reference")
  for bad in (dict(forward=(3, 4)), dict(backward=(4, 3)), dict(chunk=6)):
    with pytest.raises(ValueError, match="power of two"):
      pallas.scan(f, **bad)
  # each kernel is launched with its own tile: grid (batch, channel blocks) and warps
  jaxpr = jax.make_jaxpr(jax.grad(lambda f: jnp.sum(pallas.scan(
      f, forward=(8, 1), backward=(2, 2), interpret=False))))(f)
  launched = [(e.params["grid_mapping"].grid, e.params["compiler_params"].num_warps)
              for e in equations(jaxpr.jaxpr) if e.primitive.name == "pallas_call"]
  assert launched == [((2, 1), 1), ((2, 4), 2)], f"{family}: kernels launched as {launched}"


@pytest.mark.parametrize("family", ["decay", "signed_decay"])
def test_pallas_joined_reductions_halve_the_real_backwards_reductions(family):
  """join=True pairs the real backward's four reductions per step (dx, ddt over the state; dB,
  dC over channels) into two; its values and gradients are checked in the tiles test above."""
  from ssm_bench.scan import pallas
  f = to_factors(family, factored_inputs(family, 37, d=8, n=3))
  counts = {}
  for join in (False, True):
    jaxpr = jax.make_jaxpr(jax.grad(lambda f: jnp.sum(pallas.scan(
        f, chunk=8, join=join, interpret=False))))(f)
    calls = [e for e in equations(jaxpr.jaxpr) if e.primitive.name == "pallas_call"]
    counts[join] = [sum(e.primitive.name == "reduce_sum" for e in equations(c.params["jaxpr"]))
                    for c in calls]
  assert counts == {False: [8, 32], True: [8, 16]}, f"reductions (forward, backward): {counts}"


@pytest.mark.parametrize("family", scan.FUSED_FAMILIES)
def test_pallas_prefetch_reads_a_chunks_inputs_before_it_writes_and_changes_no_number(family):
  """prefetch=True: in each kernel's chunk loop every read of memory comes before the first
  write (direct: they interleave, step by step); values and gradients bit-identical to direct."""
  from ssm_bench.scan import pallas
  f = to_factors(family, factored_inputs(family, 37, d=8, n=3))
  w = jnp.asarray(np.random.default_rng(5).normal(size=f.x.shape), jnp.float32)
  loss = lambda prefetch: (lambda f: jnp.sum(w * pallas.scan(f, chunk=8, prefetch=prefetch)))
  direct, fetched = (jax.value_and_grad(loss(p))(f) for p in (False, True))
  for a, b in zip(jax.tree.leaves(direct), jax.tree.leaves(fetched)):
    assert np.array_equal(np.asarray(a), np.asarray(b)), f"{family}: prefetch changed a number"

  def reads_after_first_write(prefetch):
    """Per kernel (forward, backward): reads in its chunk loop's body after the first write."""
    jaxpr = jax.make_jaxpr(jax.grad(loss(prefetch)))(f)
    out = []
    for call in (e for e in equations(jaxpr.jaxpr) if e.primitive.name == "pallas_call"):
      loop = next(e for e in call.params["jaxpr"].eqns if e.primitive.name in ("scan", "while"))
      body = next(iter(jax.extend.core.jaxprs_in_params(loop.params)))
      kinds = [e.primitive.name for e in body.eqns if e.primitive.name in ("get", "swap")]
      first_write = kinds.index("swap")
      out.append(kinds[first_write:].count("get"))
    return out

  assert reads_after_first_write(True) == [0, 0], f"{family}: prefetch still reads after a write"
  assert min(reads_after_first_write(False)) > 0, f"{family}: the direct order already prefetches"


@pytest.mark.parametrize("family", scan.FUSED_FAMILIES)
def test_pallas_kernel_lowers_for_cuda(family):
  """The Triton lowering runs on CPU: an unsupported primitive fails here, not on the GPU."""
  from ssm_bench.scan import pallas
  f = to_factors(family, factored_inputs(family, 60, b=2, d=16, n=4))
  loss = lambda f: jnp.sum(pallas.scan(f, interpret=False) ** 2)
  stacked = jax.tree.map(lambda x: jnp.stack([x, x]), f)  # a vmapped group of two runs
  joined = lambda f: jnp.sum(pallas.scan(f, join=True, interpret=False) ** 2)
  prefetched = lambda f: jnp.sum(pallas.scan(f, prefetch=True, interpret=False) ** 2)
  primal = lambda f: pallas.scan(f, interpret=False)  # evaluation: no boundary states
  odd = to_factors(family, factored_inputs(family, 70, b=2, d=16, n=4))  # 72 steps, not 128
  for fn, args in ((jax.grad(loss), f), (jax.vmap(jax.grad(loss)), stacked),
                   (jax.grad(joined), f), (jax.grad(prefetched), f), (primal, f),
                   (jax.grad(loss), odd)):
    lowered = jax.jit(fn).trace(args).lower(lowering_platforms=("cuda",))
    assert "triton" in lowered.as_text().lower(), f"{family}: no Triton kernel in the lowering"


@pytest.mark.parametrize("length,padded", [(60, 64), (70, 72), (1000, 1000)])
def test_pallas_pads_time_to_whole_chunks_not_a_power_of_two(length, padded):
  """At evaluation's 10,000 steps a power of two would be 16,384: 64% more kernel work."""
  from ssm_bench.scan import pallas
  f = to_factors("signed_decay", factored_inputs("signed_decay", length, b=1, d=4, n=2))
  jaxpr = jax.make_jaxpr(lambda f: pallas.scan(f, chunk=8, interpret=False))(f)
  (call,) = [e for e in equations(jaxpr.jaxpr) if e.primitive.name == "pallas_call"]
  assert call.invars[0].aval.shape[1] == padded, (
      f"{length} steps went into the kernel as {call.invars[0].aval.shape[1]}, want {padded}")


@pytest.mark.parametrize("family", scan.FUSED_FAMILIES)
def test_pallas_under_vmap_keeps_two_different_runs_apart(family):
  """Two runs with different factors through the kernel (interpret mode)."""
  from ssm_bench.scan import pallas
  runs = [to_factors(family, factored_inputs(family, 23, seed=s, b=2, d=3, n=2)) for s in (1, 2)]
  assert_runs_under_vmap_match_the_sequential_scan(
      lambda f: pallas.scan(f, chunk=8, interpret=True), runs, family)


@pytest.mark.parametrize("family", scan.FUSED_FAMILIES)
def test_pallas_forward_without_gradient_writes_no_boundary_states(family):
  """Evaluation runs the kernel's primal: one output (y); only a forward for a gradient saves
  the chunk-boundary states (one real array, or a real/imaginary pair)."""
  from ssm_bench.scan import pallas
  f = to_factors(family, factored_inputs(family, 37, d=8, n=3))
  outputs = lambda jaxpr: [len(e.outvars) for e in equations(jaxpr.jaxpr)
                           if e.primitive.name == "pallas_call"]
  assert outputs(jax.make_jaxpr(lambda f: pallas.scan(f, interpret=False))(f)) == [1]
  with_grad = outputs(jax.make_jaxpr(jax.grad(lambda f: jnp.sum(pallas.scan(
      f, interpret=False))))(f))
  assert with_grad[0] == 1 + (1 if family in ("decay", "signed_decay") else 2), with_grad
