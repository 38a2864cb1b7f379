"""Training runs end to end: files, resume, divergence, vmapped groups, TensorBoard."""
import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

import conftest
from ssm_bench import evaluation
from ssm_bench import runs
from ssm_bench import train
from ssm_bench.config import TrainConfig

pytestmark = pytest.mark.heavy  # a minute or more in all: scheduled first (conftest.py)

TINY = TrainConfig(task="C2", model="mamba", d_model=8, d_state=2, batch_size=8, steps=40,
                   log_every=10, checkpoint_every=20, eval_seqs=8, eval_chunk=8, train_length=16,
                   conv_kernel=0)


def final_params(run_dir, step):
  import orbax.checkpoint as ocp
  mgr = ocp.CheckpointManager(os.path.abspath(os.path.join(run_dir, "checkpoints")))
  out = mgr.restore(step)
  mgr.close()
  return out["params"]


def test_tiny_run_writes_every_file_and_a_valid_summary(tmp_path):
  d = str(tmp_path / "run")
  [summary] = runs.train_group([TINY], [d])
  files = os.listdir(d)
  assert {"config.json", "metrics.jsonl", "summary.json", "checkpoints"} <= set(files)
  assert any(f.startswith("events.out.tfevents") for f in files)
  assert runs.validate_summary(summary) == [], runs.validate_summary(summary)
  assert summary["status"] == "done" and summary["steps"] == 40
  assert summary["compile_count"] == 2, "expected one training and one evaluation compile"
  from ssm_bench import scan
  assert summary["scan_auto"] == scan.default_method(), "the summary does not say what auto ran"
  lines = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]
  assert [l["step"] for l in lines] == [10, 20, 30, 40]
  assert json.load(open(os.path.join(d, "config.json"))) == summary["config"]


def test_the_same_group_trained_twice_gives_the_same_numbers(tmp_path):
  """Determinism: the same configs and seeds, trained again in other directories on this
  machine, give the same summaries and metric lines, bit for bit (times and dates aside)."""
  cfgs = [TINY, TINY.replace(seed=1, lr=3e-3)]
  timing = {"wall_time_s", "train_time_s", "eval_time_s", "finished_at", "wall_s"}
  out = []
  for attempt in ("a", "b"):
    dirs = [str(tmp_path / attempt / str(k)) for k in range(2)]
    summaries = runs.train_group(cfgs, dirs)
    lines = [[{k: v for k, v in json.loads(l).items() if k not in timing}
              for l in open(os.path.join(d, "metrics.jsonl"))] for d in dirs]
    out.append(([{k: v for k, v in s.items() if k not in timing} for s in summaries], lines))
  assert out[0][1] == out[1][1], "the metric lines differ between two trainings of one group"
  for k, (a, b) in enumerate(zip(out[0][0], out[1][0])):
    differ = sorted(key for key in a.keys() | b.keys() if a.get(key) != b.get(key))
    assert not differ, f"run {k}: the summaries differ in {differ}"


def test_finished_run_is_not_retrained(tmp_path):
  d = str(tmp_path / "run")
  runs.train_group([TINY], [d])
  calls = []
  runs.train_group([TINY], [d], on_chunk=calls.append)
  assert calls == [], "a finished run was trained again"


def test_a_run_directory_given_with_a_trailing_slash_is_named_by_its_directory(tmp_path):
  """`--workdir=runs/x/` is the directory runs/x: the summary's run name and its group's
  members are "x", not the empty name after the slash."""
  d = str(tmp_path / "run") + os.sep
  s = runs.train_group([TINY], [d])[0]
  assert (s["run"], s["group_runs"]) == ("run", ["run"]), (s["run"], s["group_runs"])


