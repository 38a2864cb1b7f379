"""SASS opcode counts of the time-parallel kernels of one family for every tile of the registers
section's GRID, for the ssm_bench on PYTHONPATH (results/bench/README.md, "Instruction counts":
SASS against PTX as a predictor). Needs `pip install triton==3.9.0` (its ptxas and nvdisasm).

    git worktree add /tmp/wt 73b3aa5   # the kernels the fourth H100 session timed
    cd /tmp/wt && PYTHONPATH=/tmp/wt python /work/main/results/bench/registers/sass/sass_counts.py \
        decay decay_as_timed_73b3aa5.json
"""
import json, os, re, subprocess, sys, tempfile, collections
import jax
from launch import bench_registers as br
from launch.bench_tiles import random_factors
from ssm_bench.scan import pallas_parallel
family = sys.argv[1]; out = sys.argv[2]
sizes = dict(batch=256, length=60, d_model=128, d_state=64)
f = random_factors(family, 1, 60, 128, 64)
triton, GPUTarget = br._triton()
ptxas = br._ptxas(90); nvdisasm = os.path.join(os.path.dirname(ptxas), "nvdisasm")
def sass_counts(ptx):
  with tempfile.TemporaryDirectory() as d:
    p = os.path.join(d, "k.ptx"); c = os.path.join(d, "k.cubin")
    open(p, "w").write(ptx)
    subprocess.run([ptxas, "--gpu-name=sm_90a", p, "-o", c], check=True, capture_output=True)
    sass = subprocess.run([nvdisasm, "-c", c], check=True, capture_output=True, text=True).stdout
  ops, labels, loops = [], {}, []
  for line in sass.splitlines():
    m = re.match(r"^(\.L_x_\d+):", line)
    if m: labels[m.group(1)] = len(ops); continue
    m = re.match(r"\s*/\*[0-9a-f]+\*/\s*(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
    if m:
      ops.append(m.group(1).split(".")[0])
      b = re.search(r"BRA\s+`?\(?(\.L_x_\d+)", line)
      if b and b.group(1) in labels and labels[b.group(1)] < len(ops): loops.append((labels[b.group(1)], len(ops)))
  a, b = max(loops, key=lambda l: l[1] - l[0], default=(0, 0))
  return {"sass": len(ops), "sass_loop": b - a, "loop_ops": dict(collections.Counter(ops[a:b])),
          "rest_ops": dict(collections.Counter(ops[:a] + ops[b:]))}
rows = []
for tile in br.GRID:
  texts = br.triton_modules(br._scan_fn("pallas_parallel", tile), f)
  for which, ttir in zip(("forward", "backward"), texts):
    if br.elements_per_thread(ttir, tile[1]) > br.MAX_ELEMENTS_PER_THREAD: continue
    with tempfile.TemporaryDirectory() as d:
      src = os.path.join(d, "k.ttir"); open(src, "w").write(ttir)
      k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": tile[1], "enable_fp_fusion": True})
    row = {"tile": list(tile), "which": which}
    row.update(br.count_instructions(k.asm["ptx"])); row.update(sass_counts(k.asm["ptx"]))
    rows.append(row); print(tile, which, row["loop_instructions"], row["sass_loop"], flush=True)
json.dump({"sizes": sizes, "rows": rows}, open(out, "w"), indent=1)
