"""The registers section: the Triton IR of each fused kernel is captured on CPU, ptxas's report is
read right, a missing triton package is one clear error, and (where triton is installed) the
time-parallel kernel's default tiles compile for sm_90 without spilling."""
import re
import sys

import pytest

from launch import bench_registers
from launch import common
from launch.bench_tiles import random_factors
from ssm_bench.scan import pallas_chunked, pallas_parallel

# `ptxas -v` on the time-parallel backward of the rotation family, 16 channels in one warp
# (Triton 3.3.1, sm_90a)
SPILLING = """ptxas info    : 35 bytes gmem
ptxas info    : Compiling entry function '_backward_kernel' for 'sm_90a'
ptxas info    : Function properties for _backward_kernel
    600 bytes stack frame, 836 bytes spill stores, 824 bytes spill loads
ptxas info    : Used 255 registers, 600 bytes cumulative stack size
"""


@pytest.mark.parametrize("kernel", bench_registers.KERNELS)
def test_captures_the_forward_then_the_backward_kernel_of_each_fused_scan(kernel):
  f = random_factors("signed_decay", 1, 60, 16, 4)
  texts = bench_registers.triton_modules(bench_registers._scan_fn(kernel, (8, 2)), f)
  assert len(texts) == 2, f"{kernel}: {len(texts)} Triton modules captured, want forward+backward"
  assert re.search(r"module @\w*forward", texts[0]) and re.search(r"module @\w*backward",
                                                                  texts[1]), (
      f"{kernel}: the modules are not the forward then the backward kernel")
  time_parallel = ['"tt.scan"' in t for t in texts]
  assert time_parallel == [kernel in bench_registers.PARALLEL] * 2, (
      f"{kernel}: hardware scan in (forward, backward) = {time_parallel}")


def test_elements_per_thread_is_the_largest_tensor_over_the_threads():
  ttir = "%1 = tt.splat %0 : i32 -> tensor<16x64xi32>\n%2 = tt.make_range : tensor<16xi32>"
  assert bench_registers.elements_per_thread(ttir, warps=4) == 16 * 64 // 128
  f = random_factors("signed_decay", 1, 60, 16, 4)
  [fwd, _] = bench_registers.triton_modules(bench_registers._scan_fn("pallas_parallel", (8, 2)), f)
  # 8 channels x 64 rows (60 steps and h0's row, to the next power of two) over 64 threads
  assert bench_registers.elements_per_thread(fwd, warps=2) == 8


def test_reads_registers_and_spills_from_ptxas():
  assert bench_registers.parse_ptxas(SPILLING) == {"registers": 255, "spill_stores": 836,
                                                   "stack_frame": 600}
  with pytest.raises(ValueError, match="registers"):
    bench_registers.parse_ptxas("ptxas fatal   : Unresolved extern function")


# a state loop (BB0_1) of 25 instructions, one of them a shuffle, after 3 once; in the second
# kernel a 3-instruction loop (BB0_2, libdevice's kind) sits inside it
PTX = """.visible .entry k(
	.reg .b32 	%r<9>;
	mov.u32 	%r1, 0;
	ld.global.b32 	%r2, [%rd1];
	mov.u32 	%r3, 0;
$L__BB0_1:
	shfl.sync.up.b32 	%r4, %r2, 1, 0, -1;
""" + "\tfma.rn.f32 \t%r5, %r4, %r2, %r5;\n" * 22 + """	add.s32 	%r3, %r3, 1;
	@%p1 bra 	$L__BB0_1;
	st.global.b32 	[%rd1], %r5;
	ret;
}"""
NESTED = PTX.replace("\tadd.s32", "$L__BB0_2:\n\tmul.f32 \t%r6, %r6, %r6;\n"
                     "\tsetp.lt.f32 \t%p2, %r6, 1.0;\n\t@%p2 bra \t$L__BB0_2;\n\tadd.s32", 1)


