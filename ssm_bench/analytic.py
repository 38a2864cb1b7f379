"""Analytic constructions: weights set by hand in the same Flax modules that training uses.

They are the proof that the layers compute what the formulas say: each tracks its task exactly
(to float32 rounding) at lengths far past training. All use norm='none' and a ReLU between
layers, so sign/phase features pass through the blocks unchanged.

This module holds what they share (the `Construction` record, the lookup of a task's
constructions over the registered layers, the size limit, `build`); each construction lives in
a module of its own:

- Any Abelian group, one simple_aussm layer: one state coordinate per character in a generating
  set of the dual group, theta_j(x) = 2 pi c_j(x) / e; decode by nearest roots (Theorem 4.1;
  analytic_one_layer.py, with parity and modular counting below).
- Any solvable group, derived-length-many simple_aussm layers, and any 2-group,
  elementary-2-length-many negmamba layers (analytic_cascade.py): each level tracks its Abelian
  quotient and passes the rest of the product to the next.
- S3, two simple_aussm layers (paper Sec. 5.3, App. B; analytic_s3.py): layer 1 tracks the
  sign, layer 2 rotates by +-2 pi / 3 depending on layer 1's current state; the same cascade
  from two full AUSSM layers (input term off), the network paper 000's Sec. 6 starts near.
- negmamba on parity (a(1) = -1, a(0) = 1) and s4d on modular counting (a = exp(2 pi i / m)).
- Any finite group up to order 720 (`reflections.MAX_ORDER`), one DeltaProduct layer with n_h =
  its reflection length (analytic_deltaproduct.py): A5, S4 and A4 with two reflections per token.
- Any cyclic or dihedral group, two DeltaNet layers of one reflection per token, or a negmamba
  layer under one, the hybrid stack's own construction (analytic_dihedral.py; `Construction.below`).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

import flax
import jax
import jax.numpy as jnp
import numpy as np

from ssm_bench import failures
from ssm_bench import models
from ssm_bench.config import ModelConfig
from tasks import groups
from tasks import registry


class NoConstruction(ValueError):
  """The task has no hand-built solution (and, for some groups, the theory says none exists)."""


# A construction's width grows with its group (the cascade's pair channels: |G / G'| |G| of
# them), and its dense kernels with the width squared: S4xC30's simple_aussm cascade asked for
# 87,228 channels (28 GiB a kernel), D2520's was killed at 24 GiB. Refused before allocating.
MAX_PARAMS = 2 ** 28  # 1 GiB of float32 (C5040's full-AUSSM cascade: 1.27e9)


def _param_shapes(cfg: ModelConfig, length: int = 4):
  """The parameter tree's shapes, traced abstractly: run eagerly, the init compiled each
  initializer (2-6 s of a construction's build on CPU)."""
  return jax.eval_shape(lambda: models.StateTracker(cfg).init(
      jax.random.PRNGKey(0), jnp.zeros((1, length), jnp.int32)))


def oversize(cfg: ModelConfig, shapes=None) -> str:
  """Why a construction of this config is not built (over MAX_PARAMS parameters); '' where it
  fits. From the abstract shapes: nothing is allocated."""
  shapes = _param_shapes(cfg) if shapes is None else shapes
  count = sum(math.prod(s.shape) for s in jax.tree.leaves(shapes))
  if count <= MAX_PARAMS:
    return ""
  return (f"the {'+'.join(sorted(set(cfg.layers)))} construction would need {count:,} "
          f"parameters (width {cfg.d_model}), more than the {MAX_PARAMS:,} built here")


def zeros_like_init(cfg: ModelConfig, length: int = 4):
  """The model's parameter tree, all zeros (only the shapes are needed). NoConstruction above
  MAX_PARAMS parameters."""
  shapes = _param_shapes(cfg, length)
  if why := oversize(cfg, shapes):
    raise NoConstruction(why)
  return jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), flax.core.unfreeze(shapes))


