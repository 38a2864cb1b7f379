"""A layer's state-tracking profile in one command: train it over the profile's groups and depths,
then write a Markdown report and a heatmap beside the theory's prediction for its class.

  python -m launch.profile --model=negmamba --workers=2            # CPU scale: hours on 2 cores
  python -m launch.profile --plugins=examples.rotation --model=rotation
  python -m launch.profile --model=aussm --preset=paper --executor=ray   # the GPU protocol
  python -m launch.profile --model=negmamba --groups=C2xC2,C4          # any groups, others too
  python -m launch.profile --model=my_layer --compare_with=results/runs # beside the built-ins

Training is the `profile` sweep (launch/sweeps.py): resumable, one compiled program per group
and depth, staged by depth (a deeper stack is skipped once a shallower one extrapolated; at CPU
scale a cell whose two runs go against the theory then trains seeds 1-3 at both rates), under
the watchdog or on Ray. The report is built from the run summaries only, like every table.
"""
from __future__ import annotations

import os
import re
import sys
import time

from absl import flags

from launch import common
from launch import config_flags
from launch import executors
from launch import watchdog
from ssm_bench import config
from ssm_bench import tracking_profile

_MODEL = flags.DEFINE_string("model", None, "The layer to profile (a registered or plugged-in "
                             "name; one layer, repeated at each depth), or a hybrid stack "
                             "(a comma list, bottom first: trained at its own depth).")
_PRESET = flags.DEFINE_enum("preset", "cpu", list(config.PROFILE_PRESETS),
                            "cpu: CPU sizes (depth 1 of a small layer: 4-65 min on 2 cores, "
                            "deeper stacks more); paper: for a GPU; "
                            "tiny: 20 steps a run, for trying it out (30 runs in 3 "
                            "programs, every group padded to order 60: 33 s on 2 cores).")
_GROUPS = flags.DEFINE_list("groups", list(tracking_profile.GROUPS), "The groups to train: the "
                            "profile's, and any other group names (each trained at the "
                            "profile's depths, rates and seeds, reported as one more row).")
_DEPTHS = flags.DEFINE_list("depths", [str(d) for d in tracking_profile.DEPTHS], "A subset of "
                            "the profile's depths.")
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory of run directories (default "
                               "runs/profile).")
_OUT = flags.DEFINE_string("out", None, "Where the report and figure go (default: the workdir).")
_EXECUTOR = flags.DEFINE_enum("executor", "local", ["local", "ray"], "Where groups run.")
_WORKERS = flags.DEFINE_integer("workers", 1, "Local executor on a CPU: groups trained at a "
                               "time, each in its own single-threaded process (e.g. 2 on 2 "
                               "cores).", lower_bound=1)
_DRY = flags.DEFINE_bool("dry_run", False, "List the runs; train nothing, write no report.")
_REPORT = flags.DEFINE_bool("report_only", False, "Write the report from the finished runs; "
                            "train nothing.")
_COMPARE = flags.DEFINE_string("compare_with", None, "A directory of run directories (e.g. "
                                "results/runs, the committed profiles): the report opens with "
                                "this layer's profile beside every other layer's profile there "
                                "at the same protocol.")
_QUIET = flags.DEFINE_bool("quiet", False, "No progress bar.")
_TIME_LIMIT = flags.DEFINE_float("time_limit_s", 0, "Local executor: start no group the longest "
                                 "so far would carry past this many seconds (the report covers "
                                 "the finished runs; the same command resumes); 0: no limit.",
                                 lower_bound=0.0)
_FIELDS = config_flags.define()


def _check(model: str, group_names: list, depths: list) -> list[list[str]]:
  """The sweeps to run for these groups and depths, as their extra arguments: the profile's
  own groups in one sweep (--only), each other group in a sweep of its own (--config.task);
  UsageError for a bad choice. A hybrid stack trains at its own depth only."""
  from ssm_bench import plugins, registry
  layers = [n.strip() for n in (model or "").split(",")]
  try:
    plugins.load(common.PLUGINS.value)
    if not all(layers):
      raise ValueError("--model must name a layer or a comma list of them (a hybrid stack); "
                       "choose from " + ", ".join(registry.names()))
    for name in layers:
      registry.get(name)
  except ValueError as e:
    raise common.UsageError(str(e)) from None
  if len(layers) > 1 and len(set(layers)) == 1:  # one network, one identity: the layer's own
    raise common.UsageError(f"--model={model} is {layers[0]} at depth {len(layers)}: "
                            f"--model={layers[0]} --depths={len(layers)}")
  group_names = common.group_names(
      "--groups", group_names, "; the profile's are " + ", ".join(tracking_profile.GROUPS))
  valid = [str(d) for d in tracking_profile.depths_of(model)]
  if len(layers) > 1 and _DEPTHS.present and depths != valid:
    raise common.UsageError(f"--depths: a hybrid stack's depth is the length of its list "
                            f"({len(layers)}); leave --depths out")
  depths = valid if len(layers) > 1 else depths
  if not depths or any(d not in valid for d in depths):
    raise common.UsageError(f"--depths must be among {', '.join(valid)}, got "
                            f"{','.join(depths) or 'none'}")
  name = re.escape(",".join(layers).replace(",", "+"))  # as run directories spell a stack
  only = lambda gs: f"--only=^({'|'.join(gs)})-{name}-L({'|'.join(depths)})-"
  own = [g for g in group_names if g in tracking_profile.GROUPS]
  other = [g for g in group_names if g not in tracking_profile.GROUPS]
  return [[only(own)]] * bool(own) + [[only([g]), f"--config.task={g}"] for g in other]


