"""The time-parallel fused kernel (`pallas_parallel`) and its scan primitive.

Its agreement with the float64 loop at a short length, every family, is in
test_diagonal_scan.py (the method is in scan.METHODS); here: the primitive, several channel blocks and runs under vmap,
lengths that pad the tile, which inputs it hands to the sequential kernel, and the lowering.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import conftest
from jaxpr_walk import equations, outside_kernels
from ssm_bench import scan
from ssm_bench.scan import pallas_parallel
from ssm_bench.scan.recurrence_scan import recurrence_scan
from test_diagonal_scan import (assert_channels_first_gives_the_same_bits,
                       assert_runs_under_vmap_match_the_sequential_scan, channels_first,
                       factored_inputs, output_and_grad, to_factors)

pytestmark = pytest.mark.heavy  # a minute or more in all: scheduled first (conftest.py)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_recurrence_scan_is_the_linear_recurrence_forward_and_reversed(reverse, dtype):
  rng = np.random.default_rng(0)
  draw = lambda f: f((3, 9)) + (1j * f((3, 9)) if dtype == np.complex128 else 0)
  a, b = draw(lambda s: rng.uniform(-1, 1, s)), draw(lambda s: rng.normal(size=s))
  h, want = np.zeros(3, dtype), np.zeros((3, 9), dtype)
  for t in (reversed(range(9)) if reverse else range(9)):  # h_t = a_t h_{t-/+1} + b_t
    h = a[:, t] * h + b[:, t]
    want[:, t] = h
  f32 = lambda v: jnp.asarray(v, jnp.float32)
  if dtype == np.complex128:  # (re, im) pairs in and out
    (pr, pi), (hr, hi) = recurrence_scan((f32(a.real), f32(a.imag)), (f32(b.real), f32(b.imag)),
                                         axis=1, reverse=reverse)
    prod, got = np.asarray(pr) + 1j * np.asarray(pi), np.asarray(hr) + 1j * np.asarray(hi)
  else:
    prod, got = recurrence_scan(f32(a), f32(b), axis=1, reverse=reverse)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5,
                             err_msg=f"reverse={reverse}: not the recurrence")
  cum = np.cumprod(a[:, ::-1], 1)[:, ::-1] if reverse else np.cumprod(a, 1)
  np.testing.assert_allclose(prod, cum, rtol=1e-5, atol=1e-5, err_msg="not the running product")


@pytest.mark.parametrize("shapes", [((3, 9), (3, 8), (3, 9), (3, 8)), ((3, 9),) * 3])
def test_recurrence_scan_refuses_operands_of_other_shapes_or_counts(shapes):
  """Operands that disagree in shape, or a count that is neither (a, b) nor two (re, im) pairs,
  are refused when traced, naming what it takes, not scanned into a wrong or ragged result."""
  from ssm_bench.scan.recurrence_scan import recurrence_scan_p
  ops = [jnp.zeros(s, jnp.float32) for s in shapes]
  with pytest.raises(ValueError, match=r"\(a, b\) or \(a_re, a_im, b_re, b_im\) of one shape"):
    jax.eval_shape(lambda *o: recurrence_scan_p.bind(*o, axis=1, reverse=False), *ops)


@pytest.mark.parametrize("family,length", [("decay", 60), ("signed_decay", 1), ("rotation", 23),
                                           ("constant", 12)])
def test_runs_under_vmap_with_several_channel_blocks_match_the_sequential_scan(family, length):
  """Two different runs vmapped through the kernel, 20 channels in blocks of 8 (so padded
  channels and partial sums over blocks), lengths that leave the tile's last rows empty (60
  steps in 64 rows, 23 in 32) or fill it (1 step in 2): values and every gradient equal the
  reference's."""
  runs = [to_factors(family, factored_inputs(family, length, seed=s, b=2, d=20, n=3))
          for s in (1, 2)]
  assert_runs_under_vmap_match_the_sequential_scan(
      lambda f: pallas_parallel.scan(f, forward=(8, 1), backward=(8, 1), interpret=True), runs,
      family)


