"""What each fused kernel's tiles cost in registers, without a GPU:
`python -m launch.bench --sections=registers`.

jax lowers a Pallas kernel to Triton IR on any backend. This section captures that IR for each
Triton kernel (`pallas`, `pallas_parallel` and `pallas_chunked`, forward and backward, every
kind) at every tile of `GRID`, compiles it with the `triton` package for an sm_90 target
(Triton compiles to PTX and cubin without a GPU), and reads ptxas's report: registers per
thread, spill stores, and whether a program fits an SM's register file at all (registers x
threads <= 65,536; one that does not cannot launch). A kernel that spills moves its tile
through local memory, which is slow. So this section finds the tiles worth timing before a GPU
minute is spent, and a kernel change that Triton cannot compile shows up here rather than on a
lent GPU.

It also counts the PTX's instructions. The time-parallel kernel is bound by instruction issue,
not memory (it moves 28 MB per run at the paper cell, 9 us of an H100's bandwidth, and takes
0.18 ms): a program runs its state loop once per state over one tile, so its work is about
programs x warps x (states x the loop's instructions + the rest) warp-instructions. At the
issue rate `calibrate` fitted to the fourth H100 session's real-kind forward tiles, that
predicts those 12 tiles within 18% (correlation 0.90) and tracks the forward + backward times
(0.96): a way to compare variants of the real kind's kernels (layouts, loop structure) before a
GPU minute is spent (results/bench/README.md, "Instruction counts"). Where the state loop holds
a loop of its own (libdevice's sin and cos did, with branches that almost never run: the phase
kernels' fit needed 1.8x the H100's peak issue rate), no prediction is made; for kinds other
than the real one the rate is unvalidated.

It needs `pip install triton` (PyTorch's CUDA builds bring it). XLA compiles the same IR with
its own Triton, whose counts may differ by a few registers: a guide for which tiles to time, not
a measurement of the GPU's kernel.
"""
from __future__ import annotations

import contextlib
import itertools
import math
import os
import re
import subprocess
import tempfile

import jax
import jax.numpy as jnp
import numpy as np

from launch import common
from launch.bench_tiles import GRID as TILE_GRID
from launch.bench_tiles import families_of, random_factors
from ssm_bench import scan

GRID = TILE_GRID["forward"]  # every (channels, warps) either tile sweep can time
# the chunked real kind's backward looping over channels (`pallas_chunked.BACKWARD_LOOP`):
# programs of up to all d_model channels, 4-8 warps
CHANNEL_LOOP_GRID = [(16, 1), (16, 2), (32, 2), (32, 4), (64, 4), (128, 4), (128, 8)]
# its forward looping over time (`pallas_chunked.FORWARD_LOOP`): one channel a lane
TIME_LOOP_GRID = [(32, 1), (64, 2), (128, 4)]
KERNELS = ("pallas", "pallas_parallel", "pallas_chunked")
# The time-parallel kernels: a program's state loop over its whole sequence, whose instruction
# count predicts its time (`warp_instructions_per_run`); pallas_chunked has no const kind.
PARALLEL = ("pallas_parallel", "pallas_chunked")
REGISTER_FILE = 65536  # 32-bit registers per SM (and per block) on sm_70 to sm_100
# The GPU counted for without --target (launch/gpu_targets): sm_90, as the issue rate's H100
TARGET = "h100"
# One tensor of the kernel holding more than this many elements per thread spills in every tile
# measured (results/bench/README.md, "Registers") and compiles for minutes: it is reported as
# skipped, not compiled.
MAX_ELEMENTS_PER_THREAD = 64
# Warp-instructions an H100 issued per ms in the time-parallel forward kernel: `calibrate`'s
# fit of the fourth H100 session's 12 forward tiles of the real kind (h100/7_parallel_tiles_*)
# to their counts by Triton 3.9.0 (results/bench/README.md, "Registers"): 71% of four
# schedulers x 132 SMs x 1.755 GHz.
H100_WARP_INSTRUCTIONS_PER_MS = 6.57e8


def _triton():
  try:
    import triton  # noqa: F401  (optional: `pip install triton`)
    from triton.backends.compiler import GPUTarget
  except ImportError:
    raise common.UsageError("the registers section compiles with the triton package, which is "
                            "not installed here; pip install triton (or PyTorch's CUDA build)")
  return triton, GPUTarget


@contextlib.contextmanager
def _capturing_triton_modules():
  """Collects the text of every Triton module lowered inside the block (a private jax hook,
  like the kernels' own lowering rule: tests/test_bench_registers.py checks it still finds
  them)."""
  from jax._src.pallas.triton import pallas_call_registration as registration
  texts, lower = [], registration.lowering.lower_jaxpr_to_triton_module

  def capture(*args, **kwargs):
    result = lower(*args, **kwargs)
    texts.append(result.module.operation.get_asm(enable_debug_info=False))
    return result

  registration.lowering.lower_jaxpr_to_triton_module = capture
  try:
    yield texts
  finally:
    registration.lowering.lower_jaxpr_to_triton_module = lower