def _profiles(workdir: str) -> dict:
  from ssm_bench import tables
  rs = tables.load(workdir)
  tables.load_plugins(rs.good + rs.diverged)
  return tracking_profile.profile_data(rs.good + rs.diverged)


def write_report(workdir: str, out: str, model: str, protocol: str,
                 compare_with: str | None = None) -> list[str]:
  """The profiles of `model` under the preset `protocol` from the runs in workdir, one section
  each (the preset's values, and each set of overrides such as another d_state, apart), opened
  by an overview beside the other layers' profiles of the same protocols in `compare_with`:
  <out>/profile_*.md/png."""
  from ssm_bench import figures
  profiles = _profiles(workdir)  # every layer's, read once
  data = {k: v for k, v in profiles.items()
          if k[0] == model and k[2].partition(" + ")[0] == protocol}
  if not data:
    raise common.UsageError(f"no finished {protocol} runs of {model} in {workdir}")
  compare = {}
  if compare_with:
    mine = {k[2] for k in data}
    there = profiles if os.path.samefile(compare_with, workdir) else _profiles(compare_with)
    compare = {k: v for k, v in there.items() if k[0] != model and k[2] in mine}
    if not compare:
      print(f"note: --compare_with: no other layer's {' or '.join(sorted(mine))} profile in "
            f"{compare_with}", file=sys.stderr)
  os.makedirs(out, exist_ok=True)
  part = model.replace(",", "+")  # a stack as run directories spell it
  name = f"profile_{protocol}_{part}.md"
  with open(os.path.join(out, name), "w") as f:
    f.write(f"# State-tracking profile of {model}\n\n{tracking_profile.INTRO}\n\n"
            + tracking_profile.markdown(data, compare))
  overview = figures.write_profile_overview(
      {**data, **compare}, out, f"profile_{protocol}_{part}_overview.png") if compare else []
  return [name] + figures.write_profiles(data, out) + overview


def main(argv):
  del argv
  model = ",".join(n.strip() for n in (_MODEL.value or "").split(","))  # as runs store it
  sweeps = _check(model, _GROUPS.value, _DEPTHS.value)
  protocol = config.PROFILE_PRESETS[_PRESET.value]
  workdir = _WORKDIR.value or os.path.join("runs", "profile")
  if _COMPARE.value and not os.path.isdir(_COMPARE.value):
    raise common.UsageError(f"--compare_with: no directory {_COMPARE.value} (a directory of "
                            "run directories, e.g. results/runs)")
  try:
    given = config_flags.overrides(_FIELDS)
  except ValueError as e:
    raise common.UsageError(str(e)) from None
  if not _REPORT.value:
    args = ["--sweep=profile", f"--preset={protocol}", f"--config.model={model}",
            f"--workdir={workdir}", f"--executor={_EXECUTOR.value}",
            f"--workers={_WORKERS.value}"]
    args += [f"--config.depth={model.count(',') + 1}"] * ("," in model)  # a hybrid's own
    args += [f"--config.plugins={common.PLUGINS.value}"] if common.PLUGINS.value else []
    args += [f"--config.{k}={v}" for k, v in given.items() if k != "model"]
    args += ["--dry_run"] * _DRY.value + ["--quiet"] * _QUIET.value
    args += [f"--time_limit_s={_TIME_LIMIT.value}"] if _TIME_LIMIT.value else []
    if _TIME_LIMIT.value:  # one end for every sweep below (each reads it, as a restart does)
      os.environ.setdefault(executors.DEADLINE_ENV, str(time.time() + _TIME_LIMIT.value))
    for i, extra in enumerate(sweeps):  # the profile's groups, then each other group in turn
      if i and _TIME_LIMIT.value and time.time() >= float(os.environ[executors.DEADLINE_ENV]):
        break  # the report covers what finished; the same command resumes
      # dying with this process: a SIGTERM or SIGKILL to it alone must not leave the sweep
      # training behind (a second profile of the same groups would then race it)
      child = watchdog.spawn(args + extra)
      try:
        rc = child.wait()
      except KeyboardInterrupt:  # a SIGINT sent to this process alone: stop the sweep as Ctrl-C
        sys.exit(watchdog.stop(child))  # (the sweep printed the interrupted line)
      if rc:
        sys.exit(rc)
    if _DRY.value:
      sys.exit(0)
  written = write_report(workdir, _OUT.value or workdir, model, protocol, _COMPARE.value)
  print(f"wrote {', '.join(written)} to {_OUT.value or workdir}")


if __name__ == "__main__":
  common.FLAG_HINTS.update(
      task="--groups=C2,S3,D3 picks the groups; another task: launch.train --task",
      depth="--depths=1,2 picks the depths")
  common.run_main(main)