def finish(params):
  """A construction's parameters (built in NumPy) as jax arrays."""
  return jax.tree.map(jnp.asarray, params)


@dataclasses.dataclass(frozen=True)
class Construction:
  """Weights set by hand for the tasks `applies` accepts; a layer's registry record lists its own."""
  description: str
  applies: Callable[[str], bool]  # task name -> whether this construction tracks it
  build: Callable[[str, int, int], tuple]  # (task, d_model, d_state) -> (ModelConfig, params)
  fallback: bool = False  # the default only where no other layer's construction applies
  # task name -> why the construction is not built for a task it would hold ('' where it is
  # built or does not apply): the error then says so instead of only "no construction"
  limit: Callable[[str], str] = lambda task: ""
  # task name -> the layer kwargs the build writes into its config (config text; '' for the
  # layer's defaults): a card or profile at other kwargs does not count the task as held
  kwargs: Callable[[str], str] = lambda task: ""
  # layer types the build puts under the record's own layer: the construction is then the
  # hybrid stack's, named by it ('negmamba,deltanet'), not the layer's alone
  below: tuple = ()

  def stack(self, layer: str) -> str:
    """The model name it is listed and built under: the layer, or the stack with `below`."""
    return ",".join(self.below + (layer,))


def task_group(task_name: str):
  """The task's group, or None (a task without one, or a name that is no task; `build` hands a
  `-gen` task's group name to its construction)."""
  try:
    return registry.get_task(task_name).group
  except (registry.TaskError, groups.GroupError):
    return None


def _held_task(task_name: str) -> str:
  """The task a construction is built for: a `<group>-gen` task's group (its tokens are the
  group's elements, drawn from a generating set, so what tracks every stream of the group tracks
  it); any other task itself. An unknown task is a TaskError, not "no construction"."""
  task = registry.get_task(task_name)
  return task.group.name if task.group is not None and task_name.endswith("-gen") else task_name


def _failure(what: str, task: str, e: Exception) -> str:
  return f"its construction's {what} failed on {task}: {failures.one_line(e, 200)}"


def _ask(what: str, fn, task: str):
  """(answer, '') of a construction's function on a task, or (None, why) where it raised: a
  plugin's construction that fails is its layer's line, not every task's traceback."""
  try:
    return fn(task), ""
  except NoConstruction as e:
    return None, str(e)
  except Exception as e:
    return None, _failure(what, task, e)


def _options(task_name: str) -> dict:
  """model name -> a Construction that applies to the task (each layer's first, and each hybrid
  stack's: `Construction.below`), in registration order."""
  from ssm_bench import registry as layer_registry
  held = _held_task(task_name)
  options = {}
  for spec in layer_registry.specs():
    for c in spec.constructions:
      if c.stack(spec.name) not in options and _ask("applies", c.applies, held)[0]:
        options[c.stack(spec.name)] = c
  return options


def _constructions(task_name: str) -> dict:
  """layer name -> the Construction that tracks the task, from the layer registry in
  registration order (the default first); NoConstruction says why there is none."""
  options = _options(task_name)
  if options:
    ordered = sorted(options, key=lambda name: options[name].fallback)  # stable: registration
    return {name: options[name] for name in ordered}
  reasons = [diagonal_limit(task_name)] + [
      f"{layer}: {why}" for layer, why in construction_limits(task_name).items()]
  reason = "; ".join(r for r in reasons if r)
  raise NoConstruction(f"no analytic construction for task {task_name!r}"
                       + (f" ({reason})" if reason else f"; {tasks_with_constructions()}"))


def tasks_with_constructions() -> str:
  """The kinds of task some registered layer (plugins' too) holds by hand, each asked of one
  task of its kind, so the line follows the registry rather than a list kept beside it."""
  kinds = {"a group name": "C2", "<group>-gen": "C2-gen", "modcount<m>": "modcount3",
           "lang-<language>": "lang-parity", **{name: name for name in registry.TASKS}}
  held = [kind for kind, task in kinds.items() if _options(task)]
  return "constructions exist for: " + (", ".join(held) or "no task")


