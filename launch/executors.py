"""Where shape groups run: in this process, or as Ray tasks (one task per group).

Every executor writes into the same run directories, so skipping, resuming and tables work the
same whichever ran the group.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import time


class ExecutorUnavailable(RuntimeError):
  """The executor's dependency is missing; the message says how to install it."""


class TimeUp(Exception):
  """The time limit stopped the sweep before `groups_left` groups of the current stage."""

  def __init__(self, groups_left: int):
    super().__init__(groups_left)
    self.groups_left = groups_left


DEADLINE_ENV = "SSM_BENCH_SWEEP_DEADLINE"  # a --time_limit_s end as a Unix time: a restart
# (the watchdog's) and each sweep a profile runs read the same end


class Deadline:
  """A sweep's time limit: a group is started only if the longest group so far would still end
  before `end` (the first always starts), so a limited session (a lent GPU, a preemptible
  machine) stops between groups instead of losing a group cut off halfway."""

  def __init__(self, end: float, clock=None):
    self.end, self.clock, self.longest, self.started = end, clock or time.time, 0.0, 0

  def allows_another(self) -> bool:
    return not self.started or self.clock() + self.longest <= self.end

  def start(self) -> float:
    self.started += 1
    return self.clock()

  def ended(self, started_at: float):
    self.longest = max(self.longest, self.clock() - started_at)


def local(groups, progress=None, workers: int = 1, deadline: Deadline | None = None, fit=None,
          **_) -> int:
  """Train groups one after another in this process, or with workers > 1 that many at a time in
  worker processes (`processes`); returns the number of failed groups. `progress` is a
  launch.progress.Progress (or None); a `deadline` that allows no other group raises TimeUp.
  `fit` (groups -> groups that fit the device) sizes each group just before it trains, so a
  sweep that stops early never compiles the groups it does not reach (on a cold GPU each costs
  a compile), and a group's sizing counts in its time against the deadline."""
  if workers > 1:
    return processes(groups, progress, workers, deadline=deadline)
  from ssm_bench import runs
  failures = 0
  for i, group in enumerate(groups):
    started_at = _start(deadline, len(groups) - i)
    parts = [group]
    if fit:  # a split can leave a part whose runs all finished
      parts = [(c, d) for c, d in fit(parts) if runs.unfinished(d)]
      if progress and len(parts) > 1:
        progress.add_groups(len(parts) - 1)
    for j, (cfgs, dirs) in enumerate(parts):
      if j:
        started_at = _start(deadline, len(groups) - i)
      failures += _train_local(cfgs, dirs, progress)
      if deadline:
        deadline.ended(started_at)
  return failures


def _start(deadline: Deadline | None, groups_left: int) -> float | None:
  if deadline and not deadline.allows_another():
    raise TimeUp(groups_left)
  return deadline.start() if deadline else None


def _train_local(cfgs, dirs, progress) -> int:
  """Train one group in this process; 1 if it failed (its summaries say 'failed'), else 0."""
  from launch import interrupts
  from ssm_bench import runs
  left = runs.unfinished(dirs)  # a resumed group trains only these
  if progress:
    progress.start_group(f"{cfgs[0].task} {cfgs[0].model} x{cfgs[0].depth}", left, cfgs[0].steps)
  failed = 0
  try:
    runs.train_group(cfgs, dirs, progress=progress.step if progress else None,
                     on_chunk=interrupts.check)
  except runs.RunError:
    raise
  except Exception:  # recorded as 'failed' in each run's summary by train_group
    failed = 1
  if progress:
    progress.group_done(left)
  return failed


def core_slices(cores: list[int], workers: int) -> list[list[int]]:
  """The CPU cores of each worker: disjoint and as even as possible; with more workers than
  cores, workers share cores round-robin (each then gets one)."""
  if workers >= len(cores):
    return [[cores[i % len(cores)]] for i in range(workers)]
  return [cores[i::workers] for i in range(workers)]


