"""Run a sweep: expand its grid, group runs that share shapes, train each group as one program.

  python -m launch.sweep --sweep=smoke --workdir=runs/smoke
  python -m launch.sweep --sweep=table2 --dry_run
  python -m launch.sweep --sweep=table2 --only='^C2-' --executor=ray

Finished runs are skipped, interrupted ones resume from their checkpoints; the sweep's table is
printed at the end (built from the run summaries only).
"""
from __future__ import annotations

import collections
import os
import re
import sys
import time

from absl import flags

from launch import common
from launch import config_flags
from launch import executors
from launch import progress
from launch import sweeps
from launch import watchdog
from ssm_bench.config import PRESETS

DEADLINE_ENV = executors.DEADLINE_ENV

_SWEEP = flags.DEFINE_enum("sweep", "smoke", list(sweeps.SWEEPS), "Which sweep to run.")
_PRESET = flags.DEFINE_enum("preset", None, list(PRESETS),
                            "Base values under the sweep's grid (default: the sweep's own).")
_FIELDS = config_flags.define()
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory of run directories (default runs/<sweep>).")
_DRY = flags.DEFINE_bool("dry_run", False, "List the runs and compiled groups; train nothing.")
_ONLY = flags.DEFINE_string("only", None, "Regex: keep only runs whose name matches.")
_EXECUTOR = flags.DEFINE_enum("executor", "local", list(executors.EXECUTORS), "Where groups run.")
_GPUS = flags.DEFINE_float("gpus_per_group", None, "Ray: GPUs per group task (default: 1 where "
                           "the cluster has GPUs, else 0); a fraction shares a GPU, each worker "
                           "taking that fraction of its memory.", lower_bound=0.0)
_WORKERS = flags.DEFINE_integer("workers", 1, "Local executor on a CPU: train this many groups "
                               "at a time, each in its own process pinned to its share of the "
                               "cores (single-threaded XLA on one core; e.g. 2 on 2 cores); 1: "
                               "one group at a time in this process.", lower_bound=1)
_RAY_ADDRESS = flags.DEFINE_string("ray_address", None, "Ray: cluster address (default: local).")
_QUIET = flags.DEFINE_bool("quiet", False, "No progress bar or progress lines.")
_MEMORY = flags.DEFINE_float("memory_gb", None, "Device memory to fit groups into (default: what "
                             "an accelerator reports; on CPU groups are not split unless given).",
                             lower_bound=0.001)
_TARGET = common.TARGET  # --dry_run: plan for a GPU of launch/gpu_targets
_TIME_LIMIT = flags.DEFINE_float(
    "time_limit_s", 0, "Local executor: start no group once the longest group so far would not "
    "end within this many seconds of the sweep's start (for a session with a time limit: it stops "
    "between groups; the same command resumes); 0: no limit.", lower_bound=0.0)
_STALL = flags.DEFINE_float("stall_s", 1800, "Local executor: restart the sweep when it makes no "
                            "progress for this long (a hung program; results/pilots.md); 0: never.",
                            lower_bound=0.0)


def plan(sweep: str, workdir: str, only: str | None = None, preset: str | None = None,
         overrides: dict | None = None, check: bool = True):
  """[(configs, run dirs)] per shape group, in grid order. check: refuse bad plugin layers
  first (`check_layers`; off for runs that are only consulted, never trained)."""
  from ssm_bench import plugins, runs
  try:  # before the grid: a plugin layer's records (its preset values) must be known to it
    plugins.load((overrides or {}).get("plugins", ""))
  except ValueError as e:
    raise common.UsageError(str(e)) from None
  try:
    cfgs = sweeps.expand(sweep, base_values(sweep, preset), overrides)
  except ValueError as e:  # a --config. value the grid cannot take
    raise common.UsageError(str(e)) from None
  if only:
    try:
      pattern = re.compile(only)
    except re.error as e:
      raise common.UsageError(f"--only is not a valid regular expression ({e})") from None
    cfgs = [c for c in cfgs if pattern.search(runs.run_name(c))]
    if not cfgs:
      raise common.UsageError(f"--only={only!r} matches none of the {sweep} sweep's run names")
  if check:
    check_layers(cfgs)
  stage = sweeps.SWEEPS[sweep].stage or (lambda c: 0)
  groups = collections.OrderedDict()
  for c in cfgs:  # a group never spans stages (a stage may split a shape group by seed)
    groups.setdefault((stage(c), c.shape_key()), []).append(c)
  return [(g, [os.path.join(workdir, runs.run_name(c)) for c in g]) for g in groups.values()]


