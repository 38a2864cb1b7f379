"""Train one run and evaluate its length generalisation.

  python -m launch.train --task=C2 --model=negmamba --depth=1 --preset=cpu
  python -m launch.train --task=S3 --model=simple_aussm --depth=2 --init_from_analytic=0.05

The workdir is the run directory: a finished run there is reported, not retrained; one with
checkpoints and no summary resumes from the latest checkpoint.
"""
from __future__ import annotations

import os

from absl import flags

from launch import common
from launch import config_flags
from launch import interrupts
from ssm_bench import models
from ssm_bench import plugins
from ssm_bench import preflight
from ssm_bench import registry
from ssm_bench import runs
from ssm_bench.config import PRESETS, TrainConfig
from tasks import registry as tasks

_FIELDS = config_flags.define(short=True, help={
    "task": tasks.GRAMMAR,
    "model": "A layer name (" + ", ".join(registry.names()) + ", or a plugin's) or a comma list "
             "for a hybrid stack.",
    "plugins": "Modules that register layers (examples.rotation, mypkg.layers:register)."})
_LAYERS = flags.DEFINE_string("layers", None, "Alias of --model for hybrid lists (s4d,mamba).")
_PRESET = flags.DEFINE_enum("preset", "paper", list(PRESETS), "Base values; flags override them.")
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory (default: runs/<run name>).")


def config_from_flags() -> TrainConfig:
  try:
    # --plugins (the short spelling of --config.plugins) too; loaded before the preset's
    # values, since a plugin layer's own values for the preset are in its record
    given = ",".join(p for p in (config_flags.overrides(_FIELDS).get("plugins"),
                                 common.PLUGINS.value) if p)
    plugins.load(given)
    values = config_flags.build(_FIELDS, _PRESET.value,
                                **({"model": _LAYERS.value} if _LAYERS.value else {}))
    if given:
      values["plugins"] = given
    values.setdefault("task", TrainConfig.task)
    values.setdefault("model", TrainConfig.model)
    if "," in values["model"]:  # a hybrid's depth is its list's length; another is an error
      values["depth"] = values["depth"] if "depth" in config_flags.overrides(_FIELDS) else \
          len(values["model"].split(","))
    if problem := tasks.validate(values["task"]):
      raise common.UsageError(problem)
    cfg = TrainConfig(**values)
    plugins.load(cfg.plugins)
    models.parse_layers(cfg.model)
    if cfg.init_from_analytic >= 0:
      from ssm_bench import analytic, train
      built = train.analytic_config(cfg)
      if (built.model, built.depth) != (cfg.model, cfg.depth):
        layers = ",".join(models.parse_layers(built.model, built.depth))
        others = analytic.construction_models(cfg.task)
        raise ValueError(f"the analytic construction for {cfg.task} is {layers}; "
                         f"pass --model={layers} with --init_from_analytic (the task has "
                         f"constructions from: {', '.join(others)})")
      cfg = built  # the recorded config describes the network that is trained
    preflight.require(cfg)  # builds, reads no token ahead, its theory readable: one line
  except ValueError as e:  # includes ConfigError and analytic.NoConstruction
    raise common.UsageError(str(e)) from None
  return cfg


def main(argv):
  del argv
  common.enable_compilation_cache()
  cfg = config_from_flags()
  run_dir = _WORKDIR.value or os.path.join("runs", runs.run_name(cfg))
  done = runs.read_summary(run_dir)
  if done and runs.rundir.identity(done["config"]) != runs.rundir.identity(cfg):
    raise common.UsageError(
        f"{run_dir} already holds a different run ({runs.rundir.differences(done['config'], cfg)}"
        "); use another --workdir, or the default one (runs/<run name>)")
  if done and done.get("status") in runs.FINISHED:
    print(f"{run_dir} already holds a finished run; not retraining.")
  else:
    try:
      runs.train_group([cfg], [run_dir], log=lambda line: print(line, flush=True),
                       on_chunk=interrupts.check)
    except runs.RunError as e:
      raise common.UsageError(str(e)) from None
    done = runs.read_summary(run_dir)
  strings = done.get("max_len_of") == "whole strings"  # a language: judged on whole strings
  curve = done.get("seq_acc_curve" if strings else "acc_curve") or {}
  shown = [L for L in ("60", "100", "200", "500", "1000") if L in curve]
  if curve and list(curve)[-1] not in shown:  # the longest evaluated: past 1000, or below 60
    shown.append(list(curve)[-1])
  print(f"{done['status']}: max_len {done['max_len']}  {'strings' if strings else 'acc'}(L) "
        + "  ".join(f"{L}:{curve[L]:.3f}" for L in shown)
        + f"  steps {done['steps']}  wall {done['wall_time_s']:.0f}s  -> {run_dir}")


if __name__ == "__main__":
  common.run_main(main)