@pytest.mark.parametrize("family,time_major", [("decay", False), ("signed_decay", True),
                                               ("rotation", True), ("constant", False)])
def test_backward_programs_walking_several_channel_blocks_add_one_partial_sum_each(family,
                                                                                   time_major):
  """`blocks`: each backward program walks 2 blocks of 4 channels and adds the blocks' sums of
  the gradients shared over channels (B, C, theta) in place, so 20 channels (padded to 24) make
  3 programs and 3 partial sums per batch row, not 6; values and every gradient of two runs
  under vmap equal the reference's, in either layout."""
  runs = [to_factors(family, factored_inputs(family, 23, seed=s, b=2, d=20, n=3))
          for s in (1, 2)]
  fn = lambda f: pallas_parallel.scan(f, forward=(8, 1), backward=(4, 1), blocks=2,
                                      interpret=True, time_major=time_major)
  assert_runs_under_vmap_match_the_sequential_scan(fn, runs, family)
  jaxpr = jax.make_jaxpr(jax.grad(lambda f: jnp.sum(fn(f))))(runs[0])
  kernels = [e for e in equations(jaxpr.jaxpr) if e.primitive.name == "pallas_call"]
  grids = [k.params["grid_mapping"].grid for k in kernels]
  assert grids == [(2, 3), (2, 3)], f"{family}: grids (forward, backward) {grids}, not 3 programs"



def test_blocks_past_what_the_channels_need_are_capped_so_no_channel_is_padded_for_them():
  """`blocks` at most the channels need: 8 blocks of 4 channels asked for 8 channels walk 2,
  so the programs' inputs stay 8 channels wide (uncapped they were padded to 32)."""
  f = to_factors("decay", factored_inputs("decay", 12, d=8, n=3))
  fn = lambda f: pallas_parallel.scan(f, forward=(4, 1), backward=(4, 1), blocks=8,
                                      interpret=True)
  jaxpr = jax.make_jaxpr(jax.grad(lambda f: jnp.sum(fn(f))))(f)
  widths = {v.aval.shape[1] for e in equations(jaxpr.jaxpr) if e.primitive.name == "pallas_call"
            for v in e.invars[:1]}
  assert widths == {8}, f"the kernels' x is {widths} channels wide for 8 channels"


def _uses_recurrence_scan(f):
  jaxpr = jax.make_jaxpr(jax.grad(lambda f: jnp.sum(pallas_parallel.scan(f, interpret=False))))(f)
  return any(e.primitive.name == "recurrence_scan" for e in equations(jaxpr.jaxpr))


@pytest.mark.parametrize("family", scan.FUSED_FAMILIES)
def test_takes_any_family_up_to_its_length_and_hands_longer_ones_to_the_sequential_kernel(family):
  short = to_factors(family, factored_inputs(family, pallas_parallel.MAX_LENGTH, d=2, n=2))
  long = to_factors(family, factored_inputs(family, pallas_parallel.MAX_LENGTH + 1, d=2, n=2))
  assert _uses_recurrence_scan(short), f"{family}: not time-parallel at MAX_LENGTH"
  assert not _uses_recurrence_scan(long), f"{family}: past MAX_LENGTH it must not be time-parallel"


@pytest.mark.parametrize("family,scans", [("decay", 2), ("rotation", 2), ("signed_decay", 3),
                                          ("constant", 3)])
def test_backward_scans_twice_per_state_where_h_prev_needs_no_division(family, scans):
  """The backward kernel's state loop runs the recurrence, the adjoint and, only where h_{t-1}
  = (h_t - b_t) / a_t would divide (signed decay, constant), a third scan a row earlier."""
  f = to_factors(family, factored_inputs(family, 12, d=2, n=2))
  jaxpr = jax.make_jaxpr(jax.grad(lambda f: jnp.sum(pallas_parallel.scan(f, interpret=False))))(f)
  kernels = [e for e in equations(jaxpr.jaxpr) if e.primitive.name == "pallas_call"]
  count = [sum(q.primitive.name == "recurrence_scan" for q in equations(e.params["jaxpr"]))
           for e in kernels]
  assert count == [1, scans], f"{family}: scans per state (forward, backward) {count}"


