"""`launch/hlo.py`: what a compiled program's HLO text says about each instruction, where it
comes from and the bytes it moves."""
import jax
import jax.numpy as jnp

from launch import hlo


def test_an_ops_bytes_are_its_operands_and_its_result():
  """`hlo.bytes_moved` on a compiled program: the op that reads two (256, 128) float32 arrays and
  writes their (128,) column sums moves 2 x 131072 + 512 bytes."""
  program = jax.jit(lambda x, y: jnp.tanh(x + y).sum(0))
  text = program.lower(jnp.ones((256, 128)), jnp.ones((256, 128))).compile().as_text()
  moved = hlo.bytes_moved(text)
  assert 2 * 256 * 128 * 4 + 128 * 4 in moved.values(), moved
  assert all(name.replace(".", "_") in moved for name in moved), "both spellings of each name"


def test_a_while_loop_moves_nothing_itself_its_body_does():
  """A while hands its carry to its body: the loop instruction is not an op that reads and
  writes it (counted so, a training chunk's loop would add its whole carry, parameters and
  optimizer state, once more)."""
  program = jax.jit(lambda x: jax.lax.fori_loop(0, 3, lambda i, c: jnp.tanh(c) * 2.0, x))
  text = program.lower(jnp.ones((256, 128))).compile().as_text()
  loops = [m[0] for m in hlo._WHILE.findall(text)]
  assert loops, "no while loop in the compiled program"
  moved = hlo.bytes_moved(text)
  assert not set(loops) & set(moved), {n: moved[n] for n in loops if n in moved}
  assert any(b >= 2 * 256 * 128 * 4 for b in moved.values()), "the body's op is not counted"


def test_a_scan_storing_its_states_moves_each_step_not_the_whole_buffer():
  """A scan's per-step store is a fusion that updates the stacked states in place (a
  dynamic-update-slice of its parameter): `hlo.bytes_moved` counts the (64, 128) state it reads and
  writes, not the (60, 64, 128) buffer in and out (a DeltaNet step compiled for the H200 read
  506 GB that way, 15.24 GB counted so)."""
  def f(x):
    def body(h, t):
      h = jnp.tanh(h * 0.5 + t)
      return h, h
    return jax.lax.scan(body, x[0], x)[1].sum()
  text = jax.jit(jax.grad(f)).lower(jnp.ones((60, 64, 128))).compile().as_text()
  moved = hlo.bytes_moved(text)
  state, buffer = 64 * 128 * 4, 60 * 64 * 128 * 4
  stores = {name: moved[name] for name, calls in hlo._CALLS.findall(text)
            if "dynamic-update-slice" in name and name in moved}
  assert stores, "no in-place store fusion found in the scan's program"
  assert all(2 * state <= b < buffer for b in stores.values()), (
      f"each store should move its state ({2 * state} bytes in and out), not the buffer "
      f"({buffer}): {stores}")


def test_an_async_fusion_counts_once_at_its_start():
  """XLA's GPU programs run some fusions as a start/done pair: the start moves what the fused
  computation does (here an in-place store of a 16-byte row into a 64-byte buffer: the row
  read and written, and the index), the done nothing."""
  text = """%fused_store (param_0: f32[4,4], param_1: s32[], param_2: f32[4]) -> f32[4,4] {
  %param_0 = f32[4,4]{1,0} parameter(0)
  %param_2 = f32[4]{0} parameter(2)
  %bitcast.1 = f32[1,4]{1,0} bitcast(%param_2)
  %param_1 = s32[] parameter(1)
  %constant.1 = s32[] constant(0)
  ROOT %dynamic_update_slice.1 = f32[4,4]{1,0} dynamic-update-slice(%param_0, %bitcast.1, %param_1, %constant.1)
}

ENTRY %main (a: f32[4,4], i: s32[], r: f32[4]) -> f32[4,4] {
  %a = f32[4,4]{1,0} parameter(0)
  %i = s32[] parameter(1)
  %r = f32[4]{0} parameter(2)
  %fusion-start = ((f32[4,4]{1,0}, s32[], f32[4]{0}), f32[4,4]{1,0}, u32[]) fusion-start(%a, %i, %r), kind=kLoop, calls=%fused_store
  ROOT %fusion-done = f32[4,4]{1,0} fusion-done(%fusion-start)
}
"""
  moved = hlo.bytes_moved(text)
  assert moved["fusion-start"] == 16 + 4 + 16, moved
  assert "fusion-done" not in moved, moved


