"""Benchmarks on the current backend, in one process, inputs generated once.

  python -m launch.bench            # the full table (batch 256, length 60, d_model 128, d_state 64)
  python -m launch.bench --json --models=mamba,negmamba --reps=5

Each timing: compile measured separately, one warm-up, then the median of --reps runs. Every
variant is first checked against the reference (sequential scan, separate runs, per-length
evaluation) and the check's result is part of the output. Writes results/bench/<backend>.json.
"""
from __future__ import annotations

import json
import os
import statistics
import time

from absl import flags
import jax
import jax.numpy as jnp
import numpy as np

from launch import common
from ssm_bench import evaluation
from ssm_bench import models
from ssm_bench import scan
from ssm_bench import train
from ssm_bench.config import PRESETS, TrainConfig

_MODELS = flags.DEFINE_string("models", ",".join(models.LAYERS), "Comma list of models to time.")
_BATCH = flags.DEFINE_integer("batch", 256, "Batch size for the step timings.")
_LENGTH = flags.DEFINE_integer("length", 60, "Sequence length for the step timings.")
_D_MODEL = flags.DEFINE_integer("d_model", 128, "Width for the step timings.")
_D_STATE = flags.DEFINE_integer("d_state", 64, "State size for the step timings.")
_REPS = flags.DEFINE_integer("reps", 5, "Timed repetitions (median reported).", lower_bound=1)
_SECTIONS = flags.DEFINE_list("sections", ["step", "scan", "train_many", "eval", "sampling"],
                              "Which benchmarks to run.")
_JSON = flags.DEFINE_bool("json", False, "Print JSON instead of tables.")
_OUT = flags.DEFINE_string("out", "results/bench", "Directory for <backend>.json ('' for none).")


def timed(fn, *args, reps: int):
  """(compile seconds, median run seconds, output): fn is jitted; first call compiles."""
  t = time.perf_counter()
  out = jax.block_until_ready(fn(*args))
  compile_s = time.perf_counter() - t
  jax.block_until_ready(fn(*args))  # warm-up
  times = []
  for _ in range(reps):
    t = time.perf_counter()
    jax.block_until_ready(fn(*args))
    times.append(time.perf_counter() - t)
  return compile_s, statistics.median(times), out


def step_config(model: str, method: str, **kw) -> TrainConfig:
  return TrainConfig(task="C2", model=model, scan_method=method, d_model=_D_MODEL.value,
                     d_state=_D_STATE.value, batch_size=_BATCH.value, train_length=_LENGTH.value,
                     steps=1, log_every=1, checkpoint_every=1, curriculum_start=_LENGTH.value, **kw)


def _reference_grads(trainer, state):
  """Loss gradients of run 0 on one fixed batch (the check behind every step timing)."""
  cfg = trainer.cfg
  params = jax.tree.map(lambda x: x[0], state["params"])
  tokens, labels = trainer.task.sample(jax.random.PRNGKey(1), cfg.batch_size, cfg.train_length)
  mask = jnp.ones(tokens.shape, bool)
  grads = jax.grad(lambda p: trainer.loss_fn(p, tokens, labels, mask)[0])(params)
  return [np.asarray(g, np.float64) for g in jax.tree.leaves(grads)]


def bench_step(model_names, reps):
  """One training step (forward, backward, update) per model and scan method."""
  rows = []
  for name in model_names:
    per_method, ref = {}, None
    for method in ("sequential", "associative"):
      cfg = step_config(name, method)
      trainer = train.Trainer(cfg)
      init, chunk = trainer.compiled()
      hp = train.hparams([cfg])
      state = init(hp)
      compile_s, run_s, _ = timed(chunk, state, hp, reps=reps)
      grads = _reference_grads(trainer, state)
      if ref is None:
        ref, same = grads, True
      else:  # Adam's update amplifies rounding in near-zero gradients, so compare gradients
        err = np.sqrt(sum(np.sum((a - b) ** 2) for a, b in zip(ref, grads)))
        same = bool(err <= 1e-3 * np.sqrt(sum(np.sum(a ** 2) for a in ref)))
      per_method[method] = {"compile_s": round(compile_s, 3), "step_ms": round(run_s * 1e3, 2),
                            "matches_reference": bool(same)}
    fastest = min(per_method, key=lambda k: per_method[k]["step_ms"])
    default = scan.resolve("auto")
    ratio = per_method[default]["step_ms"] / per_method[fastest]["step_ms"]
    rows.append({"model": name, **{f"{k}_ms": v["step_ms"] for k, v in per_method.items()},
                 "compile_s": {k: v["compile_s"] for k, v in per_method.items()},
                 "fastest": fastest, "default": default, "default_over_fastest": round(ratio, 3),
                 "all_match": all(v["matches_reference"] for v in per_method.values())})
  return rows