def test_counts_the_state_loop_and_marks_a_loop_inside_it_as_uncounted():
  assert bench_registers.count_instructions(PTX) == {
      "instructions": 30, "shuffles": 1, "loop_instructions": 25, "branches_counted": True}
  nested = bench_registers.count_instructions(NESTED)
  assert nested["loop_instructions"] == 28 and not nested["branches_counted"], nested
  row = {"tile": [8, 2], "instructions": 30, "loop_instructions": 25}
  # 2 batch rows x 2 channel tiles x 2 warps, each 5 instructions once and 25 per state
  assert bench_registers.warp_instructions_per_run(
      row, {"batch": 2, "d_model": 16, "d_state": 4}) == 8 * (5 + 4 * 25)
  # the chunked backward looping over channels: 25 per channel of the program's 8
  assert bench_registers.warp_instructions_per_run(
      dict(row, loop="channels"), {"batch": 2, "d_model": 16, "d_state": 4}) == 8 * (5 + 8 * 25)
  # the chunked forward looping over time: 25 per step of its time block (37 steps: 4 x 10)
  assert bench_registers.warp_instructions_per_run(
      dict(row, loop="time"), {"batch": 2, "d_model": 16, "d_state": 4, "length": 37}) == (
      8 * (5 + 40 * 25))


def test_a_branch_forward_inside_the_state_loop_is_no_loop():
  """An `if` in the loop body (a branch to a label further on) is counted as its instructions,
  not as a loop: the state loop keeps its branches counted."""
  skip = PTX.replace("\tadd.s32", "\t@%p3 bra \t$L__BB0_3;\n\tmul.f32 \t%r6, %r6, %r6;\n"
                     "$L__BB0_3:\n\tadd.s32", 1)
  assert bench_registers.count_instructions(skip) == {
      "instructions": 32, "shuffles": 1, "loop_instructions": 27, "branches_counted": True}


def test_calibration_recovers_the_issue_rate_that_timed_the_tiles():
  sizes = {"batch": 4, "d_model": 32, "d_state": 8}
  rows, timed = [], []
  for i, tile in enumerate([[4, 1], [8, 2], [16, 4]]):
    for which in ("forward", "backward"):
      row = {"kernel": "pallas_parallel", "kind": "real", "which": which, "tile": tile,
             "instructions": 100 + 37 * i, "loop_instructions": 80 + 30 * i}
      rows.append(row)
      ms = bench_registers.warp_instructions_per_run(row, sizes) / 5e6
      timed.append({"kind": "real", "kernel": which, "tile": tile, "ms_per_run": ms})
  # the chunked kernel's counts at the same tiles, twice the work: fitted only when asked for
  rows += [dict(r, kernel="pallas_chunked", loop_instructions=2 * r["loop_instructions"],
                instructions=2 * r["instructions"]) for r in rows]
  fit = bench_registers.calibrate(rows, timed, sizes)
  assert abs(fit["warp_instructions_per_ms"] - 5e6) < 1, fit
  assert fit["tiles"] == 3 and fit["max_rel_err_forward"] < 1e-9, fit
  chunked = bench_registers.calibrate(rows, timed, sizes, kernel="pallas_chunked")
  assert abs(chunked["warp_instructions_per_ms"] - 1e7) < 2, chunked


def test_without_triton_the_section_is_one_clear_error(monkeypatch):
  monkeypatch.setitem(sys.modules, "triton", None)  # import triton raises ImportError
  with pytest.raises(common.UsageError, match="pip install triton"):
    bench_registers.bench_registers({"length": 12, "d_model": 8, "d_state": 2})


