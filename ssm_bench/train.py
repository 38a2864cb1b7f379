"""Pure training: state init, one step, a compiled chunk of steps, and the vmapped form.

Learning rate, schedule and seed are traced (`hparams`), so one compiled program trains many
runs that share shapes. The curriculum length is traced too: the loss is masked beyond the
current length, so growing the curriculum never recompiles; a group trains at the shortest of a
few compiled sequence lengths that holds its runs' lengths (`length_buckets`; on a CPU by
default), or always at `train_length`.
"""
from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import optax

from ssm_bench import analytic
from ssm_bench import length_buckets
from ssm_bench import models
from ssm_bench import plugins
from ssm_bench.config import (NUMERICS_FIELDS, SCHEDULES, ConfigError, ModelConfig, TrainConfig,
                              arch_fields)
from tasks import registry

RESTART_CYCLES = 4  # cosine_restarts: this many equal cosine cycles over the run


def construction(cfg: TrainConfig):
  """(ModelConfig, params) of the task's construction: from cfg.model's layers where the task
  has one (S3: simple_aussm or aussm), else the task's default construction."""
  plugins.load(cfg.plugins)  # a plugin layer may bring the construction
  model = cfg.model if cfg.model in analytic.construction_models(cfg.task) else ""
  return analytic.build(cfg.task, cfg.d_model, cfg.d_state, model)


def analytic_config(cfg: TrainConfig) -> TrainConfig:
  """`cfg` with the analytic construction's architecture (model, depth, widths, norm, ...), so
  that a run started from the construction records the network it really trains."""
  mcfg, _ = construction(cfg)
  layers = mcfg.layers
  model = layers[0] if len(set(layers)) == 1 else ",".join(layers)
  return cfg.replace(model=model, depth=len(layers),
                     **{**arch_fields(mcfg), **_numerics(cfg)})


_ARCH = {f.name for f in dataclasses.fields(ModelConfig)}


def _numerics(cfg) -> dict:
  """The network's numerics fields of cfg (length_buckets is the training loop's)."""
  return {f: getattr(cfg, f) for f in NUMERICS_FIELDS if f in _ARCH}


def model_config(cfg: TrainConfig) -> ModelConfig:
  """The network a run trains. With init_from_analytic, the construction's architecture, which
  the config must already describe (see analytic_config). Loads the config's plugins first."""
  plugins.load(cfg.plugins)
  if cfg.init_from_analytic >= 0:
    mcfg, _ = construction(cfg)
    want = analytic_config(cfg)
    diff = [f"{f}={getattr(want, f)!r}" for f in dataclasses.asdict(want)
            if getattr(want, f) != getattr(cfg, f)]
    if diff:
      raise ConfigError(f"with init_from_analytic the network is the {cfg.task} construction; "
                        f"its config must say so: {', '.join(diff)}")
    return dataclasses.replace(mcfg, **_numerics(cfg))
  task = registry.get_task(cfg.task)
  if cfg.pad_order:
    if task.group is None or task.main_stream != "uniform" or task.num_classes > cfg.pad_order:
      raise ConfigError(f"pad_order={cfg.pad_order} needs a group task (uniform stream) of order "
                        f"<= {cfg.pad_order}; {cfg.task} is not one (--config.pad_order=0 "
                        "trains it unpadded, in a protocol of its own)")
    size = {"vocab_size": cfg.pad_order, "num_classes": cfg.pad_order}
  else:
    size = {"vocab_size": task.vocab_size, "num_classes": task.num_classes}
  return ModelConfig(layers=models.parse_layers(cfg.model, cfg.depth), **size, **arch_fields(cfg))


def padded_table(cfg: TrainConfig):
  """The run's Cayley table padded to pad_order (rows and columns past the order unused)."""
  import numpy as np
  t = registry.get_task(cfg.task).table
  out = np.zeros((cfg.pad_order, cfg.pad_order), np.int32)
  out[:t.shape[0], :t.shape[1]] = t
  return out


def hparams(cfgs) -> dict:
  """The traced hyperparameters of a list of configs, stacked along axis 0."""
  hp = {"lr": jnp.array([c.lr for c in cfgs], jnp.float32),
        "schedule": jnp.array([SCHEDULES.index(c.schedule) for c in cfgs], jnp.int32),
        "seed": jnp.array([c.seed for c in cfgs], jnp.int32)}
  if cfgs[0].pad_order:  # each run's task as data: its order and its padded Cayley table
    hp["order"] = jnp.array([registry.get_task(c.task).num_classes for c in cfgs], jnp.int32)
    hp["table"] = jnp.stack([jnp.asarray(padded_table(c)) for c in cfgs])
  return hp


