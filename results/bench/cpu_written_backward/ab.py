# Whole training steps on this CPU, interleaved in one process: `chunked` as committed at
# 4b3b57c (autodiff of checkpointed chunks; chunks 4 real, 1 complex) against the written-out
# backwards (chunk 4 everywhere). ms per run-step, median of 7; PYTHONPATH=. python this.py
import importlib.util, subprocess, sys, jax, numpy as np
from ssm_bench import train
from ssm_bench.config import TrainConfig, PRESETS
from ssm_bench.scan import chunked
from launch.timing import interleaved, prepare
src = subprocess.run(["git", "show", "4b3b57c:ssm_bench/scan/chunked.py"], capture_output=True,
                     text=True, check=True).stdout
spec = importlib.util.spec_from_loader("chunked_4b3b57c", loader=None)
old = importlib.util.module_from_spec(spec); exec(src, old.__dict__)
new_scan = chunked.scan
for model, d_state, K in [("mamba", 4, 8), ("negmamba", 4, 8), ("aussm", 4, 8), ("s4d", 4, 8),
                          ("mamba", 4, 1), ("aussm", 4, 1), ("mamba", 16, 8), ("aussm", 16, 8)]:
  cfg0 = TrainConfig(task="C2", model=model, **{**PRESETS["cpu"], "d_state": d_state})
  lrs = np.geomspace(1e-4, 3e-2, 27)
  hp = train.hparams([cfg0.replace(lr=float(lr), seed=i % 3) for i, lr in enumerate(lrs[:K])])
  progs = []
  for scan in (old.scan, new_scan):
    chunked.scan = scan  # while tracing
    init, chunk = train.Trainer(cfg0).compiled(donate=False)
    state = init(hp)
    program, _, (res, _), _ = prepare(chunk, state, hp)
    progs.append((program, state, res))
  chunked.scan = new_scan
  before, after = (t / K / cfg0.log_every * 1e3 for t in interleaved(
      [lambda p=p: p[0](p[1], hp) for p in progs], 7))
  diff = max(float(np.max(np.abs(a - b)) / np.max(np.abs(a))) for a, b in zip(
      jax.tree.leaves(progs[0][2]["params"]), jax.tree.leaves(progs[1][2]["params"])))
  print(f"| {model} | {d_state} | {K} | {before:.2f} | {after:.2f} | {before / after:.2f} | "
        f"{diff:.1e} |", flush=True)