@pytest.mark.parametrize("family", scan.FUSED_FAMILIES)
def test_kernels_lower_for_cuda_with_the_hardware_scan(family):
  """The Triton lowering runs on CPU: the primitive's rule (a `tt.scan` of pairs) is found and
  verifies, for the gradient, a vmapped group and evaluation's primal."""
  f = to_factors(family, factored_inputs(family, 60, b=2, d=16, n=4))
  loss = lambda f: jnp.sum(pallas_parallel.scan(f, interpret=False) ** 2)
  stacked = jax.tree.map(lambda x: jnp.stack([x, x]), f)
  primal = lambda f: pallas_parallel.scan(f, interpret=False)
  cases = [(jax.grad(loss), f), (primal, f)]
  if family == "signed_decay":  # a vmapped group adds a grid axis: once is enough
    cases.append((jax.vmap(jax.grad(loss)), stacked))
  for fn, args in cases:
    lowered = jax.jit(fn).trace(args).lower(lowering_platforms=("cuda",))
    assert "triton" in lowered.as_text().lower(), f"{family}: no Triton kernel in the lowering"


def test_longer_sequences_take_fewer_channels_by_default_so_a_thread_holds_as_much():
  """The defaults hold for a 64-row time axis; at 256 rows (16, 4) spills in the backward and
  (4, 4) does not (ptxas). Tiles passed explicitly stay as given."""
  spans = (2, 64, 128, 256)
  assert [pallas_parallel.default_tile((16, 4), s) for s in spans] == [
      (16, 4), (16, 4), (8, 4), (4, 4)], "default tiles do not shrink with the time axis"
  from launch.bench_registers import triton_modules
  f = to_factors("decay", factored_inputs("decay", 255, b=1, d=16, n=2))
  grad = lambda **tiles: jax.grad(lambda f: jnp.sum(pallas_parallel.scan(f, interpret=False,
                                                                         **tiles)))
  # channel tiles of 2-16 rows (a width of 1 is also a reduction's keepdims result)
  shapes = lambda texts: {c for t in texts for c in (2, 4, 8, 16) if f"tensor<{c}x256x" in t}
  # 256 rows: a quarter of the channels of the defaults' 64-row tiles
  want = {max(1, tile[0] // 4) for tile in (pallas_parallel.FORWARD["real"],
                                            pallas_parallel.BACKWARD["real"])}
  assert shapes(triton_modules(grad(), f)) == want, f"255 steps: not {want} channels by default"
  assert shapes(triton_modules(grad(forward=(16, 4), backward=(16, 4)), f)) == {16}, (
      "an explicit tile was changed")


def test_each_kernel_kind_takes_its_own_default_tiles(monkeypatch):
  """FORWARD and BACKWARD are per kind (what `launch.bench --apply_tiles` sets after a sweep of
  one kind): changing the phase kind's tiles leaves the real kind's alone."""
  seen = {}

  def fused(static, *ins):  # record the tiles, return y's padded shape
    seen[static[0]] = static[2:4]
    b, Dp, rows = ins[0].shape
    return jnp.zeros((b, Dp, rows - 2))
  monkeypatch.setattr(pallas_parallel, "_fused", fused)
  monkeypatch.setitem(pallas_parallel.FORWARD, "phase", (4, 2))
  monkeypatch.setitem(pallas_parallel.BACKWARD, "phase", (8, 1))
  for family in ("rotation", "decay"):
    pallas_parallel.scan(to_factors(family, factored_inputs(family, 12, b=1, d=128, n=4)))
  real = (pallas_parallel.FORWARD["real"], pallas_parallel.BACKWARD["real"])
  assert seen == {"phase": ((4, 2), (8, 1)), "real": real}, f"tiles per kind: {seen}"


