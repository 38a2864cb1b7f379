"""The state loops' forward and backward (8, 1) at the paper cell, compiled for sm_90, with x and
dt given and handed before Mamba's rule (`scan.Factors.discretize`): registers, spills, SASS
of the loop (results/bench/README.md, "Mamba's rule in the kernels"). As passes_counts:

    JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 PYTHONPATH=.:results/bench/registers/sass \\
        python results/bench/registers/sass/mamba_rule_counts.py OUT.json
"""
import json, sys
from passes_counts import bench_compiled, br, compile_one, pallas_chunked, random_factors
rows = []
for family in ("decay", "signed_decay"):
  f = random_factors(family, 1, 60, 128, 64)  # before Mamba's rule, as the layers hand them
  for label, factors in (("given", f.discretized()), ("softplus", f)):
    scan = lambda f: pallas_chunked.scan(f, forward=(8, 1), backward=(8, 1), interpret=False,
                                         loop="states")
    with bench_compiled.as_gpu("h200"):
      loss = lambda f: br.jnp.sum(br.jnp.sin(scan(f)))
      texts = br.triton_modules(br.jax.grad(loss), factors)
    for which, ttir in zip(("forward", "backward"), texts):
      rows.append({"family": family, "factors": label, "which": which, "tile": [8, 1],
                   **compile_one(ttir, 1)})
      print(json.dumps(rows[-1]), flush=True)
json.dump({"sizes": dict(batch=256, length=60, d_model=128, d_state=64), "rows": rows},
          open(sys.argv[1], "w"), indent=1)
