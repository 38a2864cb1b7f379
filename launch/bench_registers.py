"""What each fused kernel's tiles cost in registers, without a GPU:
`python -m launch.bench --sections=registers`.

jax lowers a Pallas kernel to Triton IR on any backend. This section captures that IR for each
Triton kernel (`pallas` and `pallas_parallel`, forward and backward, every kind) at every tile of
`GRID`, compiles it with the `triton` package for an sm_90 target (Triton compiles to PTX and
cubin without a GPU), and reads ptxas's report: registers per thread, spill stores, and whether
a program fits an SM's register file at all (registers x threads <= 65,536; one that does not
cannot launch). A kernel that spills moves its tile through local memory, which is slow. So
this section finds the tiles worth timing before a GPU minute is spent, and a kernel change that
Triton cannot compile shows up here rather than on a lent GPU.

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

from launch import common
from launch.bench_tiles import GRID as TILE_GRID
from launch.bench_tiles import families_of, random_factors

GRID = TILE_GRID["forward"]  # every (channels, warps) either tile sweep can time
KERNELS = ("pallas", "pallas_parallel")
REGISTER_FILE = 65536  # 32-bit registers per SM (and per block) on sm_70 to sm_90
# One tensor of the kernel holding more than this many elements per thread spills in every tile
# measured (results/bench/README.md, "Registers") and compiles for minutes: it is reported as
# skipped, not compiled.
MAX_ELEMENTS_PER_THREAD = 64


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
  usage = parse_ptxas(report)
  usage["fits"] = usage["registers"] * 32 * warps <= REGISTER_FILE
  return usage


def _scan_fn(kernel: str, tile):
  from ssm_bench.scan import pallas, pallas_parallel
  module = {"pallas": pallas, "pallas_parallel": pallas_parallel}[kernel]
  return jax.grad(lambda f: jnp.sum(jnp.sin(module.scan(f, forward=tile, backward=tile,
                                                        interpret=False))))


def bench_registers(sizes: dict, kernels=KERNELS, kinds=("real", "phase", "const"), grid=None,
                    arch: int = 90) -> dict:
  """Rows per (kernel, kind, tile, forward/backward): registers, spills, fits; the sizes'
  length decides the time-parallel kernel's tile (it holds the whole sequence). `kinds`: a
  list of kinds or `bench_tiles.kinds_of`'s {kind: family} (mamba's decay and negmamba's
  signed decay are two time-parallel backward kernels of the real kind)."""
  triton, _ = _triton()
  rows = []
  for kernel, (kind, family) in itertools.product(kernels, families_of(kinds).items()):
    f = random_factors(family, 1, sizes["length"], sizes["d_model"], sizes["d_state"])
    for tile in grid or GRID:
      texts = triton_modules(_scan_fn(kernel, tile), f)
      for which, ttir in zip(("forward", "backward"), texts):
        row = {"kernel": kernel, "kind": kind, "family": family, "tile": list(tile),
               "which": which,
               "elements_per_thread": elements_per_thread(ttir, tile[1])}
        if row["elements_per_thread"] > MAX_ELEMENTS_PER_THREAD:
          row["skipped"] = f"more than {MAX_ELEMENTS_PER_THREAD} elements per thread"
        else:
          try:
            row.update(compile_usage(ttir, tile[1], arch))
          except Exception as e:  # Triton's or ptxas's failure is this tile's result
            row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
        rows.append(row)
        common.progress(f"registers: {kernel} {kind} {which} {tile}: "
                        f"{row.get('registers', row.get('skipped', row.get('error')))}")
  return {"arch": f"sm_{arch}", "sizes": dict(sizes), "triton": triton.__version__,
          "rows": rows}


def render(result: dict) -> str:
  lines = [f"registers (Triton {result['triton']} for {result['arch']}, length "
           f"{result['sizes']['length']}; registers per thread / spill bytes; ! = does not fit "
           "an SM, - = skipped)"]
  cell = lambda r: ("-" if "skipped" in r else "error" if "error" in r else
                    f"{r['registers']}/{r['spill_stores']}" + ("" if r["fits"] else "!"))
  by_key = {}
  for r in result["rows"]:
    key = (r["kernel"], r["kind"], r.get("family"))
    by_key.setdefault(key, {}).setdefault(tuple(r["tile"]), {})[r["which"]] = cell(r)
  for (kernel, kind, family), tiles in by_key.items():
    lines.append(f"  {kernel} {kind}" + (f" ({family})" if family else "") + ": " + "  ".join(
        f"{c}x{w} {t.get('forward', '?')} {t.get('backward', '?')}"
        for (c, w), t in tiles.items()))
  return "\n".join(lines)
