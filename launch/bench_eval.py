"""The bench's eval and sampling sections: one-pass evaluation against one program per length,
and sampling a batch against the cheapest training step."""
from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from launch.timing import timed
from ssm_bench import evaluation
from ssm_bench import train
from ssm_bench.config import PRESETS, TrainConfig
from tasks import registry


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
  ok = True
  for L in grid:
    fn = evaluation.make_correctness_fn(trainer.model.apply, num_seqs)  # a new program per length
    c = np.asarray(fn(params, tokens[:, :L], labels[:, :L]))
    ok &= bool(np.isclose(c[:, -1].mean(), per_pos[L - 1]))
  sep_s = time.perf_counter() - t
  return {"one_pass_s": round(one_s, 3), "per_length_s": round(sep_s, 3),
          "speedup": round(sep_s / one_s, 2), "matches_per_length": ok,
          "note": "wall time including compilation, 64 sequences, cpu-preset negmamba"}


def bench_sampling(reps, sizes: dict, step_config):
  """Sampling a training batch of A5 against one training step of the smallest model (the
  bench's cell `sizes` and its `step_config(model, method)`)."""
  task = registry.get_task("A5")
  sample = jax.jit(task.sample, static_argnums=(1, 2))
  z = sizes
  _, sample_s, _, _ = timed(jax.jit(lambda k: sample(k, z["batch"], z["length"])),
                           jax.random.PRNGKey(0), reps=reps)
  _, long_s, _, _ = timed(jax.jit(lambda k: sample(k, 256, 1000)), jax.random.PRNGKey(0), reps=reps)
  cfg = step_config("simple_aussm", "auto").replace(task="A5", d_model=32, d_state=4)
  trainer = train.Trainer(cfg)
  init, chunk = trainer.compiled(donate=False)
  hp = train.hparams([cfg])
  _, step_s, _, _ = timed(chunk, init(hp), hp, reps=reps)
  return {"sample_ms": round(sample_s * 1e3, 3), "sample_256x1000_ms": round(long_s * 1e3, 3),
          "smallest_step_ms": round(step_s * 1e3, 3),
          "sampling_over_step": round(sample_s / step_s, 4),
          "note": f"A5, batch {z['batch']} x {z['length']}; step: simple_aussm d_model 32 "
                  "d_state 4"}
