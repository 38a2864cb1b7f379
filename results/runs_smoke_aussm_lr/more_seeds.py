"""The smoke's aussm config at another learning rate over more seeds, as one vmapped group:
    python results/runs_smoke_aussm_lr/more_seeds.py LR FIRST_SEED COUNT WORKDIR
(the runs of `launch.sweep --sweep=smoke_p --only=aussm --config.lr=LR`, seeds FIRST..+COUNT)."""
import os
import sys

from launch import sweeps
from ssm_bench import runs
from ssm_bench.config import PRESETS

lr, first, count, workdir = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
base = next(c for c in sweeps.expand("smoke_p", PRESETS["cpu"], {"lr": lr}) if c.model == "aussm")
cfgs = [base.replace(seed=s) for s in range(first, first + count)]
summaries = runs.train_group(cfgs, [os.path.join(workdir, runs.run_name(c)) for c in cfgs])
print(f"aussm lr {lr} seeds {first}-{first + count - 1}: max_len",
      [s["max_len"] for s in summaries])
