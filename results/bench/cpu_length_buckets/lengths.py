"""ms per training step of a 2-run group (table2_cpu sizes, A4) at train_length 8, 16, 32, 60:
the full-length program of each, timed over 100-step chunks (the best of 3 after a warm-up).

    python results/bench/cpu_length_buckets/lengths.py mamba,aussm,rnn,transformer,lstm
"""
import time, sys, jax, jax.numpy as jnp
from ssm_bench import train
from ssm_bench.config import TrainConfig, preset_values
models = sys.argv[1].split(",")
for m in models:
    row = []
    for T in (8, 16, 32, 60):
        cfg = TrainConfig(**preset_values("table2_cpu", m)).replace(task="A4", model=m, depth=1, train_length=T, steps=3000)
        tr = train.Trainer(cfg)
        init_many, chunk_many = tr.compiled()
        hp = train.hparams([cfg.replace(seed=i) for i in range(2)])
        st = init_many(hp)
        t0 = time.perf_counter(); st, mm = chunk_many(st, hp); jax.block_until_ready(st); c = time.perf_counter() - t0
        ts = []
        for _ in range(3):
            t0 = time.perf_counter(); st, mm = chunk_many(st, hp); jax.block_until_ready(st); ts.append(time.perf_counter() - t0)
        row.append(f"T={T}: {min(ts)*10:.2f} ms/step (first {c:.1f}s)")
    print(m, "|", "; ".join(row), flush=True)