def bench_scan(reps):
  """The scan alone against bytes moved / measured bandwidth (the physical floor)."""
  shape = (_BATCH.value, _LENGTH.value, _D_MODEL.value, _D_STATE.value)
  k1, k2 = jax.random.split(jax.random.PRNGKey(0))
  a = jax.random.uniform(k1, shape, jnp.float32, -1, 1)
  b = jax.random.normal(k2, shape, jnp.float32)
  nbytes = a.size * 4
  _, copy_s, _ = timed(jax.jit(lambda x: x * 1.0001 + 1.0), a, reps=reps)
  bandwidth = 2 * nbytes / copy_s  # read + write
  floor_s = 3 * nbytes / bandwidth  # read a and b, write h
  ref = None
  rows = []
  for method in ("sequential", "associative"):
    fn = jax.jit(lambda a, b, m=method: scan.linear_scan(a, b, None, m))
    _, run_s, out = timed(fn, a, b, reps=reps)
    out = np.asarray(out)
    ref = out if ref is None else ref
    rows.append({"method": method, "scan_ms": round(run_s * 1e3, 2),
                 "floor_ms": round(floor_s * 1e3, 2), "fraction_of_floor": round(floor_s / run_s, 3),
                 "matches_reference": bool(np.allclose(out, ref, rtol=1e-4, atol=1e-4))})
  return {"shape": list(shape), "bandwidth_GBps": round(bandwidth / 1e9, 2), "methods": rows}


def bench_train_many(reps, base: TrainConfig | None = None):
  """Seconds per run for K configs in one vmapped program versus K separate runs."""
  base = base or TrainConfig(task="C2", model="negmamba", **{
      **PRESETS["cpu"], "steps": 20, "log_every": 20, "checkpoint_every": 20})
  trainer = train.Trainer(base)
  init, chunk = trainer.compiled()
  lrs = np.geomspace(1e-4, 3e-2, 27)
  rows, single = [], None
  for k in (1, 9, 27):
    cfgs = [base.replace(lr=float(lr), seed=i % 3) for i, lr in enumerate(lrs[:k])]
    hp = train.hparams(cfgs)
    state = init(hp)
    compile_s, run_s, (out, _) = timed(chunk, state, hp, reps=reps)
    per_run = run_s / k
    # check: run 0 of the group equals the same config trained alone
    hp1 = train.hparams(cfgs[:1])
    alone, _ = chunk(init(hp1), hp1)
    same = all(np.allclose(np.asarray(a)[0], np.asarray(b)[0], rtol=1e-4, atol=1e-6)
               for a, b in zip(jax.tree.leaves(alone["params"]), jax.tree.leaves(out["params"])))
    single = single or per_run
    rows.append({"K": k, "seconds_per_run": round(per_run, 4), "compile_s": round(compile_s, 2),
                 "vs_separate": round(per_run / single, 3), "matches_separate": bool(same)})
  return {"config": "negmamba C2, cpu preset widths, 20 steps", "rows": rows}


