"""The chunked real forward looping over time (`pallas_chunked.FORWARD_LOOP` "time") against the
state loop's, compiled for sm_90 at the paper cell: registers, spills, the loop's PTX and SASS
instructions (per step for the time loop, per state for the state loop), the loads' distance
to their first use (`passes_counts`), and the SASS warp-instructions of one run (programs x
warps x the loop's trips x its instructions). Needs `pip install triton==3.9.0`, as
passes_counts:

    JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 PYTHONPATH=.:results/bench/registers/sass \\
        python results/bench/registers/sass/time_loop_counts.py OUT.json
"""
import json, sys
from passes_counts import bench_compiled, br, compile_one, pallas_chunked, random_factors, triton

SIZES = dict(batch=256, length=60, d_model=128, d_state=64)
# the state loop's default forward tile, and the time loop's: one channel a lane, in 1-4 warps,
# a step a pass, or with the next step's x and dt read ahead, or two steps
CASES = [("states", (8, 1), "one"), ("time", (32, 1), "one"), ("time", (64, 2), "one"),
         ("time", (128, 4), "one"), ("time", (32, 1), "ahead"), ("time", (32, 1), "two")]
rows = []
for family in ("decay", "signed_decay"):
  f = random_factors(family, 1, SIZES["length"], SIZES["d_model"], SIZES["d_state"])
  for loop, tile, per_pass in CASES:
    with bench_compiled.as_gpu("h200"):
      ttir = br.triton_modules(lambda f: pallas_chunked.scan(
          f, forward=tile, interpret=False, forward_loop=loop, per_pass=(per_pass, "one")), f)[0]
    row = {"family": family, "forward_loop": loop, "tile": list(tile), "per_pass": per_pass,
           **compile_one(ttir, tile[1])}
    trips = SIZES["length"] if loop == "time" else SIZES["d_state"]  # 60 steps: 4 x 15, no pad
    trips //= 2 if per_pass == "two" else 1
    row["sass_warp_instructions_per_run"] = (
        SIZES["batch"] * SIZES["d_model"] // tile[0] * tile[1] * trips * row["sass_loop"])
    rows.append(row)
    print(json.dumps(row), flush=True)
json.dump({"sizes": SIZES, "triton": triton.__version__, "rows": rows}, open(sys.argv[1], "w"),
          indent=1)
