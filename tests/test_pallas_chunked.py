"""The chunked fused kernel (`pallas_chunked`) and its exclusive scan primitive.

Its agreement with the float64 loop at lengths 7 and 1000 (the latter handed on), every family,
is in test_diagonal_scan.py (the method is in scan.METHODS); here: the primitive, lengths whose
time axis holds several chunks (up to 255 steps: 32 chunks of 8), h0 shared or per row with its gradient,
chunk sizes, runs under vmap, what it hands on, and the lowering for CUDA.
"""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpr_walk import equations
from ssm_bench import scan
from ssm_bench.scan import pallas_chunked, pallas_parallel
from ssm_bench.scan.recurrence_scan import exclusive_recurrence_scan
from launch.bench_train_many import outside_kernels
from test_diagonal_scan import (assert_channels_first_gives_the_same_bits,
                       assert_runs_under_vmap_match_the_sequential_scan, before_mambas_rule,
                       channels_first, factored_inputs, output_and_grad, to_factors)

pytestmark = pytest.mark.heavy  # a minute or more in all: scheduled first (conftest.py)


@pytest.mark.parametrize("reverse", [False, True])
def test_exclusive_scan_gives_each_position_the_state_one_step_before_it(reverse):
  rng = np.random.default_rng(0)
  a, b, init = rng.uniform(-1, 1, (3, 9)), rng.normal(size=(3, 9)), rng.normal(size=3)
  q, r = (np.asarray(v) for v in exclusive_recurrence_scan(jnp.asarray(a), jnp.asarray(b),
                                                            axis=1, reverse=reverse))
  h = init.copy()
  for t in (reversed(range(9)) if reverse else range(9)):  # h_t = a_t h_{t-/+1} + b_t
    np.testing.assert_allclose(q[:, t] * init + r[:, t], h, rtol=1e-6, atol=1e-6,
                               err_msg=f"step {t}")
    h = a[:, t] * h + b[:, t]


# decay is signed decay's kernel without the sign: its two main cases suffice
CASES = [(60, "shared", 8), (255, "row", 8), (37, "row", 4), (64, "shared", 16)]


@pytest.mark.parametrize("family,length,h0,steps,loop", [
    (family,) + case + ("states",) for family in pallas_chunked.FAMILIES
    for case in (CASES[:2] if family == "decay" else CASES)] + [
    ("decay",) + CASES[0] + ("channels",), ("signed_decay",) + CASES[2] + ("channels",)])
def test_values_and_gradients_match_the_sequential_scan(family, length, h0, steps, loop):
  """Every gradient, h0's included (a learned initial state), across chunk boundaries, to
  float32's rounding of each array's scale (a rotation's state does not decay: |y| ~ 30); the
  real kind's backward looping over states or over channels (`BACKWARD_LOOP`)."""
  f = to_factors(family, factored_inputs(family, length, d=5, n=3))
  f = dataclasses.replace(f, h0=f.h0[0]) if h0 == "shared" else f
  assert_matches_the_sequential_scan(
      lambda f: pallas_chunked.scan(f, (4, 1), (4, 1), steps, loop=loop), f,
      f"{family}, {length} steps, loop over {loop}")


@pytest.mark.parametrize("family,loop,per_pass", [
    ("signed_decay", "states", "ahead"), ("decay", "channels", "ahead"),
    ("rotation", "states", "ahead"), ("signed_decay", "states", "two"),
    ("decay", "channels", "two"), ("rotation", "states", "two")])