def test_default_tiles_of_the_time_parallel_kernel_compile_for_sm90_without_spills():
  """Runs where triton is installed (a GPU machine with PyTorch, or `pip install triton`)."""
  pytest.importorskip("triton")
  for length, span in ((60, 64), (255, 256)):  # the paper's length and the kernel's longest
    sizes = {"length": length, "d_model": 16, "d_state": 4}
    for kind in pallas_parallel.FORWARD:
      for default in {pallas_parallel.FORWARD[kind], pallas_parallel.BACKWARD[kind]}:
        tile = pallas_parallel.default_tile(default, span)
        # in the layout the kernel runs (TIME_MAJOR): the others are the sweep's, and on an
        # H200's Triton the time-major one spilled 12 stores at (2, 1), 255 steps
        result = bench_registers.bench_registers(sizes, kernels=("pallas_parallel",),
                                                 kinds=(kind,), grid=[tile],
                                                 layouts=(pallas_parallel.TIME_MAJOR[kind],))
        assert result["rows"], f"{length} steps, {kind} {tile}: nothing compiled"
        for r in result["rows"]:
          assert "error" not in r and "skipped" not in r, f"{length} steps, {kind} {tile}: {r}"
          assert r["spill_stores"] == 0 and r["fits"], f"{length} steps, {kind} {tile} spills: {r}"
    for kind, which, default in [(kind, which, tiles[kind]) for kind in pallas_chunked.FORWARD
                                 for which, tiles in (("forward", pallas_chunked.FORWARD),
                                                      ("backward", pallas_chunked.BACKWARD))]:
      tile = pallas_parallel.default_tile(default[:2], span) + tuple(default[2:])  # (.., L)
      result = bench_registers.bench_registers(sizes, kernels=("pallas_chunked",),
                                               kinds=(kind,), grid=[tile], channel_loop_grid=(),
                                               time_loop_grid=())
      for r in (r for r in result["rows"] if r["which"] == which):
        assert r.get("spill_stores") == 0 and r["fits"], (
            f"{length} steps, chunked {kind} {which} {tile}: {r}")
  # the real forward looping over time, at the paper's 64 states (all in a lane's registers;
  # its length only sets the loop's trips)
  tile = pallas_chunked.FORWARD_BY_TIME["real"]
  result = bench_registers.bench_registers({"length": 60, "d_model": tile[0], "d_state": 64},
                                           kernels=("pallas_chunked",), kinds=("real",), grid=[],
                                           channel_loop_grid=(), time_loop_grid=[tile])
  assert [(r["which"], r["loop"], r.get("spill_stores"), r["fits"]) for r in result["rows"]] == [
      ("forward", "time", 0, True)], f"chunked real forward looping over time: {result}"


def test_render_names_a_forward_tile_with_its_own_steps_per_chunk():
  """Chunked forward tiles may carry L (`pallas_chunked.FORWARD`): shown beside the plain tile."""
  row = lambda tile, which, n: {"kernel": "pallas_chunked", "kind": "real", "family": "decay",
                                "tile": tile, "which": which, "registers": 95, "spill_stores": 0,
                                "fits": True, "instructions": n}
  text = bench_registers.render({"sizes": {"length": 60}, "triton": "3.9.0", "arch": "sm_90",
                                 "rows": [row([8, 1], "forward", 434),
                                          row([8, 1, 16], "forward", 412)]})
  assert "8x1 95/0 434i" in text and "8x1 L16 95/0 412i" in text, text


def test_a_program_fits_when_its_registers_times_its_threads_fill_at_most_an_sm():
  """65,536 registers per SM: 256 per thread fit 8 warps exactly, 257 do not, nor 255 in 16."""
  at = lambda registers, warps: bench_registers.usage(
      SPILLING.replace("Used 255", f"Used {registers}"), PTX, warps)
  assert at(256, 8)["fits"] and not at(257, 8)["fits"], "the register file's bound is off"
  assert at(255, 8)["fits"] and not at(255, 16)["fits"], "a program's warps were not counted"
  assert at(255, 8)["loop_instructions"] == 25 and at(255, 8)["spill_stores"] == 836


def fake_compiler(monkeypatch, arch_seen=None):
  """The section's loop without triton: each module 'compiles' to 40 registers and the PTX
  above (an error for a module with `raise` set); the modules compiled are recorded."""
  import types
  monkeypatch.setattr(bench_registers, "_triton",
                      lambda: (types.SimpleNamespace(__version__="fake"), None))
  compiled = []

  def compile_usage(ttir, warps, arch=90):
    compiled.append((ttir, warps, arch))
    return bench_registers.usage(SPILLING.replace("Used 255", "Used 40"), PTX, warps)
  monkeypatch.setattr(bench_registers, "compile_usage", compile_usage)
  return compiled