@pytest.mark.parametrize("family", ["decay", "signed_decay", "rotation", "constant"])
def test_the_layers_layout_computes_the_same_bits_and_transposes_no_sequence_outside(family):
  """`time_major`: the kernels read (batch, time, channels) and transpose tiles in registers;
  "rows": only the per-state rows (B, C, theta: n = 3 here) are read time-major. Values and
  every gradient equal the time-minor kernels' bit for bit (interpret mode), and outside the
  kernels no array with a time axis (23 steps, 32 or 34 rows) is transposed (True), or none
  with a state axis ("rows"; the per-channel ones still are)."""
  f = to_factors(family, factored_inputs(family, 23, seed=1, b=2, d=20, n=3))
  outputs, time_axes = {}, {23, 32, 34}
  for tm in (False, "rows", True):
    fn = lambda f: pallas_parallel.scan(f, forward=(8, 1), backward=(8, 2), interpret=True,
                                        time_major=tm)
    loss = lambda f: jnp.sum(jnp.sin(fn(f)))
    y, g = output_and_grad(fn, jnp.cos, conftest.USERS_COMPILE)(f)  # dL/dy = cos(y)
    outputs[tm] = [y] + jax.tree.leaves(g)
    jaxpr = jax.make_jaxpr(jax.grad(loss))(f).jaxpr
    moved = [e.invars[0].aval.shape for e in outside_kernels(jaxpr)
             if e.primitive.name == "transpose" and time_axes & set(e.invars[0].aval.shape)]
    per_state = [shape for shape in moved if 3 in shape]
    want = {False: (True, family != "constant"), "rows": (True, False), True: (False, False)}
    assert (bool(moved), bool(per_state)) == want[tm], (
        f"time_major={tm}: sequences transposed outside: {moved}")
  for tm in ("rows", True):
    for i, (a, b) in enumerate(zip(outputs[False], outputs[tm])):
      np.testing.assert_array_equal(a, b, err_msg=f"{family}: output {i} differs by layout {tm}")
  from launch.bench_registers import triton_modules  # and it lowers to Triton for CUDA
  cuda = lambda f: jax.grad(lambda f: jnp.sum(jnp.sin(pallas_parallel.scan(
      f, interpret=False, time_major=True))))(f)
  assert len(triton_modules(cuda, f)) == 2, f"{family}: not a forward and a backward kernel"


@pytest.mark.parametrize("family", scan.FUSED_FAMILIES)
def test_channels_first_factors_compute_the_same_bits_and_transpose_no_sequence_outside(family):
  """Factors a layer built channels first, (channels, batch, time): the kernels read their
  tiles as they are, so outside the kernels no array with a time axis (23 steps, 32 or 34 rows)
  is transposed, and two runs under vmap, with backward programs of 2 channel blocks, give the
  time-minor kernels' values and gradients bit for bit (y as (d, b, t))."""
  runs = [to_factors(family, factored_inputs(family, 23, seed=s, b=2, d=20, n=3))
          for s in (1, 2)]
  fn = lambda f: pallas_parallel.scan(f, forward=(8, 1), backward=(4, 1), blocks=2,
                                      interpret=True, time_major=False)
  assert_channels_first_gives_the_same_bits(fn, runs, family)
  jaxpr = jax.make_jaxpr(jax.grad(lambda f: jnp.sum(fn(f))))(channels_first(runs[0])).jaxpr
  moved = [e.invars[0].aval.shape for e in outside_kernels(jaxpr)
           if e.primitive.name == "transpose" and {23, 32, 34} & set(e.invars[0].aval.shape)]
  assert not moved, f"{family}: sequences transposed outside the kernels: {moved}"
  from launch.bench_registers import triton_modules  # and it lowers to Triton for CUDA
  cuda = lambda f: jax.grad(lambda f: jnp.sum(jnp.sin(pallas_parallel.scan(
      f, interpret=False))))(f)
  assert len(triton_modules(cuda, channels_first(runs[0]))) == 2, (
      f"{family}: not a forward and a backward kernel")


@pytest.mark.parametrize("family,h0_outputs", [("decay", 1), ("signed_decay", 1),
                                               ("rotation", 2), ("constant", 2)])