def test_each_pass_of_the_kernels_loops_may_read_ahead_or_take_two_states(family, loop, per_pass):
  """`per_pass` (`PASS`): each pass of the kernels' loops reads the next state's (or channel's)
  inputs while this one computes ("ahead": the loops carry them, so carry more) or takes two
  states (the loops then run half as many passes, an odd one after them); every
  value and gradient still matches the sequential scan across chunk boundaries."""
  f = to_factors(family, factored_inputs(family, 37, d=5, n=3))
  fn = lambda per_pass: (lambda f: pallas_chunked.scan(f, (4, 1), (4, 1), 4, loop=loop,
                                                       per_pass=per_pass))
  assert_matches_the_sequential_scan(fn(per_pass), f, f"{family}, loop over {loop}, {per_pass}")
  loops = {}
  for style in ("one", per_pass):
    jaxpr = jax.make_jaxpr(jax.grad(lambda f: jnp.sum(fn(style)(f))))(f).jaxpr
    loops[style] = [max(((q.params["length"], q.params["num_carry"])
                         for q in equations(e.params["jaxpr"]) if q.primitive.name == "scan"),
                        key=lambda lc: lc[1])
                    for e in equations(jaxpr) if e.primitive.name == "pallas_call"]
  for (length, carry), (one_length, one_carry) in zip(loops[per_pass], loops["one"]):
    assert ((length, carry > one_carry) == (one_length, True) if per_pass == "ahead" else
            length == one_length // 2), (
        f"{family}, loop over {loop}: the kernels' loops (passes, carried) {loops[per_pass]} "
        f"{per_pass}, against {loops['one']} one state a pass")


@pytest.mark.parametrize("family,length,h0,steps,per_pass", [
    ("decay", 60, "shared", 8, "one"), ("signed_decay", 37, "row", 4, "one"),
    ("signed_decay", 255, "row", 8, "one"), ("signed_decay", 37, "row", 4, "ahead"),
    ("decay", 9, "row", 9, "two")])  # 9 steps: 4 passes of two and an odd last one