def cpu_worker_env(threads: int, base: dict | None = None) -> dict:
  """A CPU worker's environment: jax on the CPU, single-threaded XLA when it has one core. One
  thread per process is what makes several processes pay: on 2 cores a lone sweep spent half its
  CPU time in the kernel (XLA's thread pool synchronising on tiny ops; results/bench/README.md).
  With more cores a worker keeps XLA's threads, bounded by the cores it is pinned to."""
  env = dict(os.environ if base is None else base)
  xla = [f for f in env.get("XLA_FLAGS", "").split()
         if not f.startswith("--xla_cpu_multi_thread_eigen")]
  if threads == 1:
    xla.append("--xla_cpu_multi_thread_eigen=false")
  env.update(XLA_FLAGS=" ".join(xla), JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="2")
  return env


def processes(groups, progress=None, workers: int = 2, poll_s: float = 0.2,
              deadline: Deadline | None = None, **_) -> int:
  """Train up to `workers` groups at a time, each in a fresh CPU process (launch/worker.py)
  pinned to its own cores; returns the number of failed groups.
  Groups finish in any order, into the same run directories as `local`. A worker killed by a
  signal leaves its runs unfinished (the next launch resumes them) and counts as failed; a run
  directory holding another run stops the sweep, as in `local`."""
  import json
  import signal
  import subprocess
  from launch import watchdog
  from launch import worker
  from ssm_bench import runs
  cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(
      range(os.cpu_count() or 1))
  free = core_slices(cores, workers)
  queue, running, failures = list(groups), {}, 0

  def start(cfgs, dirs, slot):
    env = {**cpu_worker_env(len(slot)), worker.CORES_ENV: ",".join(map(str, slot))}
    proc = subprocess.Popen([sys.executable, "-m", "launch.worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env, text=True)
    proc.stdin.write(json.dumps({"configs": [dataclasses.asdict(c) for c in cfgs],
                                 "dirs": [os.path.abspath(d) for d in dirs]}))
    proc.stdin.close()
    return proc

  try:
    while queue or running:
      while queue and free and not (deadline and not deadline.allows_another()):
        cfgs, dirs = queue.pop(0)
        slot = free.pop(0)
        started_at = deadline.start() if deadline else None
        running[start(cfgs, dirs, slot)] = (slot, runs.unfinished(dirs), started_at)
        watchdog.beat()
      if queue and not running:  # the deadline holds the rest back
        raise TimeUp(len(queue))
      time.sleep(poll_s)
      for proc in [p for p in running if p.poll() is not None]:
        slot, n, started_at = running.pop(proc)
        if deadline:
          deadline.ended(started_at)
        free.append(slot)
        out = proc.stdout.read()
        proc.stdout.close()
        if proc.returncode == 2 and "run_error" in out:
          raise runs.RunError(json.loads(out.strip().splitlines()[-1])["run_error"])
        if proc.returncode in (130, -signal.SIGINT):
          raise KeyboardInterrupt
        failures += proc.returncode != 0
        if progress:
          progress.group_done(n)
  finally:  # Ctrl-C or an error: stop the workers (their checkpoints stay for the next launch)
    for proc in running:
      proc.send_signal(signal.SIGINT)
    for proc in running:
      try:
        proc.wait(timeout=30)
      except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
  return failures


def worker_env(gpus_per_group: float) -> dict:
  """Environment of a Ray worker, set before it imports jax (hence runtime_env, not os.environ).
  A worker with a share of a GPU preallocates that share of its memory (JAX's default BFC
  allocator; the platform allocator is documented as very slow); a CPU worker hides the GPUs."""
  # The driver's directory first on the path: a plugin module found from here (python -m puts
  # the current directory on sys.path) is found by the worker too.
  path = [os.getcwd()] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
  env = {"TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": os.pathsep.join(path)}
  if gpus_per_group > 0:
    env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{0.9 * min(gpus_per_group, 1.0):.3f}"
  else:
    env["JAX_PLATFORMS"] = "cpu"
  return env


def _ray_group(cfg_dicts, dirs):
  from launch import common
  from ssm_bench import runs
  from ssm_bench.config import TrainConfig
  common.enable_compilation_cache()
  try:
    runs.train_group([TrainConfig(**c) for c in cfg_dicts], dirs)
    return True
  except Exception:  # the summaries already say 'failed'
    return False


def _ray_lib(address):
  """(ray, whether this call started it): Ray connected to `address` (None: a local instance)."""
  try:
    import ray as ray_lib
  except ImportError:
    raise ExecutorUnavailable('the ray executor needs Ray: pip install -e ".[ray]"') from None
  started_here = not ray_lib.is_initialized()
  if started_here:
    ray_lib.init(address=address, include_dashboard=False, log_to_driver=False)
  return ray_lib, started_here


def _default_gpus(ray_lib, gpus_per_group):
  if gpus_per_group is None:
    return 1.0 if ray_lib.cluster_resources().get("GPU", 0) > 0 else 0.0
  return gpus_per_group


def _ray_fit(cfg_dicts, dirs, memory_gb):
  """On a worker: the memory budget of its device (memory_gb if given; none on a CPU) and the
  groups split to fit it, estimated for the workers' backend. Returns (groups, error)."""
  import jax
  from launch import common
  from ssm_bench import memory
  from ssm_bench.config import TrainConfig
  common.enable_compilation_cache()  # a group measured whole is then loaded, not recompiled
  groups = [([TrainConfig(**c) for c in cs], ds) for cs, ds in zip(cfg_dicts, dirs)]
  budget = memory_gb * 2 ** 30 if memory_gb else (
      memory.device_bytes() if jax.default_backend() != "cpu" else None)
  if budget is None:
    return [(cs, ds) for cs, ds in zip(cfg_dicts, dirs)], None
  try:
    fitted = memory.fit_groups(groups, budget)
  except memory.DoesNotFit as e:
    return None, str(e)
  return [([dataclasses.asdict(c) for c in cs], ds) for cs, ds in fitted], None


def ray_plan(groups, memory_gb: float | None = None, gpus_per_group: float | None = None,
             address: str | None = None):
  """The groups split to fit the workers' device memory, planned on a worker (the driver may be
  a CPU head node, and starting a GPU backend in it would take the workers' memory)."""
  ray_lib, _ = _ray_lib(address)  # left running for the sweep's `ray` executor
  gpus = _default_gpus(ray_lib, gpus_per_group)
  from ssm_bench.config import TrainConfig
  task = ray_lib.remote(num_cpus=1, num_gpus=gpus)(_ray_fit).options(
      runtime_env={"env_vars": worker_env(gpus)})
  fitted, error = ray_lib.get(task.remote([[dataclasses.asdict(c) for c in cs] for cs, _ in groups],
                                          [list(ds) for _, ds in groups], memory_gb))
  if error:
    raise ValueError(error)
  return [([TrainConfig(**c) for c in cs], ds) for cs, ds in fitted]


def ray(groups, progress=None, gpus_per_group: float | None = None, address: str | None = None,
        max_retries: int = 3, **_) -> int:
  """One Ray task per group, on a cluster at `address` or a local Ray instance. GPUs are
  requested by default where the cluster has them (one per group unless told otherwise). A
  worker that dies (preempted, out of memory) is retried `max_retries` times, each resuming from
  the group's checkpoints; a group that still did not finish counts as failed (its runs stay
  unfinished, and the next launch resumes them)."""
  ray_lib, started_here = _ray_lib(address)
  try:
    gpus_per_group = _default_gpus(ray_lib, gpus_per_group)
    from ssm_bench import runs
    task = ray_lib.remote(num_cpus=1, num_gpus=gpus_per_group)(_ray_group).options(
        runtime_env={"env_vars": worker_env(gpus_per_group)}, max_retries=max_retries)
    pending = {task.remote([dataclasses.asdict(c) for c in cfgs], [os.path.abspath(d) for d in dirs]):
               runs.unfinished(dirs) for cfgs, dirs in groups}
    failures = 0
    while pending:
      ready, _ = ray_lib.wait(list(pending), num_returns=1)
      for ref in ready:
        n = pending.pop(ref)
        try:
          failures += 0 if ray_lib.get(ref) else 1
        except ray_lib.exceptions.RayError as e:  # the worker died: nothing to record
          print(f"warning: a Ray worker died ({type(e).__name__}); its group's runs stay "
                "unfinished and resume on the next launch", file=sys.stderr, flush=True)
          failures += 1
        if progress:
          progress.group_done(n)
    return failures
  finally:
    if started_here:
      ray_lib.shutdown()


EXECUTORS = {"local": local, "ray": ray}
