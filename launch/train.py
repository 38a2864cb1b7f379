"""Train one run and evaluate its length generalisation.

  python -m launch.train --task=C2 --model=negmamba --depth=1 --preset=cpu
  python -m launch.train --task=S3 --model=simple_aussm --depth=2 --init_from_analytic=0.05

The workdir is the run directory: a finished run there is reported, not retrained; one with
checkpoints and no summary resumes from the latest checkpoint.
"""
from __future__ import annotations

import dataclasses
import os
import sys

from absl import flags

from launch import common
from ssm_bench import models
from ssm_bench import runs
from ssm_bench import scan
from ssm_bench.config import ACTIVATIONS, INITIAL_STATES, NORMS, PRESETS, SCHEDULES, TrainConfig
from tasks import registry

_D = TrainConfig()
_TASK = flags.DEFINE_string("task", _D.task, registry.GRAMMAR)
_MODEL = flags.DEFINE_string("model", _D.model, "A layer name (" + ", ".join(models.LAYERS) +
                             ") or a comma list of them for a hybrid stack.")
_LAYERS = flags.DEFINE_string("layers", None, "Alias of --model for hybrid lists (s4d,mamba).")
_DEPTH = flags.DEFINE_integer("depth", None, "Layers (repeats a single --model).", lower_bound=1)
_D_MODEL = flags.DEFINE_integer("d_model", None, "Model width.", lower_bound=1)
_D_STATE = flags.DEFINE_integer("d_state", None, "State size per channel.", lower_bound=1)
_LR = flags.DEFINE_float("lr", None, "Peak learning rate.", lower_bound=0.0)
_SCHEDULE = flags.DEFINE_enum("schedule", None, SCHEDULES, "Learning-rate schedule.")
_SEED = flags.DEFINE_integer("seed", None, "Seed for init and data.")
_STEPS = flags.DEFINE_integer("steps", None, "Training steps.", lower_bound=1)
_BATCH = flags.DEFINE_integer("batch_size", None, "Batch size.", lower_bound=1)
_SCAN = flags.DEFINE_enum("scan_method", None, scan.METHODS, "Scan method (auto: by backend).")
_NORM = flags.DEFINE_enum("norm", None, NORMS, "Normalisation in each block.")
_ACT = flags.DEFINE_enum("activation", None, ACTIVATIONS, "Nonlinearity between layers.")
_H0 = flags.DEFINE_enum("initial_state", None, INITIAL_STATES, "Initial SSM state.")
_EVAL_SEQS = flags.DEFINE_integer("eval_seqs", None, "Evaluation sequences.", lower_bound=1)
_CKPT = flags.DEFINE_integer("checkpoint_every", None, "Steps between checkpoints.", lower_bound=1)
_LOG = flags.DEFINE_integer("log_every", None, "Steps per metrics line.", lower_bound=1)
_PRESET = flags.DEFINE_enum("preset", "paper", list(PRESETS), "Base values; flags override them.")
_INIT = flags.DEFINE_float("init_from_analytic", None,
                           "Start from the analytic construction plus noise of this scale.")
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory (default: runs/<run name>).")

_FLAG_FIELDS = {"depth": _DEPTH, "d_model": _D_MODEL, "d_state": _D_STATE, "lr": _LR,
                "schedule": _SCHEDULE, "seed": _SEED, "steps": _STEPS, "batch_size": _BATCH,
                "scan_method": _SCAN, "norm": _NORM, "activation": _ACT, "initial_state": _H0,
                "eval_seqs": _EVAL_SEQS, "checkpoint_every": _CKPT, "log_every": _LOG,
                "init_from_analytic": _INIT}


def config_from_flags() -> TrainConfig:
  values = dict(PRESETS[_PRESET.value])
  values.update({k: f.value for k, f in _FLAG_FIELDS.items() if f.value is not None})
  values["task"] = _TASK.value
  values["model"] = _LAYERS.value or _MODEL.value
  if "," in values["model"]:
    values["depth"] = len(values["model"].split(","))
  if problem := registry.validate(values["task"]):
    raise common.UsageError(problem)
  try:
    models.parse_layers(values["model"])
    cfg = TrainConfig(**values)
    if cfg.init_from_analytic >= 0:
      from ssm_bench import analytic, train
      mcfg = train.model_config(cfg)
      wanted = models.parse_layers(cfg.model, cfg.depth)
      if mcfg.layers != wanted:
        raise ValueError(f"the analytic construction for {cfg.task} is {','.join(mcfg.layers)}; "
                         f"pass --model={','.join(mcfg.layers)} with --init_from_analytic")
  except ValueError as e:  # includes analytic.NoConstruction
    raise common.UsageError(str(e)) from None
  return cfg


def main(argv):
  del argv
  common.enable_compilation_cache()
  cfg = config_from_flags()
  run_dir = _WORKDIR.value or os.path.join("runs", runs.run_name(cfg))
  done = runs.read_summary(run_dir)
  if done and done.get("status") in runs.FINISHED:
    print(f"{run_dir} already holds a finished run; not retraining.")
  else:
    def log(step, m):
      print(f"step {step:6d}  loss {float(m['loss'][0]):.4f}  acc {float(m['acc'][0]):.3f}  "
            f"length {int(m['length'][0])}", flush=True)
    try:
      runs.train_group([cfg], [run_dir], log=log)
    except runs.RunError as e:
      raise common.UsageError(str(e)) from None
    done = runs.read_summary(run_dir)
  curve = done.get("acc_curve") or {}
  picks = {L: curve.get(str(L)) for L in (60, 100, 200, 500, 1000) if str(L) in curve}
  print(f"{done['status']}: max_len {done['max_len']}  acc(L) "
        + "  ".join(f"{L}:{v:.3f}" for L, v in picks.items())
        + f"  steps {done['steps']}  wall {done['wall_time_s']:.0f}s  -> {run_dir}")
  if done["status"] == "failed":
    sys.exit(1)


if __name__ == "__main__":
  common.run_main(main)