def test_killed_run_resumes_to_the_same_parameters(tmp_path):
  full, killed = str(tmp_path / "full"), str(tmp_path / "killed")
  runs.train_group([TINY], [full])

  def kill(step):
    if step == 30:  # after the checkpoint at 20, before the one at 40
      raise KeyboardInterrupt
  with pytest.raises(KeyboardInterrupt):
    runs.train_group([TINY], [killed], on_chunk=kill)
  assert runs.read_summary(killed) is None, "a killed run must not look finished"
  resumed_steps, told = [], []
  runs.train_group([TINY], [killed], on_chunk=resumed_steps.append, progress=told.append)
  assert resumed_steps == [30, 40], f"resumed at the wrong step: {resumed_steps}"
  assert told == [20, 30, 40], f"the progress bar was not told the resumed start: {told}"
  for a, b in zip(jax.tree.leaves(final_params(full, 40)), jax.tree.leaves(final_params(killed, 40))):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
  lines = [json.loads(l)["step"] for l in open(os.path.join(killed, "metrics.jsonl"))]
  assert lines == [10, 20, 30, 40], "metric lines were duplicated or lost on resume"
  assert runs.read_summary(full)["acc_curve"] == runs.read_summary(killed)["acc_curve"]
  assert (runs.read_summary(full)["resumed_from_step"], runs.read_summary(killed)[
      "resumed_from_step"]) == (0, 20), "the summary must say from which checkpoint it resumed"


def test_planted_nan_is_recorded_as_diverged(tmp_path, monkeypatch):
  real = train.lr_factor
  monkeypatch.setattr(train, "lr_factor",
                      lambda step, s, n, w=0: jax.numpy.where(step >= 15, jax.numpy.nan, real(step, s, n, w)))
  [summary] = runs.train_group([TINY], [str(tmp_path / "nan")])
  assert summary["status"] == "diverged", summary["status"]
  assert summary["diverged_at"] == 16, "the NaN update at step 15 shows as a NaN loss at step 16"
  assert runs.validate_summary(summary) == []


def test_a_diverged_run_stays_frozen_when_later_losses_are_finite(tmp_path, monkeypatch):
  """One non-finite loss (step 15, with finite weights) makes the run diverged at that step, and
  its weights stay where they were for the rest of training although later batches give finite
  losses: a run that trained on after its divergence would be a result it is not."""
  import jax.numpy as jnp
  batch, loss_fn = train.Trainer.batch, train.Trainer.loss_fn

  def flagged_batch(self, state, hp, length=None):  # labels -1 mark seed 0's batch at step 15
    tokens, labels, mask = batch(self, state, hp, length)
    return tokens, jnp.where((state["step"] == 15) & (hp["seed"] == 0), -1, labels), mask

  def inf_loss(self, params, tokens, labels, mask, order=None):
    loss, acc = loss_fn(self, params, tokens, jnp.maximum(labels, 0), mask, order)
    return loss + jnp.where((labels < 0).any(), jnp.inf, 0.0), acc
  monkeypatch.setattr(train.Trainer, "batch", flagged_batch)
  monkeypatch.setattr(train.Trainer, "loss_fn", inf_loss)
  # with a group mate that goes on (a group whose every run diverged stops training)
  d = str(tmp_path / "inf")
  summary, mate = runs.train_group([TINY, TINY.replace(seed=1)], [d, str(tmp_path / "mate")])
  assert mate["status"] == "done", mate["status"]
  assert (summary["status"], summary["diverged_at"]) == ("diverged", 15), (
      summary["status"], summary.get("diverged_at"))
  for a, b in zip(jax.tree.leaves(final_params(d, 20)), jax.tree.leaves(final_params(d, 40))):
    assert np.all(np.isfinite(a)), "the weights before the infinite loss were not kept"
    np.testing.assert_array_equal(a, b, err_msg="the diverged run trained on after step 15")