def base_values(sweep: str, preset: str | None) -> dict:
  """The preset a sweep's grid starts from: --preset, else the sweep's own."""
  return PRESETS[preset or sweeps.SWEEPS[sweep].preset]


def note_collapsed(overrides):
  """One line on stderr per --config. override that replaces an axis the sweep varies: the
  runs of its other values train as the override's (how a plugin layer gets a sweep's column),
  and runs made identical are kept once; said, since the run count alone does not show it."""
  base = base_values(_SWEEP.value, _PRESET.value)
  for field, values in sweeps.collapsed(_SWEEP.value, base, overrides).items():
    shown = ", ".join(map(str, values[:6])) + (", ..." if len(values) > 6 else "")
    print(f"note: --config.{field}={overrides[field]} replaces the {_SWEEP.value} sweep's "
          f"{len(values)} values of {field} ({shown}): their runs train with {field} "
          f"{overrides[field]}, and runs made identical are kept once", file=sys.stderr)


def check_layers(cfgs):
  """Every plugin loads, every run's network can be set up for its task (a task larger than
  pad_order, an analytic init whose construction differs), and passes `preflight.require`
  (each distinct network builds with the right shapes; a plugin's reads no token ahead and
  has a theory that can be read on the task): one line before any run directory exists."""
  from ssm_bench import plugins, preflight, train
  seen = set()  # preflight's memo: networks and (network, task) pairs checked
  configured = set()  # (shape, task) whose ModelConfig was made
  try:
    for c in cfgs:
      plugins.load(c.plugins)
      if (c.shape_key(), c.task) not in configured:
        configured.add((c.shape_key(), c.task))
        train.model_config(c)
      preflight.require(c, seen)
  except ValueError as e:  # PluginError, LayerError, ConfigError
    raise common.UsageError(str(e)) from None


def fit_to_memory(groups, budget_bytes: float, report=None, device=None):
  """Split every group into the fewest sub-groups that fit; refuse one whose single run does not.
  report(index, configs, estimate, sub-groups) sees each decision (for --dry_run); `device`: the
  one compiled for (default this backend's)."""
  from ssm_bench import memory
  try:
    return memory.fit_groups(groups, budget_bytes, report, device)
  except memory.DoesNotFit as e:
    raise common.UsageError(str(e)) from None


def stages(groups, stage_of=None):
  """The groups in stage order, one list per stage (one list when the sweep has no stages)."""
  if stage_of is None:
    return [groups]
  by_stage = collections.defaultdict(list)
  for g in groups:
    by_stage[stage_of(g[0][0])].append(g)
  return [by_stage[k] for k in sorted(by_stage)]


def prune(stage, all_groups, skip):
  """The stage's groups without the runs skip(config, finished) rules out, where finished is
  [(config, summary)] of every finished run of the sweep; returns (groups, runs dropped, groups
  emptied)."""
  from ssm_bench import runs
  finished = []
  for cfgs, dirs in all_groups:
    for c, d in zip(cfgs, dirs):
      s = runs.read_summary(d) or {}
      if s.get("status") in runs.FINISHED:
        finished.append((c, s))
  kept, runs_dropped, groups_dropped = [], 0, 0
  for cfgs, dirs in stage:
    ruled_out = [skip(c, finished) for c in cfgs]
    keep = [(c, d) for c, d, out in zip(cfgs, dirs, ruled_out) if not out]
    runs_dropped += runs.unfinished(d for d, out in zip(dirs, ruled_out) if out)
    if keep:
      kept.append(([c for c, _ in keep], [d for _, d in keep]))
    else:
      groups_dropped += 1
  return kept, runs_dropped, groups_dropped