def bench_eval(reps, cfg: TrainConfig | None = None, num_seqs: int = 64, grid=evaluation.GRID):
  """One forward pass at length 1000 for every acc(L) versus one evaluation per grid length."""
  cfg = cfg or TrainConfig(task="C2", model="negmamba", **PRESETS["cpu"])
  trainer = train.Trainer(cfg)
  params = trainer.model.init(jax.random.PRNGKey(0), jnp.zeros((1, 8), jnp.int32))
  tokens, labels = evaluation.eval_set(trainer.task, num_seqs, evaluation.EVAL_LENGTH)
  one = evaluation.make_correctness_fn(trainer.model.apply, num_seqs)
  t = time.perf_counter()
  per_pos = evaluation.curves(np.asarray(one(params, tokens, labels)))[0]
  one_s = time.perf_counter() - t
  t = time.perf_counter()
  separate, ok = {}, True
  for L in grid:
    fn = evaluation.make_correctness_fn(trainer.model.apply, num_seqs)  # a new program per length
    c = np.asarray(fn(params, tokens[:, :L], labels[:, :L]))
    ok &= bool(np.isclose(c[:, -1].mean(), per_pos[L - 1]))
  sep_s = time.perf_counter() - t
  return {"one_pass_s": round(one_s, 3), "per_length_s": round(sep_s, 3),
          "speedup": round(sep_s / one_s, 2), "matches_per_length": ok,
          "note": "wall time including compilation, 64 sequences, cpu-preset negmamba"}


def bench_sampling(reps):
  """Sampling a training batch of A5 against one training step of the smallest model."""
  from tasks import registry
  task = registry.get_task("A5")
  sample = jax.jit(task.sample, static_argnums=(1, 2))
  _, sample_s, _ = timed(lambda k: sample(k, _BATCH.value, _LENGTH.value), jax.random.PRNGKey(0), reps=reps)
  _, long_s, _ = timed(lambda k: sample(k, 256, 1000), jax.random.PRNGKey(0), reps=reps)
  cfg = step_config("simple_aussm", "auto").replace(task="A5", d_model=32, d_state=4)
  trainer = train.Trainer(cfg)
  init, chunk = trainer.compiled()
  hp = train.hparams([cfg])
  _, step_s, _ = timed(chunk, init(hp), hp, reps=reps)
  return {"sample_ms": round(sample_s * 1e3, 3), "sample_256x1000_ms": round(long_s * 1e3, 3),
          "smallest_step_ms": round(step_s * 1e3, 3),
          "sampling_over_step": round(sample_s / step_s, 4),
          "note": f"A5, batch {_BATCH.value} x {_LENGTH.value}; step: simple_aussm d_model 32 d_state 4"}


def main(argv):
  del argv
  names = [n for n in _MODELS.value.split(",") if n]
  unknown = [n for n in names if n not in models.LAYERS]
  if unknown:
    raise common.UsageError(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(models.LAYERS)}")
  out = {"backend": jax.default_backend(), "device": jax.devices()[0].device_kind,
         "jax": jax.__version__, "reps": _REPS.value,
         "sizes": {"batch": _BATCH.value, "length": _LENGTH.value, "d_model": _D_MODEL.value,
                   "d_state": _D_STATE.value}}
  benches = {"step": lambda: bench_step(names, _REPS.value), "scan": lambda: bench_scan(_REPS.value),
             "train_many": lambda: bench_train_many(_REPS.value),
             "eval": lambda: bench_eval(_REPS.value), "sampling": lambda: bench_sampling(_REPS.value)}
  for section in _SECTIONS.value:
    if section not in benches:
      raise common.UsageError(f"unknown section {section!r}; choose from {', '.join(benches)}")
    out[section] = benches[section]()
    if not _JSON.value:
      print(section, json.dumps(out[section], indent=1), flush=True)
  if _JSON.value:
    common.print_json(out)
  if _OUT.value:  # sections run now replace the same sections of an earlier file
    os.makedirs(_OUT.value, exist_ok=True)
    path = os.path.join(_OUT.value, f"{out['backend']}.json")
    try:
      with open(path) as f:
        merged = json.load(f)
    except (OSError, ValueError):
      merged = {}
    merged.update(out)
    with open(path, "w") as f:
      json.dump(merged, f, indent=1)


if __name__ == "__main__":
  common.run_main(main)