def test_a_constant_initial_state_costs_the_backward_no_h0_gradient(family, h0_outputs):
  """The paper's h0 is a constant, not a parameter: the backward kernel then writes no h0
  gradient (a reduction over time per state fewer; 1 output fewer for the real kind, 2 for
  the complex ones), and every other gradient still equals the sequential scan's. A learned
  h0 keeps its gradient (the other tests differentiate every input)."""
  f = to_factors(family, factored_inputs(family, 23, seed=1, b=2, d=20, n=3))
  fused = lambda f: pallas_parallel.scan(f, forward=(8, 1), backward=(8, 1), interpret=True)
  frozen = lambda scan_fn: lambda f: jnp.sum(jnp.sin(scan_fn(
      dataclasses.replace(f, h0=jax.lax.stop_gradient(f.h0)))))
  got = jax.jit(jax.grad(frozen(fused)))(f)
  want = jax.jit(jax.grad(frozen(lambda f: scan.diagonal_scan(f, "sequential"))))(f)
  for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-4, err_msg=f"{family}: gradient "
                               f"{jax.tree_util.keystr(path)} with a constant h0 differs")
  outputs = {}
  for name, loss in (("constant", frozen(fused)), ("learned", lambda f: jnp.sum(fused(f)))):
    jaxpr = jax.make_jaxpr(jax.grad(loss))(f)
    kernels = [e for e in equations(jaxpr.jaxpr) if e.primitive.name == "pallas_call"]
    outputs[name] = len(kernels[-1].outvars)
  assert outputs["learned"] - outputs["constant"] == h0_outputs, (
      f"{family}: backward kernel outputs {outputs}, want {h0_outputs} fewer with h0 constant")


@pytest.mark.parametrize("family", ["decay", "signed_decay"])
@pytest.mark.parametrize("kernel", ["pallas", "pallas_parallel"])
def test_real_kernels_compute_exp_with_the_hardware_exp2(kernel, family):
  """exp(dt lam) as 2^(dt lam log2 e), in both fused kernels: libdevice's exp2f is one
  `ex2.approx` where expf is eight instructions per element, a quarter of the time-parallel
  real kernels' instructions (results/bench/README.md, "Instruction counts")."""
  from launch.bench_registers import _scan_fn, triton_modules
  f = to_factors(family, factored_inputs(family, 12, b=1, d=16, n=2))
  texts = triton_modules(_scan_fn(kernel, (8, 2)), f)
  assert len(texts) == 2, f"{kernel}: {len(texts)} kernels"
  for which, text in zip(("forward", "backward"), texts):
    assert "__nv_exp2f" in text and "__nv_expf" not in text, (
        f"{kernel} {family} {which}: exp is not lowered to exp2")


def test_an_unknown_layout_is_one_error_naming_the_choices():
  f = to_factors("decay", factored_inputs("decay", 4, b=1, d=2, n=2))
  with pytest.raises(ValueError, match=r"layout 'cols': choose one of \[False, 'rows', True\]"):
    pallas_parallel.scan(f, interpret=True, time_major="cols")


def test_phase_kernels_read_theta_as_its_cos_and_sin_computed_outside():
  """libdevice's cos and sin, per state and view inside the kernels, were 40-50% of the phase
  kernels' instructions (static count): XLA computes them once per (step, state) instead, and
  the kernels hold no trigonometry (the values and gradients: every other rotation test)."""
  from launch.bench_registers import triton_modules
  f = to_factors("rotation", factored_inputs("rotation", 12, b=1, d=16, n=2))
  texts = triton_modules(jax.grad(lambda f: jnp.sum(jnp.sin(pallas_parallel.scan(
      f, interpret=False)))), f)
  assert len(texts) == 2, f"{len(texts)} kernels"
  for which, text in zip(("forward", "backward"), texts):
    trig = sorted({name for name in ("__nv_cosf", "__nv_sinf", "math.cos", "math.sin")
                   if name in text})
    assert not trig, f"the {which} kernel computes {trig}"