def triton_modules(fn, *args) -> list[str]:
  """The Triton IR of every Pallas kernel in jit(fn)(*args) as lowered for CUDA, in lowering
  order (for a gradient through a fused scan: the forward kernel, then the backward)."""
  with _capturing_triton_modules() as texts:
    jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",))
  return list(texts)


def elements_per_thread(ttir: str, warps: int) -> int:
  """The largest tensor of the module over the program's threads (32 per warp)."""
  shapes = re.findall(r"tensor<((?:\d+x)+)", ttir)  # "16x64x" of tensor<16x64xf32>
  sizes = [math.prod(int(n) for n in s.rstrip("x").split("x")) for s in shapes]
  return max(sizes, default=0) // (32 * warps)


def parse_ptxas(report: str) -> dict:
  """registers, spill stores (bytes) and stack frame (bytes) from `ptxas -v`."""
  def num(pattern):
    m = re.search(pattern, report)
    if m is None:
      raise ValueError(f"ptxas -v printed no {pattern!r}: {report[-300:]}")
    return int(m.group(1))
  return {"registers": num(r"Used (\d+) registers"),
          "spill_stores": num(r"(\d+) bytes spill stores"),
          "stack_frame": num(r"(\d+) bytes stack frame")}


def _ptxas(arch: int) -> str:
  """The ptxas Triton itself uses for `arch` (3.3 returns (path, version), 3.9 a tool object;
  3.9 brings two and its PTX needs the newer one)."""
  from triton.backends.nvidia.compiler import get_ptxas
  tool = get_ptxas(arch)
  return tool[0] if isinstance(tool, tuple) else tool.path


def compile_usage(ttir: str, warps: int, arch: int = 90) -> dict:
  """Compiles one Triton module for sm_<arch> and returns ptxas's resource report."""
  triton, GPUTarget = _triton()
  with tempfile.TemporaryDirectory() as tmp:
    src, ptx = os.path.join(tmp, "kernel.ttir"), os.path.join(tmp, "kernel.ptx")
    with open(src, "w") as f:
      f.write(ttir)
    # fused multiply-adds on: Triton's long-standing default, which 3.9 warns about if unset
    kernel = triton.compile(src, target=GPUTarget("cuda", arch, 32),
                            options={"num_warps": warps, "enable_fp_fusion": True})
    with open(ptx, "w") as f:
      f.write(kernel.asm["ptx"])
    ptxas = _ptxas(arch)
    suffix = "a" if arch >= 90 else ""
    report = subprocess.run([ptxas, "-v", f"--gpu-name=sm_{arch}{suffix}", ptx, "-o",
                             os.devnull], capture_output=True, text=True, check=True).stderr
  return usage(report, kernel.asm["ptx"], warps)


def usage(report: str, ptx: str, warps: int) -> dict:
  """A program of `warps` warps: ptxas's report, whether its registers fit an SM's file (one
  that does not cannot launch), and the PTX's instruction counts."""
  out = parse_ptxas(report)
  out["fits"] = out["registers"] * 32 * warps <= REGISTER_FILE
  out.update(count_instructions(ptx))
  return out


def count_instructions(ptx: str) -> dict:
  """Static counts of the PTX: every instruction (a statement, not a directive or label), the
  warp shuffles among them (the time-parallel scans' and reductions' cost), and those of the
  state loop: the largest loop (a label that a later branch jumps back to) that holds no other
  loop of more than 20 instructions (libdevice's sin and cos bring loops of 9)."""
  labels, ops, loops = {}, [], []
  for line in ptx.splitlines():
    label = re.match(r"\s*(\$\w+):", line)
    statement = re.match(r"\s*(?:@!?%\w+\s+)?([a-z][\w.]*)[^:]*;", line)
    if label:
      labels[label.group(1)] = len(ops)
    elif statement:
      ops.append(statement.group(1))
      back = re.search(r"\bbra(?:\.uni)?\s+(\$\w+);", line)
      if back and back.group(1) in labels:
        loops.append((labels[back.group(1)], len(ops)))
  inner = [(a, b) for a, b in loops
           if not any(a <= c and d <= b and (c, d) != (a, b) and d - c > 20 for c, d in loops)]
  a, b = max(inner, key=lambda l: l[1] - l[0], default=(0, 0))
  # a loop inside the state loop is a branch whose trips the count cannot know (libdevice's
  # argument reduction for large angles, almost never run): no prediction from such a count
  nested = any(a <= c and d <= b and (c, d) != (a, b) for c, d in loops)
  return {"instructions": len(ops), "shuffles": sum(op.startswith("shfl") for op in ops),
          "loop_instructions": b - a, "branches_counted": not nested}