def whole_sweep(groups, overrides):
  """The groups a stage's skip rule consults: every run of the sweep in this workdir, also those
  --only leaves out (a depth-2 launch skips what finished depth-1 runs made unnecessary)."""
  if not _ONLY.value:
    return groups
  workdir = _WORKDIR.value or os.path.join("runs", _SWEEP.value)
  return plan(_SWEEP.value, workdir, None, _PRESET.value, overrides, check=False)


def unfinished_groups(groups):
  """The groups with a run that has no finished summary (done or diverged)."""
  from ssm_bench import runs
  return [(c, d) for c, d in groups
          if any((runs.read_summary(x) or {}).get("status") not in runs.FINISHED for x in d)]


def to_train(groups, fit=None):
  """The unfinished groups, split by `fit` (groups -> groups that fit the device; None: kept
  whole). A finished group is neither measured nor split again: a resumed sweep on a fresh GPU
  machine would otherwise compile every finished shape's program once more to size it."""
  todo = unfinished_groups(groups)
  if fit and todo:  # then again: a split can leave a part whose runs all finished
    todo = unfinished_groups(fit(todo))
  return todo


def finished_count(groups) -> int:
  from ssm_bench import runs
  return sum(runs.is_finished(d) for _, dirs in groups for d in dirs)


# Of a GPU target's memory, what jax's allocator lets a process use by default (75%, with or
# without preallocation: docs.jax.dev, "GPU memory allocation"); on a GPU the sweep asks it.
TARGET_MEMORY_FRACTION = 0.75


def memory_budget() -> float | None:
  """--memory_gb, else the accelerator's memory (or --target's usable share); None on CPU
  (groups stay whole)."""
  if _MEMORY.value:
    return _MEMORY.value * 2 ** 30
  if _TARGET.value:
    from launch import bench_compiled
    return TARGET_MEMORY_FRACTION * bench_compiled.device_memory(_TARGET.value)
  import jax
  if jax.default_backend() == "cpu":
    return None
  from ssm_bench import memory
  return memory.device_bytes()


def target_device():
  """(device, context) to plan a --dry_run on: --target's compile-only GPU and the suite's GPU
  choices while its programs are traced (`bench_compiled.as_gpu`), or (None, no-op)."""
  import contextlib
  if not _TARGET.value:
    return None, contextlib.nullcontext
  if not _DRY.value:
    raise common.UsageError("--target plans a sweep for a GPU that is not here: add --dry_run")
  from launch import bench_compiled
  try:
    device = bench_compiled.target_device(_TARGET.value)
  except bench_compiled.TargetError as e:
    raise common.UsageError(str(e)) from None
  return device, lambda: bench_compiled.as_gpu(_TARGET.value)


def _count(n: int, noun: str) -> str:
  return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def check_workdir(workdir: str):
  try:
    os.makedirs(workdir, exist_ok=True)
  except OSError as e:
    raise common.UsageError(f"cannot create workdir {workdir}: {e.strerror}") from None
  if not os.access(workdir, os.W_OK | os.X_OK):
    raise common.UsageError(f"workdir {workdir} is not writable")