def test_a_forward_that_loops_over_time_matches_the_sequential_scan(family, length, h0, steps,
                                                                    per_pass):
  """`forward_loop="time"` (`FORWARD_LOOP`): the forward walks a channel's steps one by one
  with its states unrolled, and reads the backward's chunks step by step across their
  boundaries; values (and the backward's gradients) are the sequential scan's, h0 shared or per
  row, and its kernel loops over the time block's S steps with no scan across lanes: a step a
  pass, with the next one's x and dt carried ahead, or two a pass (`per_pass`)."""
  f = to_factors(family, factored_inputs(family, length, d=5, n=3))
  f = dataclasses.replace(f, h0=f.h0[0]) if h0 == "shared" else f
  fn = lambda f: pallas_chunked.scan(f, (4, 1), (4, 1), steps, forward_loop="time",
                                     per_pass=(per_pass, "one"))
  assert_matches_the_sequential_scan(fn, f, f"{family}, {length} steps, forward over time, "
                                            f"{per_pass} a pass")
  forward = [e for e in equations(jax.make_jaxpr(fn)(f).jaxpr)
             if e.primitive.name == "pallas_call"][0].params["jaxpr"]
  walks = [(q.params["length"], q.params["num_carry"]) for q in equations(forward)
           if q.primitive.name == "scan"]
  lanes = {q.primitive.name for q in equations(forward)} & {"exclusive_recurrence_scan"}
  S = pallas_chunked.span(length, steps)
  # carried: the step, the 3 states, and read ahead x and dt
  want = [(S // 2 if per_pass == "two" else S, 4 + 2 * (per_pass == "ahead"))]
  assert (walks, lanes) == (want, set()), (
      f"{family}, {per_pass}: the forward's loops (steps, carried) {walks} and scans across "
      f"lanes {sorted(lanes)}, want {want} and none")

@pytest.mark.parametrize("family,length,steps,forward_loop,loop", [
    ("decay", 60, None, "states", "states"), ("signed_decay", 37, 4, "time", "channels"),
    ("signed_decay", 60, None, "states", "channels"), ("decay", 37, 4, "time", "states")])
def test_the_kernels_apply_mambas_rule_to_what_they_read(family, length, steps, forward_loop,
                                                         loop):
  """Factors handed before Mamba's rule (`Factors.discretize`: dt the pre-activation, x
  unscaled): the gradients of what was handed are the sequential scan's of the rule written out
  (60 steps as 4 chunks of 15: the channel loop's rows joined up to 16; 37 padded to 40), and
  no sequence is softplus'd or scaled outside the kernels (XLA would write dt' and x' out and
  read them again: 1.9 GB of a 27-run mamba step compiled for an H200), but around the
  backward that loops over channels (in it the rule doubled the loop)."""
  f = before_mambas_rule(to_factors(family, factored_inputs(family, length, d=5, n=3)))
  fn = lambda f: pallas_chunked.scan(f, (4, 1), (4, 1), steps, loop=loop,
                                     forward_loop=forward_loop)
  assert_matches_the_sequential_scan(fn, f, f"{family}, {length} steps, forward over "
                                            f"{forward_loop}, backward over {loop}")
  rule_outside = lambda fn: [
      e.primitive.name for e in outside_kernels(jax.make_jaxpr(fn)(f).jaxpr)
      if e.primitive.name in ("exp", "log1p", "expm1", "mul")
      and any(n >= length for n in e.invars[0].aval.shape)]  # a time axis, padded or not
  assert not rule_outside(fn), f"{family}: the forward's rule outside: {rule_outside(fn)}"
  backward = rule_outside(jax.grad(lambda f: jnp.sum(fn(f))))
  assert bool(backward) == (loop == "channels"), (
      f"{family}, backward over {loop}: the rule's ops on sequences outside: {backward}")


@pytest.mark.parametrize("loop", ["states", "channels"])
def test_mambas_rule_where_softplus_underflows_gives_the_sequential_scans_gradients(loop):
  """dt's pre-activation at -120 (softplus 0 in float32, and x' with it) in some channels and
  steps: every gradient finite and the sequential scan's (the backward divides x' by dt')."""
  f = before_mambas_rule(to_factors("decay", factored_inputs("decay", 37, d=5, n=3)))
  f = f.with_steps(dt=f.dt.at[:, ::3, 1:3].set(-120.0))
  assert_matches_the_sequential_scan(
      lambda f: pallas_chunked.scan(f, (4, 1), (4, 1), 4, loop=loop), f,
      f"softplus underflowing, backward over {loop}")


def test_mambas_rule_sigmoid_from_dt_prime_holds_1e_6_relative_down_to_tiny_steps():
  """The backward's sigmoid(dt) = 1 - exp(-dt') (`mamba_rule`), a Taylor series below 0.05 where
  the subtraction would lose digits: within 1e-6 of float64 from dt' = 1e-8 to 100."""
  from ssm_bench.scan import mamba_rule
  d = np.logspace(-8, 2, 2001)
  got = np.asarray(mamba_rule._one_minus_exp_neg(jnp.asarray(d, jnp.float32)), np.float64)
  want = -np.expm1(-d.astype(np.float32).astype(np.float64))
  rel = np.abs(got - want) / want
  assert rel.max() < 1e-6, f"1 - exp(-dt') off by {rel.max():.2e} at dt' = {d[rel.argmax()]:.3g}"


def test_past_the_time_loops_states_the_default_forward_loops_over_states(monkeypatch):
  """A time loop's lane holds every state (`TIME_LOOP_MAX_STATES`, past which it spills): as
  the default it hands more states to the state loop; asked for by name it runs."""
  f = to_factors("decay", factored_inputs("decay", 12, d=5, n=3))
  monkeypatch.setitem(pallas_chunked.FORWARD_LOOP, "real", "time")
  forward = lambda **kw: {q.primitive.name for q in equations([
      e for e in equations(jax.make_jaxpr(lambda f: pallas_chunked.scan(f, **kw))(f).jaxpr)
      if e.primitive.name == "pallas_call"][0].params["jaxpr"])}
  assert "exclusive_recurrence_scan" not in forward(), "3 states: the default time loop"
  monkeypatch.setattr(pallas_chunked, "TIME_LOOP_MAX_STATES", 2)
  assert "exclusive_recurrence_scan" in forward(), "3 states past 2 did not go to the state loop"
  assert "exclusive_recurrence_scan" not in forward(forward_loop="time"), (
      "a time loop asked for by name was not run")

def test_an_unknown_forward_loop_names_the_choices():
  f = to_factors("decay", factored_inputs("decay", 9, d=5, n=3))
  with pytest.raises(ValueError, match="forward loop 'tme' for the real kind; choose one of "
                                       "states, time"):
    pallas_chunked.scan(f, forward_loop="tme", interpret=True)
  with pytest.raises(ValueError, match="its tile is \\(channels, warps\\), got \\(4, 1, 16\\)"):
    pallas_chunked.scan(f, (4, 1, 16), forward_loop="time", interpret=True)
  g = to_factors("rotation", factored_inputs("rotation", 9, d=5, n=3))
  with pytest.raises(ValueError, match="forward loop 'time' for the phase kind; choose one of "
                                       "states$"):
    pallas_chunked.scan(g, forward_loop="time", interpret=True)


def test_an_unknown_pass_of_the_loops_names_the_choices():
  f = to_factors("decay", factored_inputs("decay", 9, d=5, n=3))
  for bad in ("three", ("one",), ("one", "four")):
    with pytest.raises(ValueError, match="per_pass .*; choose one of one, ahead, two"):
      pallas_chunked.scan(f, per_pass=bad, interpret=True)


def assert_matches_the_sequential_scan(fn, f, what):
  """fn(f)'s values and every gradient, h0's included, against the sequential scan's."""
  w = jnp.asarray(np.random.default_rng(4).normal(size=f.x.shape), jnp.float32)
  want, want_g = output_and_grad(lambda f: scan.diagonal_scan(f, "sequential"), lambda y: w)(f)
  got, got_g = output_and_grad(fn, lambda y: w)(f)
  close = lambda a, b, rtol, msg: np.testing.assert_allclose(
      a, b, rtol=rtol, atol=1e-5 * max(1.0, float(np.abs(b).max())), err_msg=msg)
  close(got, want, 1e-5, f"{what}: values")
  for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(got_g), jax.tree.leaves(want_g)):
    close(a, b, 1e-4, f"{what}: d/d{jax.tree_util.keystr(path)} differs")


def _chunking(pallas_eqn):
  """(G, L) of a chunked kernel: the last two axes of its first input's block."""
  shape = pallas_eqn.params["grid_mapping"].block_mappings[0].block_shape
  return tuple(b.block_size for b in shape[-2:])


@pytest.mark.parametrize("family", ["signed_decay", "rotation"])
def test_a_forward_tile_may_name_its_own_steps_per_chunk(family):
  """A forward tile (channels, warps, L): the forward kernel walks chunks of L = 16 steps, the
  backward 8 (of `STEPS`, the one a power of two from 16), and values and every gradient are the
  sequential scan's (37 steps: time padded to 64, 4 chunks forward and 8 backward)."""
  f = to_factors(family, factored_inputs(family, 37, d=5, n=3))
  fn = lambda f: pallas_chunked.scan(f, (4, 1, 16), (4, 1))  # compiled on a GPU
  assert_matches_the_sequential_scan(fn, f, f"{family}, forward L = 16")
  jaxpr = jax.make_jaxpr(jax.grad(lambda f: jnp.sum(fn(f))))(f)
  chunking = {e.params["name"].rsplit("_", 1)[-1]: _chunking(e)
              for e in equations(jaxpr.jaxpr) if e.primitive.name == "pallas_call"}
  assert chunking == {"forward": (4, 16), "backward": (8, 8)}, (
      f"{family}: the kernels' (chunks, steps per chunk) are {chunking}")


def test_the_default_steps_per_chunk_fill_the_warps_and_pad_least():
  """Of `STEPS`, the L that leaves a thread the fewest steps (L times the chunks, or the chunks
  that fill the tile's warps if more), then the least span; beside another kernel's L, one that
  differs from it by a power of two (one time block holds both); a pair that cannot share a
  block is a one-line error."""
  L = lambda T: pallas_chunked.steps_for(T, "real")
  got = {T: (L(T), pallas_chunked.span(T, L(T))) for T in (60, 64, 37, 5, 255)}
  assert got == {60: (15, 60), 64: (8, 64), 37: (10, 40), 5: (8, 8), 255: (8, 256)}, (
      f"(L, span) per length: {got}")
  assert pallas_chunked.steps_for(60, "phase", like=16) == 8, "L beside a forward's 16"
  assert (L(30), pallas_chunked.steps_for(30, "real", lanes=4)) == (15, 8), (
      "30 steps: 2 chunks of 15 where 2 chunks fill the tile's warps, 4 of 8 where 4 do")
  with pytest.raises(ValueError, match=r"steps per chunk \(15, 8\) must differ by a power of two"):
    pallas_chunked.span(60, 15, 8)
  # a sequence shorter than a chunk still spans a whole chunk of each kernel (a forward tile's
  # own L of 16 at 5 steps)
  assert [pallas_chunked.span(5, 16), pallas_chunked.span(5, 8, 16), pallas_chunked.span(3, 15),
          pallas_chunked.span(20, 8, 16)] == [16, 16, 15, 32]


def test_plan_fills_the_backward_tiles_warps_and_keeps_blocks_within_the_channels():
  """`plan` resolves what a scan runs: the chunks that fill the backward tile's 32 lanes a warp
  (over its channels, or over all states where it loops over channels) pick the steps per
  chunk at 60 steps; channel blocks per backward program stop at what the channels hold, and
  the channel loop takes one (it sums the shared rows itself)."""
  plan = lambda **kw: pallas_chunked.plan("real", 60, **kw)
  assert plan(channels=128, states=64, backward=(8, 1)).steps == (15, 15), "4 chunks: 4 of 15"
  assert plan(channels=128, states=64, backward=(4, 1)).steps == (8, 8), "8 chunks: 8 of 8"
  assert plan(channels=128, states=4, loop="channels").steps == (8, 8), "8 lanes of 4 states"
  assert plan(channels=16, states=4, backward=(8, 1), blocks=8).blocks == 2, (
      "16 channels hold 2 blocks of 8")
  assert plan(channels=128, states=4, loop="channels", blocks=4).blocks == 1


def test_channels_are_padded_to_a_multiple_of_both_kernels_tiles(monkeypatch):
  """24 channels with forward tiles of 8 and backward tiles of 16: the kernels read 32."""
  from launch.bench_tiles import random_factors
  seen, fused = [], pallas_chunked._fused
  monkeypatch.setattr(pallas_chunked, "_fused", lambda static, *ins: seen.append(
      ins[0].shape) or fused(static, *ins))
  y = pallas_chunked.scan(random_factors("decay", 2, 12, 24, 4), forward=(8, 1), backward=(16, 1))
  assert y.shape == (2, 12, 24) and seen[0][1] == 32, (y.shape, seen)


@pytest.mark.parametrize("family,length,steps,loop", [
    (family, length, steps, "states") for family in pallas_chunked.FAMILIES
    for length, steps in ((60, None), (37, 5))] + [
    ("decay", 60, None, "channels"), ("signed_decay", 37, 5, "channels")])
def test_steps_per_chunk_need_not_be_a_power_of_two(family, length, steps, loop):
  """60 steps as 4 chunks of 15 (the default there: nothing padded) and 37 as 8 chunks of 5 (3
  padded): the rows of sums over channels or states are joined up to 8 and 16 steps per chunk
  and put back in time order outside (`_time_order`); values and every gradient as the
  sequential scan's, looping over states or channels."""
  f = to_factors(family, factored_inputs(family, length, d=5, n=3))
  assert_matches_the_sequential_scan(
      lambda f: pallas_chunked.scan(f, (4, 1), (4, 1), steps, loop=loop), f,
      f"{family}, {length} steps of L = {steps or 'default'}, loop over {loop}")


@pytest.mark.parametrize("family", ["signed_decay", "rotation"])  # one per kind
def test_at_the_paper_length_nothing_is_padded_or_sliced_outside_the_kernels(family):
  """The paper cell's 60 steps fill 4 chunks of 15, and layers' channels fill the tiles: no pad
  or slice of a sequence around the kernels (each a pass over it in memory)."""
  f = channels_first(to_factors(family, factored_inputs(family, 60, b=2, d=16, n=4)))
  jaxpr = jax.make_jaxpr(jax.grad(lambda f: jnp.sum(pallas_chunked.scan(f, interpret=True))))(f)
  moved = [(e.primitive.name, e.invars[0].aval.shape) for e in outside_kernels(jaxpr.jaxpr)
           if e.primitive.name in ("pad", "slice") and 60 in e.invars[0].aval.shape]
  assert not moved, f"{family}: sequences padded or sliced outside the kernels: {moved}"


@pytest.mark.parametrize("family", ["signed_decay", "rotation", "complex"])  # one per kind
def test_runs_under_vmap_with_several_channel_blocks_match_the_sequential_scan(family):
  """Two different runs vmapped through the kernels stay apart, and with `blocks` each backward
  program walks 2 blocks of 4 channels adding the shared gradients' sums (B, C; phi) in place:
  20 channels (padded to 24) make 3 programs per batch row, not 6."""
  runs = [to_factors(family, factored_inputs(family, 23, seed=s, b=2, d=20, n=3))
          for s in (1, 2)]
  fn = lambda f: pallas_chunked.scan(f, (8, 1), (4, 1), blocks=2, interpret=True)
  assert_runs_under_vmap_match_the_sequential_scan(fn, runs, family)
  jaxpr = jax.make_jaxpr(jax.grad(lambda f: jnp.sum(fn(f))))(runs[0])
  grids = [e.params["grid_mapping"].grid for e in equations(jaxpr.jaxpr)
           if e.primitive.name == "pallas_call"]
  assert grids == [(2, 3), (2, 3)], f"{family}: grids (forward, backward) {grids}, not 3 programs"


@pytest.mark.parametrize("family", ["signed_decay", "rotation", "complex"])  # one per kind
def test_channels_first_factors_compute_the_same_bits_and_transpose_no_sequence_outside(
    family, monkeypatch):
  """Factors a layer built channels first, (channels, batch, time), are read as they are (and
  the layers build them so with `CHANNELS_FIRST_LAYERS`): outside the kernels no array with a
  time axis (23 steps, 32 padded) is transposed, through `scan.diagonal_scan` too, and two runs
  under vmap give the batch-major factors' values and gradients bit for bit."""
  runs = [to_factors(family, factored_inputs(family, 23, seed=s, b=2, d=20, n=3))
          for s in (1, 2)]
  fn = lambda f: pallas_chunked.scan(f, (8, 1), (4, 1), interpret=True)
  assert_channels_first_gives_the_same_bits(fn, runs, family)
  for name, call in (("pallas_chunked.scan", fn),
                     ("scan.diagonal_scan", lambda f: scan.diagonal_scan(f, "pallas_chunked"))):
    jaxpr = jax.make_jaxpr(jax.grad(lambda f: jnp.sum(call(f))))(channels_first(runs[0])).jaxpr
    moved = [e.invars[0].aval.shape for e in outside_kernels(jaxpr)
             if e.primitive.name == "transpose" and {23, 32} & set(e.invars[0].aval.shape)]
    assert not moved, f"{family}, {name}: sequences transposed outside the kernels: {moved}"
  monkeypatch.setattr(pallas_parallel, "CHANNELS_FIRST_LAYERS", True)
  assert scan.channels_first("pallas_chunked", 23), "layers would not build channels first"


@pytest.mark.parametrize("family,length", [("constant", 60), ("decay", 300), ("rotation", 256)])
def test_the_constant_family_and_longer_sequences_go_to_pallas_parallel(family, length, monkeypatch):
  handed = []
  monkeypatch.setattr(pallas_parallel, "scan", lambda f, interpret=None: handed.append(f) or 0)
  f = to_factors(family, factored_inputs(family, length))
  pallas_chunked.scan(f)
  assert len(handed) == 1, f"{family} at {length} steps was not handed to pallas_parallel"


# The scans across lanes per state, (forward, backward): the real kind's exclusive scan of the
# chunks' summaries (the backward's second is the adjoint's), the rotating frame's cumsums
# (re, im: the states' running sum, and the adjoint's)
LANE_SCANS = {"decay": ("exclusive_recurrence_scan", [1, 2]),
              "signed_decay": ("exclusive_recurrence_scan", [1, 2]), "rotation": ("cumsum", [2, 4]),
              "complex": ("exclusive_recurrence_scan", [1, 2])}


@pytest.mark.parametrize("family,loop,per_pass", [
    ("decay", "states", "ahead"), ("decay", "states", "two"), ("decay", "channels", "ahead"),
    ("rotation", "states", "ahead"), ("rotation", "states", "two"), ("complex", "states", "one"),
    ("complex", "states", "two")])
def test_each_pass_of_the_loops_lowers_for_cuda(family, loop, per_pass):
  """The loops read ahead (an index clamped to the last state) or two states a pass lower to
  Triton as the plain loop does: a forward and a backward kernel."""
  from launch.bench_registers import triton_modules
  n = 4 if loop == "channels" else 5  # all states in the channel loop's tiles; or an odd last
  f = to_factors(family, factored_inputs(family, 60, b=2, d=16, n=n))
  loss = lambda f: jnp.sum(pallas_chunked.scan(
      f, interpret=False, loop=loop, per_pass=per_pass,
      backward=(16, 4) if loop == "channels" else None) ** 2)
  assert len(triton_modules(jax.grad(loss), f)) == 2, f"{family}, {loop}, {per_pass}"



@pytest.mark.parametrize("family", ["decay", "signed_decay"])
def test_the_forward_that_loops_over_time_lowers_for_cuda(family):
  """One channel a lane, 32 a warp (`FORWARD_BY_TIME`), its N states unrolled: a forward and a
  backward kernel, and evaluation's primal one."""
  from launch.bench_registers import triton_modules
  f = to_factors(family, factored_inputs(family, 60, b=2, d=32, n=4))
  scan_ = lambda f: pallas_chunked.scan(f, interpret=False, forward_loop="time")
  assert len(triton_modules(jax.grad(lambda f: jnp.sum(scan_(f) ** 2)), f)) == 2, family
  assert len(triton_modules(scan_, f)) == 1, family

def test_the_channel_loop_compiled_needs_a_power_of_two_of_states(monkeypatch):
  """Its tiles hold all N states, and Triton's tiles are powers of two: as the default it
  hands 5 states to the state loop, asked for by name it says why not (interpret mode, where
  the tests run it at 3 states, has no such limit)."""
  from launch.bench_registers import triton_modules
  f = to_factors("decay", factored_inputs("decay", 60, b=2, d=16, n=5))
  monkeypatch.setitem(pallas_chunked.BACKWARD_LOOP, "real", "channels")
  loss = lambda f, **kw: jnp.sum(pallas_chunked.scan(f, interpret=False, **kw) ** 2)
  assert len(triton_modules(jax.grad(loss), f)) == 2, "5 states did not go to the state loop"
  with pytest.raises(ValueError, match="holds all 5 states in its tiles.*power of two"):
    triton_modules(jax.grad(lambda f: loss(f, loop="channels")), f)


@pytest.mark.parametrize("family", pallas_chunked.FAMILIES)
def test_kernels_lower_for_cuda_with_one_scan_across_lanes_per_recurrence(family):
  """The Triton lowering runs on CPU (the primitive's `tt.scan` rule is found and verifies):
  the gradient lowers to a forward and a backward kernel, evaluation's primal to one."""
  from launch.bench_registers import triton_modules
  f = to_factors(family, factored_inputs(family, 60, b=2, d=16, n=4))
  loss = lambda f: jnp.sum(pallas_chunked.scan(f, interpret=False) ** 2)
  assert len(triton_modules(jax.grad(loss), f)) == 2, f"{family}: not a forward and a backward"
  assert len(triton_modules(lambda f: pallas_chunked.scan(f, interpret=False), f)) == 1
  jaxpr = jax.make_jaxpr(jax.grad(loss))(f)
  kernels = [e for e in equations(jaxpr.jaxpr) if e.primitive.name == "pallas_call"]
  scans = lambda e, name: sum(q.primitive.name == name for q in equations(e.params["jaxpr"]))
  name, want = LANE_SCANS[family]
  count = [scans(e, name) for e in kernels]
  assert count == want, f"{family}: {name} per state (forward, backward) {count}, want {want}"
  others = {q.primitive.name for e in kernels for q in equations(e.params["jaxpr"])
            if q.primitive.name in ("recurrence_scan", "exclusive_recurrence_scan", "cumsum")}
  assert others == {name}, f"{family}: other scans in the kernels: {sorted(others - {name})}"
  if family in ("decay", "signed_decay"):  # the backward that loops over channels lowers too
    by_channel = lambda f: jnp.sum(pallas_chunked.scan(f, interpret=False, backward=(16, 4),
                                                       loop="channels") ** 2)
    assert len(triton_modules(jax.grad(by_channel), f)) == 2, f"{family}: the channel loop"
