"""XLA's memory estimate of each table2_lite program (36 runs) compiled whole: for a GPU target
without the GPU (jax 0.11 and its CUDA plugin), or on this CPU with the GPU's method
(`pallas_chunked`, in interpret mode) as the dry run's hint used to suggest. BUILD_NOTES,
"Memory-aware groups":

    JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 PYTHONPATH=. python results/bench/compiled_targets/plan_memory.py h200
    PYTHONPATH=. python results/bench/compiled_targets/plan_memory.py
"""
import sys, jax
from launch import sweep, bench_compiled
from ssm_bench import memory, train
target = sys.argv[1] if len(sys.argv) > 1 else None
groups = sweep.plan("table2_lite", "/tmp/plan_mem_wd")
dev = bench_compiled.target_device(target) if target else jax.devices()[0]
sh = jax.sharding.SingleDeviceSharding(dev)
on = lambda t: jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sh), t)
for cfgs, dirs in groups:
  c = cfgs[0]
  if target is None: c = c.replace(scan_method="pallas_chunked")
  with bench_compiled.as_gpu(target):
    init_many, chunk_many = train.Trainer(c).compiled()
    hp = train.hparams([c] * len(cfgs))
    b = memory.executable_bytes(chunk_many.lower(on(jax.eval_shape(init_many, hp)), on(hp)).compile())
  print(target or "cpu+pallas_chunked", c.model, c.depth, len(cfgs), f"{b/2**30:.2f} GiB", flush=True)