def test_the_update_is_adamw_after_clipping_by_global_norm():
  """SPEC: AdamW (decoupled weight decay) with gradients clipped by their global norm: three
  steps against optax's adamw behind clip_by_global_norm, with a weight decay and a clip large
  and small enough to show (0.5 and 0.01; the defaults are 0.01 and 1.0)."""
  import optax
  cfg = TINY.replace(lr=1e-2, weight_decay=0.5, grad_clip=0.01, schedule="constant")
  trainer = train.Trainer(cfg)
  hp = jax.tree.map(lambda v: v[0], train.hparams([cfg]))
  state = trainer.init(hp)
  ref = optax.chain(optax.clip_by_global_norm(0.01), optax.adamw(1e-2, weight_decay=0.5))
  params, opt = state["params"], ref.init(state["params"])

  @jax.jit  # compiled, as the step is: op by op it took 8 s
  def ref_step(params, opt, state):
    tokens, labels, mask = trainer.batch(state, hp)
    grads = jax.grad(lambda p: trainer.loss_fn(p, tokens, labels, mask)[0])(params)
    updates, opt = ref.update(grads, opt, params)
    return optax.apply_updates(params, updates), opt
  step = jax.jit(trainer.step)
  for _ in range(3):
    params, opt = ref_step(params, opt, state)
    state, _ = step(state, hp)
  for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(state["params"])):
    np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-7,
                               err_msg="the training step's update is not clipped AdamW")


@pytest.mark.parametrize("padded", [False, True], ids=["task", "padded"])
def test_each_step_draws_a_fresh_batch_that_its_seed_and_step_fix(padded):
  """A run's batch at a step is a function of (seed, step): the same again at that step, another
  at the next step (a run does not fit one batch for its whole budget), another under another
  seed; padded runs (their task as data) too."""
  cfg = MIXED[1] if padded else TINY
  trainer = train.Trainer(cfg)
  hps = [jax.tree.map(lambda v: v[0], train.hparams([cfg.replace(seed=s)])) for s in (0, 1)]
  state = trainer.init(hps[0])
  tokens = lambda hp, step: np.asarray(trainer.batch({**state, "step": np.int32(step)}, hp)[0])
  np.testing.assert_array_equal(tokens(hps[0], 3), tokens(hps[0], 3))
  assert not np.array_equal(tokens(hps[0], 3), tokens(hps[0], 4)), "steps 3 and 4 drew one batch"
  assert not np.array_equal(tokens(hps[0], 3), tokens(hps[1], 3)), "seeds 0 and 1 drew one batch"


def _group_and_alone(cfgs, chunks=3):
  """The runs trained together for `chunks` chunks, and each trained alone: (group state and
  last metrics, [(state, metrics) alone]), from one compiled program per group size."""
  trainer = train.Trainer(cfgs[0])
  init, chunk = trainer.compiled(donate=False)

  def trained(hp):
    state = init(hp)
    for _ in range(chunks):
      state, m = chunk(state, hp)
    return state, m
  return trainer, trained(train.hparams(cfgs)), [trained(train.hparams([c])) for c in cfgs]


def test_train_many_equals_separate_runs():
  cfgs = [TINY.replace(lr=lr) for lr in (1e-3, 3e-3, 1e-2)]
  trainer, (state, _), alone = _group_and_alone(cfgs)
  for k, (cfg, (s1, _)) in enumerate(zip(cfgs, alone)):
    for a, b in zip(jax.tree.leaves(s1["params"]), jax.tree.leaves(state["params"])):
      np.testing.assert_allclose(a[0], b[k], rtol=1e-5, atol=1e-6,
                                 err_msg=f"lr={cfg.lr}: vmapped run differs from a separate run")
  assert trainer.traces == 2, "one trace for K=3 and one for K=1"


def test_each_run_of_a_group_saves_and_is_evaluated_with_its_own_parameters(tmp_path, monkeypatch):
  """train_group slices the group's state per run for its checkpoint and its evaluation: the
  second run's checkpoint equals the same run trained alone, and the parameters its evaluation
  sees are its checkpoint's (a slice that gave every run run 0's parameters passes the in-memory
  group tests above, since tiny runs all score at chance)."""
  seen = {}
  real = runs.declaration.check
  monkeypatch.setattr(runs.declaration, "check", lambda model, params, tokens: seen.setdefault(
      len(seen), jax.device_get(params)) and real(model, params, tokens))
  cfgs = [TINY, TINY.replace(seed=1, lr=3e-3)]
  dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
  runs.train_group(cfgs, dirs)
  runs.train_group(cfgs[1:], [str(tmp_path / "b_alone")])
  alone = jax.tree.leaves(final_params(tmp_path / "b_alone", 40))
  for k, d in enumerate(dirs):
    saved = jax.tree.leaves(final_params(d, 40))
    evaluated = jax.tree.leaves(seen[k]["params"])
    assert len(saved) == len(evaluated) > 0, "the checkpoint and the evaluation hold other trees"
    assert all(np.array_equal(a, b) for a, b in zip(saved, evaluated)), (
        f"run {k} was evaluated with other parameters than it saved")
  for a, b in zip(alone, jax.tree.leaves(final_params(dirs[1], 40))):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6,
                               err_msg="run 1's checkpoint holds another run's parameters")