def warp_instructions_per_run(row: dict, sizes: dict) -> float:
  """The time-parallel kernel's issue work for one run, every branch counted as taken: each of
  its programs (batch x channel tiles) runs its warps through the state loop once per state."""
  channels, warps = row["tile"][:2]  # a chunked forward tile may add its steps per chunk
  programs = sizes.get("batch", 1) * -(-sizes["d_model"] // channels)
  once = row["instructions"] - row["loop_instructions"]
  # the loop's trips: channels or states (BACKWARD_LOOP), or the time block's steps
  loops = (channels if row.get("loop") == "channels" else
           _time_block(sizes) if row.get("loop") == "time" else sizes["d_state"])
  return programs * warps * (once + loops * row["loop_instructions"])


def calibrate(rows: list, timed_rows: list, sizes: dict, kind: str = "real",
              kernel: str = "pallas_parallel") -> dict:
  """The issue rate (warp-instructions per ms) that best fits measured forward tiles of `kind`
  (a `parallel_tiles` result's rows; for kernel="pallas_chunked" a `chunked_tiles` result's)
  to this section's counts of `kernel` at the same sizes (least squares of ms = work / rate),
  with the largest relative error of the forward tiles under it and the correlations of counts
  and times, forward and forward + backward."""
  measured = {(r["kernel"], tuple(r["tile"])): r["ms_per_run"] for r in timed_rows
              if r["kind"] == kind and r.get("ms_per_run") and r.get("matches_reference", True)}
  pairs = {"forward": [], "backward": []}
  for r in rows:
    key = (r["which"], tuple(r["tile"]))
    if (r["kernel"] == kernel and r["kind"] == kind and not r.get("time_major")
        and "instructions" in r and key in measured):
      pairs[r["which"]].append((warp_instructions_per_run(r, sizes), measured[key]))
  work, ms = (np.array(v, float) for v in zip(*pairs["forward"]))
  rate = float(work @ work / (work @ ms))
  corr = lambda p: float(np.corrcoef(*zip(*p))[0, 1]) if len(p) > 1 else None
  return {"kernel": kernel, "kind": kind, "tiles": len(ms), "warp_instructions_per_ms": rate,
          "max_rel_err_forward": float(np.max(np.abs(work / rate - ms) / ms)),
          "corr_forward": corr(pairs["forward"]), "corr_backward": corr(pairs["backward"])}


def _time_block(sizes: dict) -> int:
  """The steps a chunked forward looping over time walks: its time block."""
  from ssm_bench.scan import pallas_chunked
  return pallas_chunked.plan("real", sizes["length"], sizes["d_model"], sizes["d_state"],
                             forward_loop="time").span


def _scan_fn(kernel: str, tile, time_major: bool = False, loop: str | None = None):
  from ssm_bench.scan import pallas, pallas_chunked, pallas_parallel
  if kernel == "pallas_chunked" and loop == "time":  # the forward looping over time
    scan = lambda f: pallas_chunked.scan(f, forward=tile, interpret=False, forward_loop="time")
  elif kernel == "pallas_chunked":
    scan = lambda f: pallas_chunked.scan(f, forward=tile, backward=tile[:2], interpret=False,
                                         loop=loop)
  elif kernel == "pallas_parallel":
    scan = lambda f: pallas_parallel.scan(f, forward=tile, backward=tile, interpret=False,
                                          time_major=time_major)
  else:
    scan = lambda f: pallas.scan(f, forward=tile, backward=tile, interpret=False)
  return jax.grad(lambda f: jnp.sum(jnp.sin(scan(f))))


def bench_registers(sizes: dict, kernels=KERNELS, kinds=("real", "phase", "const"), grid=None,
                    arch: int = 90, layouts=None, channel_loop_grid=None,
                    time_loop_grid=None) -> dict:
  """Rows per (kernel, kind, tile, forward/backward): registers, spills, fits, instructions;
  the sizes' length decides the time-parallel kernel's tile (it holds the whole sequence), and
  that kernel is compiled in each of `layouts` (default: all of `pallas_parallel.LAYOUTS`),
  with its issue work per run and the time that predicts on an H100. `kinds`: a list of kinds or
  `bench_tiles.kinds_of`'s {kind: family} (mamba's decay and negmamba's signed decay are two
  time-parallel backward kernels of the real kind). The chunked real kind's backward is compiled
  looping over channels too, at `channel_loop_grid` (default `CHANNEL_LOOP_GRID`), and its
  forward looping over time at `time_loop_grid` (default `TIME_LOOP_GRID`)."""
  from ssm_bench.scan import pallas_chunked, pallas_parallel
  triton, _ = _triton()
  rows, layouts = [], tuple(pallas_parallel.LAYOUTS) if layouts is None else layouts
  for kernel, (kind, family) in itertools.product(kernels, families_of(kinds).items()):
    reads = pallas_chunked.FAMILIES if kernel == "pallas_chunked" else scan.FUSED_FAMILIES
    if family not in reads:  # the kernel hands it on
      continue
    f = random_factors(family, 1, sizes["length"], sizes["d_model"], sizes["d_state"])
    runs = [(tile, tm, None) for tile, tm in itertools.product(
        GRID if grid is None else grid, layouts if kernel == "pallas_parallel" else (False,))]
    if kernel == "pallas_chunked" and kind == "real":  # its loops over channels and time
      runs += [(tile, False, "channels") for tile in (
          CHANNEL_LOOP_GRID if channel_loop_grid is None else channel_loop_grid)]
      runs += [(tile, False, "time") for tile in (
          TIME_LOOP_GRID if time_loop_grid is None else time_loop_grid)]
    for tile, tm, loop in runs:
      texts = triton_modules(_scan_fn(kernel, tile, tm, loop), f)
      for which, ttir in zip(("forward", "backward"), texts):
        if loop and which != ("forward" if loop == "time" else "backward"):
          continue  # each loop is one kernel's: the other is the state loop's, above
        row = {"kernel": kernel, "kind": kind, "family": family, "tile": list(tile),
               "which": which, "time_major": tm, **({"loop": loop} if loop else {}),
               "elements_per_thread": elements_per_thread(ttir, tile[1])}
        if row["elements_per_thread"] > MAX_ELEMENTS_PER_THREAD:
          row["skipped"] = f"more than {MAX_ELEMENTS_PER_THREAD} elements per thread"
        else:
          try:
            row.update(compile_usage(ttir, tile[1], arch))
          except Exception as e:  # Triton's or ptxas's failure is this tile's result
            row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
          if kernel in PARALLEL and "instructions" in row:
            row["warp_instructions_per_run"] = warp_instructions_per_run(row, sizes)
            if row["branches_counted"] and arch == 90:  # the rate is an H100's sm_90 code's
              row["h100_issue_ms_per_run"] = round(
                  row["warp_instructions_per_run"] / H100_WARP_INSTRUCTIONS_PER_MS, 4)
        rows.append(row)
        common.progress(f"registers: {kernel} {kind} {which} {tile}: "
                        f"{row.get('registers', row.get('skipped', row.get('error')))}")
  return {"arch": f"sm_{arch}", "sizes": dict(sizes), "triton": triton.__version__,
          "rows": rows}


def for_target(target: str, sizes: dict, **kw) -> dict:
  """`bench_registers` for a GPU of launch/gpu_targets: at its compute capability, with the
  kernels lowered as for it (jax 0.11's Pallas asks the GPU it lowers for which one it is)."""
  from launch import bench_compiled
  arch = bench_compiled.compute_capability(target)
  with bench_compiled.as_gpu(target):
    return {**bench_registers(sizes, arch=arch, **kw), "target": target}


def render(result: dict) -> str:
  lines = [f"registers (Triton {result['triton']} for {result['arch']}"
           + (f" ({result['target']})" if "target" in result else "") + ", length "
           f"{result['sizes']['length']}; registers per thread / spill bytes, static PTX "
           "instructions, and for the time-parallel kernel the H100 issue time it predicts, ms "
           "per run; ! = does not fit an SM, - = skipped)"]
  cell = lambda r: ("-" if "skipped" in r else "error" if "error" in r else
                    f"{r['registers']}/{r['spill_stores']}" + ("" if r["fits"] else "!")
                    + f" {r['instructions']}i"
                    + (f" ~{r['h100_issue_ms_per_run']}" if "h100_issue_ms_per_run" in r else ""))
  by_key = {}
  for r in result["rows"]:
    layout = {True: " time-major", "rows": " rows time-major"}.get(r.get("time_major"), "")
    layout += {"channels": " channel loop", "time": " time loop"}.get(r.get("loop"), "")
    key = (r["kernel"] + layout, r["kind"],
           r.get("family"))
    by_key.setdefault(key, {}).setdefault(tuple(r["tile"]), {})[r["which"]] = cell(r)
  for (kernel, kind, family), tiles in by_key.items():
    lines.append(f"  {kernel} {kind}" + (f" ({family})" if family else "") + ": " + "  ".join(
        f"{'x'.join(map(str, tile[:2]))}{' L' + str(tile[2]) if len(tile) > 2 else ''} "
        f"{t.get('forward', '?')} | {t.get('backward', '?')}" for tile, t in tiles.items()))
  return "\n".join(lines)