def construction_limits(task_name: str) -> dict:
  """layer name -> why its construction is not built for the task though it would hold it (a
  size limit); {} where nothing is left out."""
  from ssm_bench import registry as layer_registry
  held = _held_task(task_name)
  out = {}
  for spec in layer_registry.specs():
    for c in spec.constructions:
      why, failed = _ask("limit", c.limit, held)
      failed = failed or _ask("applies", c.applies, held)[1]
      if (why or failed) and c.stack(spec.name) not in out:
        out[c.stack(spec.name)] = why or failed
  return out


def diagonal_limit(task_name: str) -> str:
  """Why no diagonal stack tracks a non-Abelian group by hand here ('' where one does or none
  is needed)."""
  g = registry.get_task(task_name).group
  if g is None or g.is_solvable:
    return ""  # a solvable group has its cascade (analytic_cascade.py)
  return (f"{task_name} is not solvable: no stack of diagonal (DCD) layers can track it at "
          "finite precision (paper 000, Theorem 4.2)")


def construction_models(task_name: str) -> tuple:
  """The layer types with a construction for the task, the default first."""
  return tuple(_constructions(task_name))


def constructions(task_name: str) -> dict:
  """layer type -> the description of its construction for the task, the default first; {} where
  there is none."""
  try:
    return {name: c.description for name, c in _constructions(task_name).items()}
  except NoConstruction:
    return {}


def held_by_hand(task_name: str, model: str, layer_kwargs: str = "") -> dict | None:
  """None where no construction of `model` layers (or of the hybrid stack `model`) tracks the
  task; else the kwargs it is built at and whether they are `layer_kwargs` (the layer's defaults
  filled in on both sides). A layer at other kwargs may not hold the task at all (the clock's
  C3 takes m = 3, not 4)."""
  try:
    c = _constructions(task_name).get(model)
  except NoConstruction:
    return None
  if c is None:
    return None
  from ssm_bench import registry as layer_registry
  full = lambda text: layer_registry.layer_kwargs(tuple(model.split(",")), text)
  # a plugin's kwargs function that fails, or names kwargs its layer does not take, holds
  # nothing here, as a failing `applies` does
  def declared(task):
    text = c.kwargs(task)
    return text, full(text)
  built, why = _ask("kwargs", declared, _held_task(task_name))
  if why:
    return None
  text, kwargs = built
  return {"layer_kwargs": layer_registry.canonical_kwargs(text),
          "at_these_kwargs": kwargs == full(layer_kwargs)}


def build(task_name: str, d_model: int = 0, d_state: int = 0, model: str = ""):
  """(ModelConfig, params) of the task's construction from `model` layers (default: the first
  of construction_models); NoConstruction says why there is none."""
  options = _constructions(task_name)
  if model and model not in options:
    reason = construction_limits(task_name).get(model) or diagonal_limit(task_name)
    raise NoConstruction(f"no {model} construction for {task_name}; choose one of "
                         f"{', '.join(options)}" + (f" ({reason})" if reason else ""))
  name, held = model or next(iter(options)), _held_task(task_name)
  try:
    return options[name].build(held, d_model, d_state)
  except NoConstruction:
    raise
  except Exception as e:  # a plugin's construction: its layer's one line
    raise NoConstruction(f"{name}: {_failure('build', held, e)}") from None


def perturb(params, scale: float, key):
  """The construction plus Gaussian noise of std `scale` on every parameter (paper 001, Sec. 6)."""
  leaves, treedef = jax.tree.flatten(params)
  keys = jax.random.split(key, len(leaves))
  return jax.tree.unflatten(treedef, [
      x + scale * jax.random.normal(k, x.shape, x.dtype) for x, k in zip(leaves, keys)])