# A curriculum that doubles at every check (threshold 0, patience 1): 2, 4, 8, 16, 32 at steps
# 5, 10, 15, 20; on a CPU it compiles at lengths 8, 16 and 32 (`length_buckets`).
GROWING = TINY.replace(train_length=32, curriculum_threshold=0.0, curriculum_patience=1,
                       curriculum_every=5, steps=30, log_every=10, checkpoint_every=30)


def test_a_group_trains_at_the_curriculums_length_and_ends_where_the_cap_would(tmp_path,
                                                                               monkeypatch):
  """Each chunk of steps runs at the shortest compiled length that holds the lengths its steps
  train at, and a group so trained ends where the same group trained at the cap ends (float32
  rounding apart): a chunk run at a length its curriculum outgrew would drop positions from the
  loss and end elsewhere."""
  ran = []
  real = train.Trainer.compiled
  monkeypatch.setattr(train.Trainer, "compiled", lambda self, donate=True, steps=None, length=None: (
      ran.append((steps, length)) or real(self, donate, steps, length)))
  cfgs = [GROWING, GROWING.replace(seed=1, lr=3e-3)]
  bucketed = runs.train_group(cfgs, [str(tmp_path / "a0"), str(tmp_path / "a1")])
  chunks = [r for r in ran if r[1] is not None]
  assert chunks == [(5, 8), (5, 8), (5, 8), (5, 16), (5, 32), (5, 32)], (
      f"(steps, length) of each chunk: {chunks}")
  assert bucketed[0]["train_lengths"] == [8, 16, 32]
  assert bucketed[0]["compile_count"] == 4, "a training compile per length, one evaluation"
  capped = runs.train_group([c.replace(length_buckets="off") for c in cfgs],
                            [str(tmp_path / "b0"), str(tmp_path / "b1")])
  assert capped[0]["train_lengths"] == [32] and capped[0]["final_train_length"] == 32
  for k in range(2):
    for a, b in zip(jax.tree.leaves(final_params(tmp_path / f"a{k}", 30)),
                    jax.tree.leaves(final_params(tmp_path / f"b{k}", 30))):
      np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5,
                                 err_msg=f"run {k} trained at the buckets ends elsewhere")


def test_a_group_of_one_runs_the_unbatched_program():
  """K = 1 must not be a vmapped program of one run (on CPU 1.1-3.8x slower per step): its
  chunk is the plain run's own program, with the same numbers bit for bit."""
  cfg = TINY.replace(model="negmamba")
  trainer = train.Trainer(cfg)
  init, chunk = trainer.compiled(donate=False)
  hp = train.hparams([cfg])
  state = init(hp)
  users = lambda fn, *args: fn.lower(*args).compile(compiler_options=conftest.USERS_COMPILE)(*args)
  got, _ = users(chunk, state, hp)  # bit for bit as users compile (conftest.py)
  first = lambda tree: jax.tree.map(lambda x: x[0], tree)
  want, _ = users(jax.jit(trainer.chunk), first(state), first(hp))
  for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(first(got))):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b),
                                  err_msg="a group of one ran another program than a plain run")


_INIT_MANY_LOOP = """
import dataclasses, os, sys
os.sched_setaffinity(0, map(int, sys.argv[1:]))  # before jax sizes its pool from the affinity
import jax
from ssm_bench import train
from ssm_bench.config import TrainConfig
cfg = TrainConfig(task="C2xC4", model="rnn", depth=2, d_model=64, d_state=64, train_length=16)
init_many, _ = train.Trainer(cfg).compiled()
hp = train.hparams([dataclasses.replace(cfg, seed=s) for s in range(4)])
for _ in range(50):
  jax.block_until_ready(init_many(hp))
print("ok")
"""