def mask_classes(logits, order):
  """Logits of the classes a task does not have (index >= order) pushed out of every softmax
  and argmax: each run's loss and accuracy are exactly its own task's."""
  return jnp.where(jnp.arange(logits.shape[-1]) < order, logits, -1e9)


def lr_factor(step, schedule, total: int, warmup: int = 0):
  """constant: 1; cosine: one half-cosine to 0; cosine_restarts: RESTART_CYCLES of them;
  all times a linear warm-up over the first `warmup` steps."""
  frac = step.astype(jnp.float32) / total
  cycle = jnp.mod(frac * RESTART_CYCLES, 1.0)
  shape = jnp.select([schedule == 0, schedule == 1],
                     [1.0, 0.5 * (1 + jnp.cos(math.pi * frac))],
                     0.5 * (1 + jnp.cos(math.pi * cycle)))
  return shape * jnp.minimum(1.0, (step + 1).astype(jnp.float32) / max(warmup, 1))


class Trainer:
  """The pure functions of one shape group: everything static lives here, nothing mutable."""

  def __init__(self, cfg: TrainConfig):
    self.cfg = cfg
    self.task = registry.get_task(cfg.task)
    self.mcfg = model_config(cfg)
    self.model = models.StateTracker(self.mcfg)
    self.optimizer = optax.chain(optax.clip_by_global_norm(cfg.grad_clip), optax.scale_by_adam(),
                                 optax.add_decayed_weights(cfg.weight_decay))
    self.traces = 0  # how many times the training chunk was traced (= compiled)
    # Built once, concretely: the construction sets weights with NumPy, which cannot run on tracers.
    self.analytic_params = (construction(cfg)[1]
                            if cfg.init_from_analytic >= 0 else None)

  def init(self, hp) -> dict:
    """Train state for one run (hp holds scalars)."""
    init_key = jax.random.fold_in(jax.random.PRNGKey(hp["seed"]), 0)
    dummy = jnp.zeros((1, self.cfg.train_length), jnp.int32)
    if self.cfg.init_from_analytic >= 0:
      params = analytic.perturb(self.analytic_params, self.cfg.init_from_analytic, init_key)
    else:
      params = self.model.init(init_key, dummy)
    return {"params": params, "opt": self.optimizer.init(params), "step": jnp.int32(0),
            "length": jnp.int32(min(self.cfg.curriculum_start, self.cfg.train_length)),
            "streak": jnp.int32(0), "diverged_at": jnp.int32(-1)}

  def loss_fn(self, params, tokens, labels, mask, order=None):
    logits = self.model.apply(params, tokens)
    if order is not None:
      logits = mask_classes(logits, order)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    n = jnp.maximum(mask.sum(), 1)
    acc = ((logits.argmax(-1) == labels) * mask).sum() / n
    return (ce * mask).sum() / n, acc

  def batch(self, state, hp, length: int | None = None):
    """A step's (tokens, labels, mask) on sequences of `length` (default train_length) tokens:
    drawn at train_length by the run's seed and step, then cut, so every length sees the same
    data; the mask keeps the curriculum's current length."""
    cfg, T = self.cfg, length or self.cfg.train_length
    data_key = jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(hp["seed"]), 1), state["step"])
    if cfg.pad_order:  # the run's own group, as data (uniform stream, prefix products)
      tokens = jax.random.randint(data_key, (cfg.batch_size, cfg.train_length), 0, hp["order"],
                                  dtype=jnp.int32)
      labels = jax.lax.associative_scan(lambda a, b: hp["table"][a, b], tokens, axis=1)
    else:
      tokens, labels = self.task.sample(data_key, cfg.batch_size, cfg.train_length)
    tokens, labels = tokens[:, :T], labels[:, :T]
    return tokens, labels, jnp.broadcast_to(jnp.arange(T) < state["length"], tokens.shape)

  def step(self, state, hp, length: int | None = None):
    """One training step on sequences of `length` tokens (`batch`)."""
    cfg = self.cfg
    tokens, labels, mask = self.batch(state, hp, length)
    (loss, acc), grads = jax.value_and_grad(self.loss_fn, has_aux=True)(
        state["params"], tokens, labels, mask, hp.get("order"))
    lr = hp["lr"] * lr_factor(state["step"], hp["schedule"], cfg.steps, cfg.warmup_steps)
    with jax.named_scope("optimizer"):  # so a profile can tell the update apart
      updates, opt = self.optimizer.update(grads, state["opt"], state["params"])
      params = optax.apply_updates(state["params"], jax.tree.map(lambda u: -lr * u, updates))
    # A non-finite loss freezes the run where it was and records the step: it is reported as
    # diverged, never silently dropped, and the other runs of its vmapped group go on.
    ok = jnp.isfinite(loss) & (state["diverged_at"] < 0)
    keep = lambda new, old: jax.tree.map(lambda n, o: jnp.where(ok, n, o), new, old)
    check = (state["step"] + 1) % cfg.curriculum_every == 0
    streak = jnp.where(check, jnp.where(acc >= cfg.curriculum_threshold, state["streak"] + 1, 0),
                       state["streak"])
    grow = streak >= cfg.curriculum_patience
    new = {"params": keep(params, state["params"]), "opt": keep(opt, state["opt"]),
           "step": state["step"] + 1,
           "length": jnp.where(grow & ok, jnp.minimum(2 * state["length"], cfg.train_length),
                               state["length"]),
           "streak": jnp.where(grow, 0, streak),
           "diverged_at": jnp.where(jnp.isfinite(loss) | (state["diverged_at"] >= 0),
                                    state["diverged_at"], state["step"])}
    return new, {"loss": loss, "acc": acc, "length": state["length"], "lr": lr}

  def chunk(self, state, hp, steps: int | None = None, length: int | None = None):
    """`steps` (default log_every) steps at `length` under lax.scan; metrics are averaged over
    the chunk."""
    self.traces += 1
    state, m = jax.lax.scan(lambda s, _: self.step(s, hp, length), state, None,
                            length=steps or self.cfg.log_every)
    return state, {"loss": m["loss"].mean(), "acc": m["acc"].mean(), "length": m["length"][-1],
                   "lr": m["lr"][-1]}

  def compiled(self, donate: bool = True, steps: int | None = None, length: int | None = None):
    """(init_many, chunk_many): vmapped over runs, jitted once per shape group (chunk_many once
    per `steps` and `length` of `chunk`).

    With `donate`, chunk_many reuses the input state's device buffers for its output (the caller
    must not touch the state it passed in again): one copy of params and Adam moments, not two.

    init_many initialises the runs one after another (`lax.map`, bit-identical to `vmap`): a
    vmapped orthogonal init is a batched LAPACK QR, which jaxlib 0.10's CPU kernels split over
    XLA's intra-op pool and then block on; two such QRs at once (rnn depth 2) hold both threads
    of a 2-core pool and wait forever (results/pilots.md, "Incidents"). Unbatched, a QR runs inline.
    """
    if not hasattr(self, "_compiled"):  # one init for every chunk program
      self._compiled = {"init": jax.jit(lambda hp: jax.lax.map(self.init, hp))}
    key = (donate, steps or self.cfg.log_every, length or self.cfg.train_length)
    if key not in self._compiled:
      chunk = lambda state, hp: self.chunk(state, hp, *key[1:])
      self._compiled[key] = jax.jit(_over_runs(chunk), donate_argnums=(0,) if donate else ())
    return self._compiled["init"], self._compiled[key]

  def lengths(self) -> tuple[int, ...]:
    """The sequence lengths this group's training compiles at (`length_buckets.buckets`)."""
    return length_buckets.buckets(self.cfg, jax.default_backend())

  def advance(self, state, hp):
    """log_every steps of a group (state donated), as chunks at the shortest bucket that holds
    every length its runs can reach in them (a host read of their curriculum state before
    each); returns (state, the log_every steps' metrics)."""
    lengths = self.lengths()
    if len(lengths) == 1:
      return self.compiled()[1](state, hp)
    steps = length_buckets.chunk_steps(self.cfg, lengths)
    parts = []
    for _ in range(self.cfg.log_every // steps):
      now = jax.device_get({k: state[k] for k in ("length", "streak", "step", "diverged_at")})
      reach = length_buckets.reachable(self.cfg, now["length"], now["streak"], now["step"],
                                       now["diverged_at"], steps)
      length = length_buckets.pick(lengths, reach)
      state, m = self.compiled(steps=steps, length=length)[1](state, hp)
      parts.append(m)
    return state, merge_metrics(parts)


def merge_metrics(parts: list) -> dict:
  """The metrics of consecutive equal chunks as one chunk's: loss and accuracy averaged, length
  and learning rate the last chunk's."""
  mean = lambda key: sum(m[key] for m in parts) / len(parts)
  return {"loss": mean("loss"), "acc": mean("acc"), "length": parts[-1]["length"],
          "lr": parts[-1]["lr"]}


def _over_runs(fn):
  """fn vmapped over the leading (run) axis of its arguments, except for a group of one run,
  which runs fn itself: on a CPU the vmapped program of one run took 1.1-3.8x the time per step
  of the same run unbatched (results/bench/README.md, "Interleaved timings, and a group of one")."""
  def many(*args):
    if jax.tree.leaves(args)[0].shape[0] != 1:
      return jax.vmap(fn)(*args)
    out = fn(*jax.tree.map(lambda x: x[0], args))
    return jax.tree.map(lambda x: x[None], out)
  return many
