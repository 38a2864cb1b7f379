"""Fit shape groups to the device: XLA's memory estimate of the compiled program, and the split.

A group of K runs is one vmapped program; its device memory grows with K. A group is first
measured whole (its own program, which training then loads from the compilation cache); only one
that does not fit is estimated: `estimate` compiles the training chunk for K = 1 and K = 2 on
abstract inputs (nothing is allocated) and fits fixed + K * per_run; `split` cuts a group into
the fewest near-equal sub-groups that fit the budget with headroom; a group whose single run does
not fit is refused in one line. Estimates are memoised per shape (the task only changes the
vocabulary, so it is left out of the key).
"""
from __future__ import annotations

import dataclasses
import math
import os

import jax

from ssm_bench import train
from ssm_bench.config import TrainConfig
from tasks import registry

HEADROOM = 0.85  # use at most this fraction of the device: XLA's estimate is not the peak
_CACHE: dict = {}


class DoesNotFit(ValueError):
  """Even one run of a group is larger than the device."""


@dataclasses.dataclass(frozen=True)
class Estimate:
  fixed: float  # bytes shared by the group (compiled constants, the batch of hyperparameters)
  per_run: float  # bytes each run adds

  def bytes(self, k: int) -> float:
    return self.fixed + k * self.per_run


def device_bytes() -> float:
  """The default device's memory as the backend reports it; on CPU, the machine's RAM."""
  stats = jax.devices()[0].memory_stats() or {}
  if "bytes_limit" in stats:
    return float(stats["bytes_limit"])
  return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def compiled_bytes(lowered) -> float:
  return executable_bytes(lowered.compile())


def executable_bytes(compiled) -> float:
  """XLA's estimate of a compiled program's device memory: arguments, outputs and temporaries,
  less what outputs reuse of the arguments."""
  m = compiled.memory_analysis()
  return float(m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
               - m.alias_size_in_bytes)


def _program_bytes(cfg: TrainConfig, k: int, device=None) -> float:
  """The training chunk of k runs compiled on abstract inputs, for `device` (default: this
  backend's first; a compile-only device plans for a GPU that is not attached)."""
  trainer = train.Trainer(cfg)
  init_many, chunk_many = trainer.compiled()
  hp = train.hparams([cfg] * k)
  state = jax.eval_shape(init_many, hp)
  if device is not None:
    state, hp = placed((state, hp), device)
  return compiled_bytes(chunk_many.lower(state, hp))


def placed(tree, device):
  """Abstract arrays of tree's shapes on `device`: what to lower a program for it with (a
  compile-only device holds no arrays)."""
  sharding = jax.sharding.SingleDeviceSharding(device)
  return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), tree)


def _key(cfg: TrainConfig, device=None) -> tuple:
  """Configs whose programs have the same size: the task counts through its vocabulary and
  classes (embedding, head, the Cayley table the sampler folds with), so tasks of one order
  share an estimate and a larger group never borrows a smaller one's."""
  sizes = None
  if cfg.init_from_analytic < 0:
    task = registry.get_task(cfg.task)
    sizes = ((cfg.pad_order, cfg.pad_order) if cfg.pad_order
             else (task.vocab_size, task.num_classes))
    cfg = cfg.replace(task="")
  where = (jax.default_backend(), getattr(device, "device_kind", None))
  return where + (sizes,) + cfg.replace(preset="").shape_key()


def estimate(cfg: TrainConfig, device=None) -> Estimate:
  """Training memory of a group of cfg's shape as fixed + K * per_run bytes."""
  key = _key(cfg, device)
  if key not in _CACHE:
    one, two = _program_bytes(cfg, 1, device), _program_bytes(cfg, 2, device)
    per_run = max(two - one, 0.0)
    _CACHE[key] = Estimate(max(one - per_run, 0.0), per_run or one)
  return _CACHE[key]


def split(k: int, fits) -> int:
  """The fewest sub-groups s such that a sub-group of ceil(k / s) runs fits; fits(n) -> bool."""
  for s in range(1, k + 1):
    if fits(math.ceil(k / s)):
      return s
  return 0


def plan_group(cfgs: list[TrainConfig], budget: float, est: Estimate | None = None,
               name: str = "") -> list[list[TrainConfig]]:
  """cfgs cut into the fewest near-equal sub-groups whose estimate fits budget * HEADROOM."""
  est = est or estimate(cfgs[0])
  usable = budget * HEADROOM
  s = split(len(cfgs), lambda n: est.bytes(n) <= usable)
  if not s:
    raise DoesNotFit(f"{name or cfgs[0].task}: one run needs {est.bytes(1) / 2 ** 30:.1f} GiB, "
                     f"more than {HEADROOM:.0%} of the {budget / 2 ** 30:.1f} GiB device")
  size = math.ceil(len(cfgs) / s)
  return [cfgs[i:i + size] for i in range(0, len(cfgs), size)]


def fits_whole(cfgs: list[TrainConfig], budget: float, device=None) -> bool:
  """Whether the group's own program (all its runs, compiled on abstract inputs) fits the budget
  with headroom. With the persistent compilation cache on, training then loads this compiled
  program instead of compiling it again, so measuring it costs little beyond the estimate's two
  smaller programs that it replaces."""
  return _program_bytes(cfgs[0], len(cfgs), device) <= budget * HEADROOM


def fit_groups(groups, budget_bytes: float, report=None, device=None):
  """[(configs, dirs)] with every group split into the fewest sub-groups that fit; DoesNotFit
  for a group whose single run does not. Without `report` a group is first measured whole
  (fits_whole) and estimated only if it does not fit; report(index, configs, estimate,
  sub-groups) sees each decision, from the estimate (for --dry_run, which prints it).
  `device`: the device compiled for (`_program_bytes`)."""
  import os
  out = []
  for i, (cfgs, dirs) in enumerate(groups):
    if report is None and fits_whole(cfgs, budget_bytes, device):
      out.append((cfgs, dirs))
      continue
    est = estimate(cfgs[0], device)
    parts = plan_group(cfgs, budget_bytes, est, name=os.path.basename(dirs[0]))
    if report:
      report(i, cfgs, est, parts)
    where = dict(zip(cfgs, dirs))
    out += [(p, [where[c] for c in p]) for p in parts]
  return out


def eval_chunk(trainer, budget: float | None, apply_fn=None, args=()) -> int:
  """The largest evaluation chunk <= cfg.eval_chunk dividing eval_seqs whose compiled program
  fits the budget (the configured chunk when no budget is given): the correctness program of
  `apply_fn` (default the model's) with `args` after the tokens, as evaluation will run it."""
  from ssm_bench import evaluation
  cfg = trainer.cfg
  chunk = min(cfg.eval_chunk, cfg.eval_seqs)
  if budget is None:
    return chunk
  params = jax.eval_shape(trainer.init, jax.tree.map(lambda x: x[0], train.hparams([cfg])))["params"]
  data = jax.ShapeDtypeStruct((cfg.eval_seqs, cfg.eval_length), jax.numpy.int32)
  while chunk > 1:
    if cfg.eval_seqs % chunk == 0:
      fn = evaluation.make_correctness_fn(apply_fn or trainer.model.apply, chunk)
      if compiled_bytes(fn.lower(params, data, data, *args)) <= budget * HEADROOM:
        return chunk
    chunk -= 1
  return 1