def test_group_init_of_two_rnn_layers_does_not_deadlock_on_two_cores():
  """Two batched LAPACK QRs at once (a vmapped orthogonal init, rnn depth 2) deadlocked jaxlib
  0.10's 2-thread CPU pool within a few calls; the group init must run them unbatched."""
  cpus = sorted(os.sched_getaffinity(0))[:2]  # the pool is sized from the affinity: 2, as CI
  try:
    out = subprocess.run([sys.executable, "-c", _INIT_MANY_LOOP, *map(str, cpus)],
                         capture_output=True, text=True, timeout=120)
  except subprocess.TimeoutExpired:
    pytest.fail("init_many of a 4-run rnn depth-2 group hung (batched QR deadlock in XLA's pool)")
  assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_group_init_gives_each_run_its_own_init_bit_for_bit():
  cfgs = [TINY.replace(model="rnn", depth=2, seed=s) for s in range(3)]
  trainer = train.Trainer(cfgs[0])
  init_many, _ = trainer.compiled()
  group = init_many(train.hparams(cfgs))
  for k, cfg in enumerate(cfgs):
    alone = jax.jit(trainer.init)(jax.tree.map(lambda x: x[0], train.hparams([cfg])))
    for a, b in zip(jax.tree.leaves(alone), jax.tree.leaves(group)):
      np.testing.assert_array_equal(a, b[k], err_msg=f"seed {cfg.seed}: group init differs")


def test_curriculum_doubles_after_patience_and_caps_at_train_length():
  cfg = TINY.replace(curriculum_threshold=0.0, curriculum_patience=2, curriculum_every=1,
                     steps=20, log_every=1, train_length=12)
  trainer = train.Trainer(cfg)
  init, chunk = trainer.compiled()
  hp = train.hparams([cfg])
  state, lengths = init(hp), []
  for _ in range(10):
    state, m = chunk(state, hp)
    lengths.append(int(m["length"][0]))
  assert lengths == [2, 2, 4, 4, 8, 8, 12, 12, 12, 12], lengths


def test_curriculum_holds_below_threshold():
  cfg = TINY.replace(curriculum_threshold=1.01, steps=20, log_every=10)
  trainer = train.Trainer(cfg)
  init, chunk = trainer.compiled()
  hp = train.hparams([cfg])
  state = init(hp)
  state, _ = chunk(state, hp)
  state, _ = chunk(state, hp)
  assert int(state["length"][0]) == 2


def test_schedules():
  # mid-cycle points: restarts fall at 0, 25, 50, 75, where every schedule is 1
  step = jax.numpy.array([0, 10, 25, 40, 60, 99])
  half = lambda f: 0.5 * (1 + np.cos(np.pi * f))
  wants = {0: [1.0] * 6, 1: half(np.array([0, 10, 25, 40, 60, 99]) / 100),
           2: half(np.array([0, 10, 0, 15, 10, 24]) / 25)}
  for s, want in wants.items():
    np.testing.assert_allclose(train.lr_factor(step, jax.numpy.int32(s), 100), want, atol=1e-6,
                               err_msg=f"schedule {s}")
  warm = train.lr_factor(jax.numpy.array([0, 4, 9, 50]), jax.numpy.int32(0), 100, 10)
  np.testing.assert_allclose(warm, [0.1, 0.5, 1.0, 1.0], atol=1e-6)