def test_each_loop_variant_is_reported_for_its_own_kernel_only(monkeypatch):
  """The chunked real kind: the state loop's forward and backward at each tile, the channel
  loop's backward only, the time loop's forward only (their other kernel is the state loop's,
  already a row), each with the H100 issue time its count predicts on sm_90."""
  compiled = fake_compiler(monkeypatch)
  sizes = {"length": 12, "d_model": 16, "d_state": 4}
  result = bench_registers.bench_registers(
      sizes, kernels=("pallas_chunked",), kinds=("real",), grid=[(8, 2)],
      channel_loop_grid=[(16, 2)], time_loop_grid=[(16, 1)])
  rows = [(r["which"], r["tile"], r.get("loop")) for r in result["rows"]]
  assert rows == [("forward", [8, 2], None), ("backward", [8, 2], None),
                  ("backward", [16, 2], "channels"), ("forward", [16, 1], "time")], rows
  assert len(compiled) == 4, f"{len(compiled)} modules compiled for 4 rows"
  assert all(r["h100_issue_ms_per_run"] == round(bench_registers.warp_instructions_per_run(
      r, sizes) / bench_registers.H100_WARP_INSTRUCTIONS_PER_MS, 4) for r in result["rows"]), (
      "a row lacks the issue time its count predicts")


def test_oversize_tiles_are_skipped_other_archs_get_no_h100_time_and_errors_are_rows(monkeypatch):
  compiled = fake_compiler(monkeypatch)
  sizes = {"length": 12, "d_model": 16, "d_state": 4}
  run = lambda **kw: bench_registers.bench_registers(
      sizes, kernels=("pallas_parallel",), kinds=("real",), grid=[(8, 1), (8, 2)],
      layouts=(False,), **kw)["rows"]
  rows = run()
  per_thread = {tuple(r["tile"]): r["elements_per_thread"] for r in rows}
  assert per_thread[(8, 1)] > per_thread[(8, 2)], per_thread
  monkeypatch.setattr(bench_registers, "MAX_ELEMENTS_PER_THREAD", per_thread[(8, 2)])
  compiled.clear()
  rows = run(arch=80)
  assert [("skipped" in r) for r in rows] == [True, True, False, False], rows
  assert len(compiled) == 2 and {arch for _, _, arch in compiled} == {80}, compiled
  assert all("h100_issue_ms_per_run" not in r and r["warp_instructions_per_run"] > 0
             for r in rows if "skipped" not in r), "sm_80 code was timed at the H100's rate"
  monkeypatch.setattr(bench_registers, "compile_usage", lambda *a: 1 / 0)
  rows = run()
  assert [r.get("error", "")[:17] for r in rows if "skipped" not in r] == [
      "ZeroDivisionError"] * 2, "a compiler failure is not its tile's row"
  text = bench_registers.render({"sizes": sizes, "triton": "fake", "arch": "sm_90",
                                 "rows": rows})
  assert "8x1 - | -" in text and "8x2 error | error" in text, text


def test_render_marks_a_program_that_does_not_fit_an_sm():
  row = lambda which, fits: {"kernel": "pallas", "kind": "real", "family": "decay",
                             "tile": [8, 4], "which": which, "registers": 255,
                             "spill_stores": 0, "fits": fits, "instructions": 10}
  text = bench_registers.render({"sizes": {"length": 60}, "triton": "3.9.0", "arch": "sm_90",
                                 "rows": [row("forward", True), row("backward", False)]})
  assert "8x4 255/0 10i | 255/0! 10i" in text, text


def test_calibration_leaves_out_wrong_tiles_and_other_layouts():
  """A timed tile that missed the reference, or a time-major row, is not fitted."""
  sizes = {"batch": 4, "d_model": 32, "d_state": 8}
  rows, timed = [], []
  for i, tile in enumerate([[4, 1], [8, 2], [16, 4]]):
    row = {"kernel": "pallas_parallel", "kind": "real", "which": "forward", "tile": tile,
           "instructions": 100 + 37 * i, "loop_instructions": 80 + 30 * i}
    rows.append(row)
    timed.append({"kind": "real", "kernel": "forward", "tile": tile, "ms_per_run":
                  bench_registers.warp_instructions_per_run(row, sizes) / 5e6})
  timed.append({"kind": "real", "kernel": "forward", "tile": [32, 8], "ms_per_run": 99.0,
                "matches_reference": False})
  rows.append(dict(rows[0], tile=[32, 8]))
  rows.append(dict(rows[1], time_major=True, instructions=9999))  # same tile, another layout
  fit = bench_registers.calibrate(rows, timed, sizes)
  assert fit["tiles"] == 3 and fit["max_rel_err_forward"] < 1e-9, fit
