"""Train one shape group in a fresh process: the worker of the local executor's `--workers`.

  python -m launch.worker < group.json     # {"configs": [TrainConfig as a dict], "dirs": [...]}

The parent (executors.processes) sets this process's XLA threads and CPU cores before jax is
imported, which is why a group gets a process of its own. Exit status 0: the group trained
(finished runs are skipped as in any launch); 1: it failed, and its summaries say so; 2: the
run directory holds another run (a JSON line on stdout says which), which stops the sweep;
130: a Ctrl-C (SIGINT) stopped it, which stops the sweep too.
"""
from __future__ import annotations

import json
import os
import sys


CORES_ENV = "SSM_BENCH_WORKER_CORES"  # the CPU cores this worker is pinned to, "0,2"


def main() -> int:
  # Pinned and tied to the parent here, before jax starts its threads (a preexec_fn would run
  # in the forked copy of a multithreaded parent).
  cores = os.environ.get(CORES_ENV)
  if cores and hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {int(c) for c in cores.split(",")})
  from launch import watchdog
  watchdog.die_with_parent()
  job = json.load(sys.stdin)
  # stdout is the parent's pipe for the one JSON line below; anything else printed goes to stderr
  report = os.fdopen(os.dup(1), "w")
  os.dup2(2, 1)
  from launch import common
  from launch import interrupts
  from ssm_bench import runs
  from ssm_bench.config import TrainConfig
  common.enable_compilation_cache()
  # (a plugin's layers register here when train.model_config loads each config's plugins)
  cfgs = [TrainConfig(**c) for c in job["configs"]]
  interrupts.arm()  # a Ctrl-C noted while jax imported stops the worker here (130)
  try:
    runs.train_group(cfgs, job["dirs"], progress=lambda _: watchdog.beat(),
                     on_chunk=interrupts.check)
  except runs.RunError as e:  # not the group's failure but the sweep's: the parent stops
    print(json.dumps({"run_error": str(e)}), file=report, flush=True)
    return 2
  except Exception:  # recorded as 'failed' in each run's summary by train_group
    return 1
  return 0


if __name__ == "__main__":
  try:
    sys.exit(main())
  except KeyboardInterrupt:  # 130 and no line (the sweep prints it once for all its workers),
    sys.stderr.flush()       # without the interpreter's teardown: with XLA's threads busy (a
    os._exit(130)            # Ctrl-C while compiling) it crashed with SIGSEGV in most tries
