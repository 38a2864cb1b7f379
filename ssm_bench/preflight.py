"""A run's network checked before any run directory exists, so that bad input costs one line.

The checks, in one list that `launch.train` (one run) and `launch.sweep` (every distinct network
and task of a sweep) both call: the layers build with their kwargs and return the right shapes
on the run's longest sequence (`models.check`), a network with a plugin layer or layer kwargs
reads no token ahead at its initialisation (`causality.require`), and a plugin's theory rule
can be read on the run's task as the tables will read it (`theory_readable`). Each raises a
one-line ValueError.
"""
from __future__ import annotations

from ssm_bench import causality
from ssm_bench import language_table
from ssm_bench import models
from ssm_bench import registry
from ssm_bench import tables
from ssm_bench import train
from ssm_bench.config import TrainConfig
from tasks import registry as task_registry


def require(cfg: TrainConfig, seen: set | None = None):
  """Raise a one-line ValueError if cfg's network cannot train on its task (above).

  seen: a sweep's memo across its runs, updated here: a network already checked on the task
  (at its evaluation length) is not checked again, a network's causality (compiled) is checked
  once whatever its task, and a stack of built-in layers without kwargs is built once per
  network whatever its task (its layers are the suite's own: only its widths can be wrong, a
  transformer's d_model that its heads do not divide; table2's plan builds its 30 networks,
  0.7 s, not one per task). None: one run, and every check runs."""
  seen = set() if seen is None else seen
  net = cfg.model, cfg.depth, cfg.layer_kwargs, cfg.d_model, cfg.d_state
  builtin = causality.suite_tested(registry.parse_layers(cfg.model, cfg.depth), cfg.layer_kwargs)
  key = (net, None if builtin else cfg.task, cfg.eval_length)
  if key in seen:
    return
  seen.add(key)
  model_cfg = train.model_config(cfg)
  models.check(model_cfg, cfg.eval_length)  # its longest sequence
  if net not in seen:  # compiled, so once per network: a task sizes only its ends
    seen.add(net)
    causality.require(model_cfg)
  theory_readable(cfg)


def theory_readable(cfg: TrainConfig):
  """Read the theory of a run's stack on its task as the tables will (on its group, or as the
  language table predicts for a lang- task): a plugin's class whose rule misbehaves raises its
  one-line TheoryError before the run trains, not when its tables are made. Stacks of
  built-in layers pass unchecked (their classes' rules are the suite's own, tested:
  tests/test_theory.py)."""
  if _builtin(cfg):
    return
  group = task_registry.get_task(cfg.task).group
  if group is not None:
    tables.stack_prediction(cfg.model, cfg.depth, group, cfg.layer_kwargs)
  language_table.predicted(cfg.task, cfg.model, cfg.layer_kwargs, cfg.depth)  # None: no lang-


def _builtin(cfg: TrainConfig) -> bool:
  return all(registry.get(n).builtin for n in registry.parse_layers(cfg.model, cfg.depth))