def main(argv):
  del argv
  common.enable_compilation_cache()
  workdir = _WORKDIR.value or os.path.join("runs", _SWEEP.value)
  try:
    overrides = config_flags.overrides(_FIELDS)
    if common.PLUGINS.value:
      if overrides.get("plugins", common.PLUGINS.value) != common.PLUGINS.value:
        raise ValueError("--plugins and --config.plugins differ; use one")
      overrides["plugins"] = common.PLUGINS.value
  except ValueError as e:
    raise common.UsageError(str(e)) from None
  groups = plan(_SWEEP.value, workdir, _ONLY.value, _PRESET.value, overrides)
  note_collapsed(overrides)
  device, as_target = target_device()  # a --target without --dry_run: one line, before any run
  if _WORKERS.value > 1 and _EXECUTOR.value != "local":
    raise common.UsageError("--workers is for the local executor (Ray runs a task per group)")
  if _EXECUTOR.value == "ray" and not _DRY.value:
    # The driver only plans and waits: it must not start a GPU backend (jax would preallocate
    # most of every visible GPU in it, under the workers' feet). Budgets and estimates are made
    # on a worker, for the workers' backend (executors.ray_plan).
    import jax
    jax.config.update("jax_platforms", "cpu")
  if _TIME_LIMIT.value and _EXECUTOR.value != "local":
    raise common.UsageError("--time_limit_s is for the local executor (Ray runs groups at once)")
  if _TIME_LIMIT.value:  # the sweep's end, fixed once: a restart by the watchdog inherits it
    os.environ.setdefault(DEADLINE_ENV, str(time.time() + _TIME_LIMIT.value))
  if _EXECUTOR.value == "local" and _STALL.value and not _DRY.value and not watchdog.supervised():
    # Before anything touches a device: the child, not this process, owns the accelerator.
    watchdog.exit_like(watchdog.supervise(sys.argv[1:], _STALL.value))
  n_runs, n_groups = sum(len(g) for g, _ in groups), len(groups)
  budget = memory_budget() if _DRY.value or _EXECUTOR.value == "local" else None

  def report(i, cfgs, est, parts):
    if _DRY.value:
      print(f"  estimate {est.bytes(len(cfgs)) / 2 ** 30:.2f} GiB for {len(cfgs)} runs "
            f"({est.per_run / 2 ** 30:.3f} GiB per run): "
            + ("fits" if len(parts) == 1 else
               f"split into {len(parts)} programs of {', '.join(str(len(p)) for p in parts)}"),
            flush=True)

  if _DRY.value:
    if _TARGET.value:
      print(f"planned for {_TARGET.value}: each program compiled for it, in "
            + (f"--memory_gb={_MEMORY.value:g}" if _MEMORY.value else
               f"{TARGET_MEMORY_FRACTION:.0%} of its memory (jax's default limit)"))
    elif budget and any(c.scan_method == "auto" for cfgs, _ in groups for c in cfgs):
      # the estimate is of the program this backend would run: plan another backend's method
      import jax
      from ssm_bench import scan
      print(f"memory estimates use this backend's scan method ({scan.resolve('auto')} on "
            f"{jax.default_backend()}); to plan for a GPU add --target=<a GPU of "
            f"launch/gpu_targets> (jax's CUDA plugin), or --config.scan_method="
            f"{scan.AUTO['gpu']}, which overstates a GPU's memory")
    n_fit = 0
    for i, (cfgs, dirs) in enumerate(groups):
      c = cfgs[0]
      init = f" init {c.init_from_analytic:g}" if c.init_from_analytic >= 0 else ""
      length = f" length {c.train_length}" if c.curriculum_start == c.train_length else ""
      tasks = sorted({x.task for x in cfgs})
      task = c.task if len(tasks) == 1 else f"{len(tasks)} tasks (padded to order {c.pad_order})"
      print(f"group {i}: {task} {c.model} depth {c.depth} d_model {c.d_model} d_state "
            f"{c.d_state}{length}{init} ({len(cfgs)} runs in one compiled program)", flush=True)
      if budget:
        with as_target():
          n_fit += len(fit_to_memory([(cfgs, dirs)], budget, report, device))
      for d in dirs:
        print(f"    {os.path.basename(d)}")
    fitted = ""
    if budget:
      verb = "1 program fits" if n_fit == 1 else f"{n_fit} programs fit"
      fitted = f"; {verb} {budget / 2 ** 30:.1f} GiB"
    print(f"{_SWEEP.value}: {_count(n_runs, 'run')} in {_count(n_groups, 'compiled group')}"
          f"{fitted}")
    sweep = sweeps.SWEEPS[_SWEEP.value]
    if sweep.skip:
      print("staged: groups run in stage order, and runs an earlier stage made unnecessary "
            "are skipped (at most the runs above)")
      consulted = whole_sweep(groups, overrides)  # with --only: the runs it leaves out too
      n_finished = finished_count(consulted)
      for i, stage in enumerate(stages(groups, sweep.stage)):
        kept = sum(len(c) for c, _ in prune(stage, consulted, sweep.skip)[0])
        print(f"  stage {i + 1}: {sum(len(c) for c, _ in stage)} run(s), {kept} of them wanted "
              f"by the {n_finished} run(s) finished so far")
    return
  from ssm_bench import runs
  n_finished_groups = len(groups) - len(unfinished_groups(groups))
  if _EXECUTOR.value == "ray":  # planned on a worker, for the workers' device
    fit = lambda gs: executors.ray_plan(gs, _MEMORY.value, _GPUS.value, _RAY_ADDRESS.value)
  else:
    fit = (lambda gs: fit_to_memory(gs, budget)) if budget else None
  # In this process each group is sized just before it trains (executors.local); worker
  # processes and Ray get their groups already split.
  lazy_fit = fit if _EXECUTOR.value == "local" and _WORKERS.value == 1 else None
  try:
    todo = to_train(groups, None if lazy_fit else fit)
  except (executors.ExecutorUnavailable, ValueError) as e:  # incl. a run that fits nowhere
    raise common.UsageError(str(e)) from None
  check_workdir(workdir)
  if _WORKERS.value > 1:
    import jax
    if jax.default_backend() != "cpu":  # workers are CPU processes
      raise common.UsageError(f"--workers trains on the CPU, and this machine has a "
                              f"{jax.default_backend()}: leave it at 1 (or use --executor=ray)")
  print(f"{_SWEEP.value}: {_count(n_runs, 'run')} in {_count(n_groups, 'group')}; "
        f"{_count(n_finished_groups, 'group')} already finished", flush=True)
  t0 = time.time()
  sweep = sweeps.SWEEPS[_SWEEP.value]
  whole = whole_sweep(groups, overrides) if sweep.skip else groups
  bar = progress.Progress(len(todo), sum(runs.unfinished(d) for _, d in todo),
                         enabled=not _QUIET.value)
  failures = skipped = 0
  deadline = executors.Deadline(float(os.environ[DEADLINE_ENV])) if _TIME_LIMIT.value else None
  stopped = ""
  try:
    for stage in stages(todo, sweep.stage):
      if sweep.skip:
        stage, runs_dropped, groups_dropped = prune(stage, whole, sweep.skip)
        skipped += runs_dropped
        bar.drop(groups_dropped, runs_dropped)
      if stage:  # (a stage the skips emptied starts no executor)
        failures += executors.EXECUTORS[_EXECUTOR.value](
            stage, progress=bar, gpus_per_group=_GPUS.value, address=_RAY_ADDRESS.value,
            workers=_WORKERS.value, deadline=deadline, fit=lazy_fit)
  except executors.TimeUp as e:
    stopped = (f"stopped at the time limit (--time_limit_s={_TIME_LIMIT.value:g}): "
               f"{e.groups_left} group(s) of this stage, and any later stage, not started; "
               "the same command resumes")
  except (executors.ExecutorUnavailable, runs.RunError) as e:  # a directory it cannot use
    raise common.UsageError(str(e)) from None
  finally:
    bar.close()
  from ssm_bench import report
  print(f"finished in {time.time() - t0:.0f}s"
        + (f"; {skipped} runs not needed (an earlier stage made them unnecessary)" if skipped else ""))
  # this sweep's runs only: a shared run directory (results/runs) holds thousands of others
  print(report.sweep_table(workdir, {os.path.basename(d) for _, dirs in groups for d in dirs}))
  if stopped:
    print(stopped)
  if failures:
    print(f"{failures} groups failed; their runs are recorded with status 'failed'", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
  axis = ("--config.{0}=VALUE trains the sweep's grid with that {0} (its runs of other {0}s "
          "merge), --only=REGEX keeps the runs whose name matches (e.g. --only=-mamba-)")
  common.FLAG_HINTS.update({f: axis.format(f) for f in ("model", "task", "depth", "lr", "seed")})
  common.run_main(main)