def test_offset_run_stores_per_position_event_accuracy_an_example_and_eval_length(tmp_path):
  """One run checks both: a next-token task's extra results and an eval_length past 1000."""
  cfg = TINY.replace(task="offset", model="s4d", steps=10, checkpoint_every=10, train_length=200,
                     curriculum_start=200, eval_length=1600)
  s = runs.train_group([cfg], [str(tmp_path / "r")])[0]
  assert s["eval"]["length"] == 1600 and s["eval"]["grid"] == [20, 1600]
  assert runs.read_summary(str(tmp_path / "r")) is not None, "a valid summary was rejected"
  assert s["eval_stream"] == "cycles" and set(s["other_streams"]) == {"two_isi", "double_isi"}
  for res in [s, *s["other_streams"].values()]:
    assert list(res["acc_curve"])[-3:] == ["1200", "1400", "1600"], list(res["acc_curve"])[-3:]
    assert len(res["acc_per_position"]) == 1600
    assert set(res["event_acc"]) == {"in_isi", "offset", "onset", "iti"}
    ex = res["example"]
    assert len(ex["tokens"]) == len(ex["p1"]) == 1600 and ex["tokens"][1:] == ex["labels"][:-1]
    assert all(0.0 <= p <= 1.0 for p in ex["p1"])


MIXED = [TINY.replace(task="C2", pad_order=12, lr=1e-3, seed=0, schedule="constant"),
         TINY.replace(task="S3", pad_order=12, lr=3e-3, seed=1, schedule="cosine"),
         TINY.replace(task="A4", pad_order=12, lr=1e-2, seed=2, schedule="cosine_restarts")]


def test_a_mixed_task_group_equals_each_run_alone():
  """Runs that differ in task, seed, learning rate and schedule train in one program (padded
  classes, each run's Cayley table as data) and end where each ends alone: a program that used
  run 0's data key, table or schedule for every run fails here."""
  assert len({c.shape_key() for c in MIXED}) == 1, "tasks up to pad_order share one shape"
  _, (state, m), alone = _group_and_alone(MIXED)
  for k, (cfg, (s1, m1)) in enumerate(zip(MIXED, alone)):
    np.testing.assert_allclose(float(m1["loss"][0]), float(m["loss"][k]), rtol=1e-4,
                               err_msg=f"{cfg.task}: its loss in the group is another run's")
    for a, b in zip(jax.tree.leaves(s1["params"]), jax.tree.leaves(state["params"])):
      np.testing.assert_allclose(a[0], b[k], rtol=1e-4, atol=1e-5,
                                 err_msg=f"{cfg.task}: trained in the group differs from alone")


def test_a_padded_runs_loss_is_the_cross_entropy_among_its_own_classes():
  """A C2 run padded to 12 classes: its loss and accuracy are those of its first 2 logits alone,
  so a padded class (index >= the task's order) takes no probability mass."""
  import optax
  cfg = MIXED[0]
  trainer = train.Trainer(cfg)
  hp = jax.tree.map(lambda v: v[0], train.hparams([cfg]))
  state = trainer.init(hp)
  tokens, labels, mask = trainer.batch(state, hp)
  mask = np.ones_like(mask)  # every position, not just the curriculum's first two
  loss, acc = trainer.loss_fn(state["params"], tokens, labels, mask, hp["order"])
  own = trainer.model.apply(state["params"], tokens)[..., :2]
  assert trainer.model.apply(state["params"], tokens).shape[-1] == 12
  np.testing.assert_allclose(
      float(loss), float(optax.softmax_cross_entropy_with_integer_labels(own, labels).mean()),
      rtol=1e-5, err_msg="the padded run's loss is not the cross entropy over its own 2 classes")
  np.testing.assert_allclose(float(acc), float((own.argmax(-1) == labels).mean()), rtol=1e-6,
                             err_msg="the padded run's accuracy counts a class it does not have")


def test_the_curriculum_grows_at_accuracy_equal_to_its_threshold(tmp_path):
  """SPEC: the length doubles after `patience` checks with training accuracy >= the threshold.
  On C1 (one class) accuracy is exactly 1.0, so a threshold of 1.0 is met at every check."""
  cfg = TINY.replace(task="C1", curriculum_threshold=1.0, steps=60, log_every=10,
                     checkpoint_every=60)
  d = str(tmp_path / "run")
  runs.train_group([cfg], [d])
  lengths = [json.loads(l)["length"] for l in open(os.path.join(d, "metrics.jsonl"))]
  # checks at steps 10..50: the fifth (step 50) doubles 2 -> 4; logged lengths are averages
  assert lengths[-1] > 2, f"accuracy 1.0 at threshold 1.0 never grew the curriculum: {lengths}"


