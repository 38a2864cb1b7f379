"""The chunked kernels with each pass of their loops taking one state, one with the next
state's inputs read ahead, or two states (`pallas_chunked.PASS`), compiled for sm_90 at the
paper cell: registers, spills, the loop's PTX and SASS instructions (per state), and how many
SASS instructions of the loop lie between each global load and the first instruction that uses
what it loaded (a warp stalls there unless the load has landed). Needs `pip install triton==3.9.0` (its ptxas and nvdisasm); with jax 0.11 a
GPU's compute capability is named by `launch.bench_compiled.as_gpu`:

    JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 python results/bench/registers/sass/passes_counts.py OUT.json
"""
import json, os, re, subprocess, sys, tempfile, statistics
from launch import bench_compiled, bench_registers as br
from launch.bench_tiles import random_factors
from ssm_bench.scan import pallas_chunked

triton, GPUTarget = br._triton()
ptxas = br._ptxas(90); nvdisasm = os.path.join(os.path.dirname(ptxas), "nvdisasm")
_OP = re.compile(r"\s*/\*[0-9a-f]+\*/\s*((?:@!?U?P\w+\s+)?[A-Z][A-Z0-9_.]*.*?);")


def loop_body(sass):
  """The SASS instructions of the largest loop (a label a later branch jumps back to)."""
  ops, labels, loops = [], {}, []
  for line in sass.splitlines():
    m = re.match(r"^(\.L_x_\d+):", line)
    if m:
      labels[m.group(1)] = len(ops)
      continue
    m = _OP.match(line)
    if m:
      ops.append(m.group(1))
      b = re.search(r"BRA\s+`?\(?(\.L_x_\d+)", line)
      if b and b.group(1) in labels and labels[b.group(1)] < len(ops):
        loops.append((labels[b.group(1)], len(ops)))
  a, b = max(loops, key=lambda l: l[1] - l[0])
  return ops[a:b]


def load_to_use(ops):
  """Per global load in the loop, the instructions until one reads its register (around the
  loop's back edge)."""
  out = []
  for i, op in enumerate(ops):
    m = re.match(r"(?:@!?U?P\w+\s+)?LDG\S*\s+(R\d+),", op)
    if not m:
      continue
    for j in range(1, len(ops) + 1):
      parts = ops[(i + j) % len(ops)].split(None, 1)
      if len(parts) > 1 and re.search(r"\b" + m.group(1) + r"\b", parts[1]):
        out.append(j)
        break
  return out


def compile_one(ttir, warps):
  with tempfile.TemporaryDirectory() as d:
    src = os.path.join(d, "k.ttir"); open(src, "w").write(ttir)
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": warps, "enable_fp_fusion": True})
    ptx, cubin = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
    open(ptx, "w").write(k.asm["ptx"])
    report = subprocess.run([ptxas, "-v", "--gpu-name=sm_90a", ptx, "-o", cubin], check=True,
                            capture_output=True, text=True).stderr
    sass = subprocess.run([nvdisasm, "-c", cubin], check=True, capture_output=True,
                          text=True).stdout
  ops, row = loop_body(sass), br.parse_ptxas(report)
  row.update({k: v for k, v in br.count_instructions(k.asm["ptx"]).items()
              if k in ("instructions", "loop_instructions")})
  dist = load_to_use(ops)
  row.update(sass_loop=len(ops), loads=len(dist), load_to_use_min=min(dist),
             load_to_use_median=statistics.median(dist))
  return row


if __name__ == "__main__":
  # the defaults' tiles (forward (8, 1), phase (16, 1); backward (8, 1)) and the channel loop's
  # best count (128, 4)
  CASES = [("decay", (8, 1), (8, 1), "states"), ("decay", (8, 1), (128, 4), "channels"),
           ("signed_decay", (8, 1), (8, 1), "states"), ("rotation", (16, 1), (8, 1), "states")]
  rows = []
  for family, fwd, bwd, loop in CASES:
    f = random_factors(family, 1, 60, 128, 64)
    for per_pass in ("one", "ahead", "two"):
      if per_pass == "two" and loop == "channels":  # at 255 registers already
        continue
      scan = lambda f: pallas_chunked.scan(f, forward=fwd, backward=bwd, interpret=False,
                                           loop=loop, per_pass=per_pass)
      fn = br.jax.grad(lambda f: br.jnp.sum(br.jnp.sin(scan(f))))
      with bench_compiled.as_gpu("h200"):
        texts = br.triton_modules(fn, f)
      for which, ttir, tile in zip(("forward", "backward"), texts, (fwd, bwd)):
        if which == "forward" and loop == "channels":  # the state loop's forward, above
          continue
        row = {"family": family, "which": which, "tile": list(tile), "loop": loop,
               "per_pass": per_pass, **compile_one(ttir, tile[1])}
        row["sass_loop_per_state"] = row["sass_loop"] / (2 if per_pass == "two" else 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
  json.dump({"sizes": dict(batch=256, length=60, d_model=128, d_state=64),
             "triton": triton.__version__, "rows": rows}, open(sys.argv[1], "w"), indent=1)
