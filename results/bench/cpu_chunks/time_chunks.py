"""Whole CPU training steps of one layer at chunked-scan chunk sizes 1-8 (`chunked.CPU_CHUNK`),
compiled in turn and timed interleaved (median of 7), at the bench's CPU cell (batch 64, length
60, d_model 32). From the repository root:
    python results/bench/cpu_chunks/time_chunks.py MODEL FAMILY D_STATE [PLUGINS]
prints one JSON line: ms and XLA's memory estimate per chunk size."""
import sys, time, json
import jax, numpy as np
sys.path.insert(0, ".")  # the repository root
from ssm_bench import plugins, train
from ssm_bench.config import TrainConfig
from ssm_bench.scan import chunked
from launch.timing import prepare

model, family, d_state = sys.argv[1], sys.argv[2], int(sys.argv[3])
plugins.load(sys.argv[4] if len(sys.argv) > 4 else "")
chunks = [1, 2, 3, 4, 6, 8]
comp = {}
for c in chunks:
  chunked.CPU_CHUNK[family] = c
  cfg = TrainConfig(task="C2", model=model, scan_method="chunked", d_model=32, d_state=d_state,
                    batch_size=64, train_length=60, steps=1, log_every=1, checkpoint_every=1,
                    curriculum_start=60)
  tr = train.Trainer(cfg)
  init, chunk = tr.compiled(donate=False)
  hp = train.hparams([cfg]); state = init(hp)
  compiled, compile_s, _, mem = prepare(chunk, state, hp)
  comp[c] = (compiled, state, hp, mem)
times = {c: [] for c in chunks}
for rep in range(7):
  for c in chunks:
    compiled, state, hp, mem = comp[c]
    t = time.perf_counter(); out = compiled(state, hp); jax.block_until_ready(out); times[c].append(time.perf_counter() - t)
print(json.dumps({"model": model, "d_state": d_state, **{str(c): {"ms": round(1e3 * float(np.median(times[c])), 2), "mem_mb": comp[c][3]} for c in chunks}}))
