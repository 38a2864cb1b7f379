"""The bench's paper cell against the table2 protocol's step, compiled for an H200 on a CPU (GB per
27-run training step by kind; results/bench/README.md, "The bench's cell and the protocol's step").

    JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 PYTHONPATH=. python results/bench/compiled_h200/cell_vs_protocol.py mamba ...

needs jax's CUDA plugin (results/bench/README.md, "A GPU's step compiled without a GPU")."""
import sys, json
from launch import bench_compiled as bc
from ssm_bench.config import TrainConfig, PRESETS
base = dict(task="C2", d_model=128, d_state=64, batch_size=256, train_length=60, steps=5,
            log_every=5, checkpoint_every=5, curriculum_start=2, scan_method="auto")
variants = {
  "bench cell (conv 4, C2, default precision)": dict(),
  "conv 0": dict(conv_kernel=0),
  "conv 0, pad 60": dict(conv_kernel=0, pad_order=60),
  "table2 preset (conv 0, pad 60, float32)": dict(conv_kernel=0, pad_order=60, matmul_precision="float32"),
}
dev = bc.target_device("h200")
for model in sys.argv[1:]:
  for name, kw in variants.items():
    cfg = TrainConfig(model=model, **{**base, **kw})
    r = bc.compiled_one(cfg, 27, "h200", dev)
    print(f"{model:9s} {name:45s} {r['gb_per_step']:7.2f} GB/step  outside kernels: {r.get('outside_kernels_gb', '?')} GB {r.get('outside_kernels_ms_per_step', '')} ms  kinds {r['gb_by_kind']}", flush=True)
