"""The chunked kernels' default tiles (and the channel and time loops the GPU plan times)
compiled for each GPU of launch/gpu_targets at the paper cell: registers and spill bytes per
compute capability (results/bench/README.md, "Other GPUs compiled without one"). Needs
`pip install triton==3.9.0`; with jax 0.11 (the lent GPUs') the kernels lower as for each GPU
through `bench_registers.for_target`:

    JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 PYTHONPATH=. python results/bench/registers/targets_counts.py OUT.json
"""
import json, sys
from launch import bench_compiled, bench_registers as br
from ssm_bench.scan import pallas_chunked

SIZES = {"batch": 256, "length": 60, "d_model": 128, "d_state": 64}
rows = []
for target in bench_compiled.TARGETS:
  for family in ("decay", "signed_decay", "rotation"):
    kind = "phase" if family == "rotation" else "real"
    forward, backward = pallas_chunked.FORWARD[kind], pallas_chunked.BACKWARD[kind]
    extra = dict(channel_loop_grid=[(128, 4)], time_loop_grid=[(32, 1)]) if kind == "real" else {}
    for tile in dict.fromkeys([forward, backward]):  # one compile where both are one tile
      result = br.for_target(target, SIZES, kernels=("pallas_chunked",), kinds={kind: family},
                             grid=[tile], **extra)
      for r in result["rows"]:
        default = tuple(r["tile"]) == (forward if r["which"] == "forward" else backward)
        if "loop" in r or default:
          rows.append({"target": target, "arch": result["arch"], **r})
          print(json.dumps(rows[-1]), flush=True)
      extra = {"channel_loop_grid": [], "time_loop_grid": []}  # the loops once per family
json.dump({"sizes": SIZES, "triton": result["triton"], "rows": rows}, open(sys.argv[1], "w"),
          indent=1)