def test_a_fusion_that_reads_an_operand_only_through_slices_counts_the_slices():
  """A (1024,) operand read through a dynamic slice of 4 in a fusion moves those 16 bytes, as
  does an unfused dynamic slice of it (and an unfused in-place update of 4)."""
  text = """%fused_read (param_0: f32[1024], param_1: s32[]) -> f32[4] {
  %param_0 = f32[1024]{0} parameter(0)
  %param_1 = s32[] parameter(1)
  %dynamic-slice.1 = f32[4]{0} dynamic-slice(%param_0, %param_1), dynamic_slice_sizes={4}
  ROOT %tanh.1 = f32[4]{0} tanh(%dynamic-slice.1)
}

ENTRY %main (a: f32[1024], i: s32[], u: f32[4]) -> f32[1024] {
  %a = f32[1024]{0} parameter(0)
  %i = s32[] parameter(1)
  %u = f32[4]{0} parameter(2)
  %fusion = f32[4]{0} fusion(%a, %i), kind=kLoop, calls=%fused_read
  %dynamic-slice.2 = f32[4]{0} dynamic-slice(%a, %i), dynamic_slice_sizes={4}
  ROOT %dynamic-update-slice.2 = f32[1024]{0} dynamic-update-slice(%a, %u, %i)
}
"""
  moved = hlo.bytes_moved(text)
  assert (moved["fusion"], moved["dynamic-slice.2"], moved["dynamic-update-slice.2"]) == (
      16 + 4 + 16, 16 + 4 + 16, 16 + 16 + 4), moved


def test_each_instruction_has_its_op_path_and_python_line():
  """`hlo.sources` reads a compiled program's HLO text: each instruction's jax op path (the
  name scope, autodiff's `transpose(jvp(..))`) and the Python line behind it."""
  def step(w, x):
    g = jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w) * 3.0))(w)
    with jax.named_scope("optimizer"):
      return w - 0.1 * jnp.sqrt(g * g + 1.0)
  w, x = jnp.ones((8, 8)), jnp.ones((4, 8))
  text = jax.jit(step).lower(w, x).compile().as_text()
  sources = hlo.sources(text)
  assert sources and all(not v.startswith("jit(") for v in sources.values()), sources
  assert any("optimizer/" in v and " @ test_hlo.py:" in v and "(test_each_instruction" in v
             for v in sources.values()), f"no scope or line of this test in {sources}"
  assert any("transpose(jvp(" in v for v in sources.values()), f"no backward op: {sources}"
  dotted = [n for n in sources if "." in n]
  assert dotted and all(sources.get(n.replace(".", "_")) == sources[n] for n in dotted), (
      "a kernel name (dots as underscores) does not find its instruction")


def test_a_predicate_is_a_byte():
  """XLA stores a pred (bool) element in a byte: `x > 0` over 1000 floats reads 4000 bytes and
  writes 1000."""
  text = jax.jit(lambda x: x > 0).lower(jnp.ones(1000)).compile().as_text()
  moved = hlo.bytes_moved(text)
  assert 5000 in moved.values(), moved


def test_a_slice_of_a_bitcast_operand_counts_the_slice():
  """A fusion that reshapes its (1024,) operand (a bitcast) and reads 4 floats of it through a
  dynamic slice moves those 16 bytes (and its index), as without the bitcast."""
  text = """%fused_read (param_0: f32[1024], param_1: s32[]) -> f32[1,4] {
  %param_0 = f32[1024]{0} parameter(0)
  %bitcast.1 = f32[256,4]{1,0} bitcast(%param_0)
  %param_1 = s32[] parameter(1)
  %constant.1 = s32[] constant(0)
  %dynamic-slice.1 = f32[1,4]{1,0} dynamic-slice(%bitcast.1, %param_1, %constant.1), dynamic_slice_sizes={1,4}
  ROOT %tanh.1 = f32[1,4]{1,0} tanh(%dynamic-slice.1)
}

ENTRY %main (a: f32[1024], i: s32[]) -> f32[1,4] {
  %a = f32[1024]{0} parameter(0)
  %i = s32[] parameter(1)
  ROOT %fusion = f32[1,4]{1,0} fusion(%a, %i), kind=kLoop, calls=%fused_read
}
"""
  assert hlo.bytes_moved(text)["fusion"] == 16 + 4 + 16, hlo.bytes_moved(text)  # and the index