def test_a_padded_run_is_evaluated_on_its_own_task_among_its_own_classes(tmp_path, monkeypatch):
  """...by one evaluation program for the group: a class count compiled in as a constant made
  one program per task order (2 and 6 here; Table 2's nine tasks have six)."""
  made, make = [], evaluation.make_correctness_fn
  monkeypatch.setattr(evaluation, "make_correctness_fn",
                      lambda *a, **kw: made.append(make(*a, **kw)) or made[-1])
  seen, program_of = [], runs.evaluation_program  # (classes, largest label) per evaluation

  def recording(trainer, cfg):
    program, extra = program_of(trainer, cfg)
    return (lambda p, tokens, labels, *args: seen.append((int(args[0]), int(labels.max())))
            or program(p, tokens, labels, *args)), extra
  monkeypatch.setattr(runs, "evaluation_program", recording)
  summaries = runs.train_group(MIXED[:2], [str(tmp_path / "a"), str(tmp_path / "b")])
  assert [s["status"] for s in summaries] == ["done", "done"]
  assert [s["config"]["task"] for s in summaries] == ["C2", "S3"]
  assert seen == [(2, 1), (6, 5)], (
      f"(classes, largest label) per run: {seen}; want C2's 2 classes on C2's stream, then "
      "S3's 6 on S3's")
  # chance on C2 is 0.5, on S3 1/6: an untrained C2 run predicting among 12 classes would not
  # reach chance, one among its own 2 does
  assert summaries[0]["acc_curve"]["20"] > 0.2, summaries[0]["acc_curve"]["20"]
  programs = sum(fn._cache_size() for fn in made)
  assert programs == 1, f"the group's evaluation compiled {programs} programs"


def test_summaries_record_the_revision_the_process_started_with(monkeypatch):
  """A commit made while a long sweep runs must not be recorded as the code of its later runs."""
  from ssm_bench import rundir
  started_with = rundir.GIT_REVISION
  moved = subprocess.CompletedProcess([], 0, stdout="f" * 40 + "\n")
  monkeypatch.setattr(rundir.subprocess, "run", lambda *a, **k: moved)  # HEAD moved on meanwhile
  assert rundir.environment()["git_revision"] == started_with, (
      "the summary records the revision at writing time, not the one the process runs")


def test_summaries_record_the_xla_flags_the_process_ran_with(monkeypatch):
  """A sweep worker's single-threaded CPU sums in another order than a lone run: the summary
  says which, so two runs that differ in the 7th digit can be told apart."""
  from ssm_bench import rundir
  monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
  assert rundir.environment()["xla_flags"] == "--xla_cpu_multi_thread_eigen=false"


def test_summaries_record_what_auto_ran_for_their_own_layers(monkeypatch):
  """Configs keep "auto"; which method that was, for the network's own layers on this backend,
  is in every summary (`models.scan_auto`, traced, so it follows the scans' choice): a diagonal
  layer reports the backend's AUTO, the delta rule its HOUSEHOLDER_AUTO, a layer without a scan
  nothing, a hybrid both in layer order."""
  import jax
  from ssm_bench import models
  from ssm_bench import scan
  from ssm_bench.config import ModelConfig
  of = lambda *layers: models.scan_auto(ModelConfig(layers=layers, d_model=8, d_state=2))
  diagonal = scan.AUTO[jax.default_backend()]
  assert of("mamba") == diagonal and of("deltanet") == scan.HOUSEHOLDER_AUTO, (
      of("mamba"), of("deltanet"))
  assert of("rnn") is None and of("mamba", "deltanet") == f"{diagonal}, sequential"
  monkeypatch.setitem(scan.AUTO, jax.default_backend(), "associative")
  monkeypatch.setattr(scan, "HOUSEHOLDER_AUTO", "associative")
  assert (of("mamba"), of("deltanet")) == ("associative", "associative"), (
      "scan_auto does not follow the scans' choice")
