"""Training at the curriculum's length: which lengths compile, which one a chunk of steps runs
at, and that a shorter one computes the same loss and gradients."""
import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ssm_bench import length_buckets
from ssm_bench import registry
from ssm_bench import train
from ssm_bench.config import ConfigError, TrainConfig


def test_buckets_are_powers_of_two_up_to_half_the_cap_then_the_cap():
  cfg = TrainConfig()
  assert length_buckets.buckets(cfg, "cpu") == (8, 16, 60)
  assert length_buckets.buckets(cfg.replace(train_length=64), "cpu") == (8, 16, 32, 64)
  assert length_buckets.buckets(cfg.replace(train_length=8), "cpu") == (8,)
  assert length_buckets.buckets(cfg, "gpu") == (60,), "auto is off on an accelerator"
  assert length_buckets.buckets(cfg.replace(length_buckets="on"), "gpu") == (8, 16, 60)
  assert length_buckets.buckets(cfg.replace(length_buckets="off"), "cpu") == (60,)
  assert length_buckets.buckets(cfg.replace(curriculum_start=60), "cpu") == (60,), (
      "without a curriculum every step trains at the cap")
  with pytest.raises(ConfigError, match="choose one of auto, on, off"):
    TrainConfig(length_buckets="yes")


def _longest_in_chunk(cfg, length, streak, step, steps):
  """The curriculum rule of Trainer.step walked by hand, every check passing: the longest
  length any of the chunk's steps trains at."""
  longest = length
  for i in range(step, step + steps):
    longest = max(longest, length)
    if (i + 1) % cfg.curriculum_every == 0:
      streak += 1
    if streak >= cfg.curriculum_patience:
      length, streak = min(2 * length, cfg.train_length), 0
  return longest


@pytest.mark.parametrize("every,patience,steps", [(10, 5, 50), (10, 5, 100), (5, 1, 5),
                                                  (3, 2, 10), (7, 3, 20)])
def test_reachable_is_the_longest_length_a_chunk_can_train_at(every, patience, steps):
  """Exact, not only an upper bound: a bound that counted the chunk's last check (whose
  doubling no step of the chunk sees) or missed the streak carried in would differ here."""
  cfg = TrainConfig(curriculum_every=every, curriculum_patience=patience, train_length=60)
  for length, streak, step in itertools.product((2, 4, 16, 32, 60), range(patience),
                                                range(0, 3 * every)):
    want = _longest_in_chunk(cfg, length, streak, step, steps)
    got = length_buckets.reachable(cfg, [length], [streak], [step], [-1], steps)[0]
    assert got == want, (f"length {length}, streak {streak}, step {step}: the chunk trains at "
                         f"up to {want}, reachable says {got}")
  frozen = length_buckets.reachable(cfg, [4], [patience - 1], [every - 1], [3], steps)[0]
  assert frozen == 4, "a diverged run's length is frozen"


def test_a_group_trains_at_the_shortest_bucket_that_holds_all_its_runs():
  lengths = (8, 16, 60)
  assert length_buckets.pick(lengths, np.array([2, 4])) == 8
  assert length_buckets.pick(lengths, np.array([2, 9])) == 16, "the longest run decides"
  assert length_buckets.pick(lengths, np.array([16, 32])) == 60


def test_a_chunk_spans_at_most_one_doubling_when_buckets_are_on():
  cfg = TrainConfig()  # log_every 100, a check every 10 steps, patience 5
  assert length_buckets.chunk_steps(cfg, (8, 16, 60)) == 50
  assert length_buckets.chunk_steps(cfg, (60,)) == 100, "one bucket: the whole log chunk"
  assert length_buckets.chunk_steps(cfg.replace(curriculum_patience=3), (8, 60)) == 25


SMALL = TrainConfig(task="S3", d_model=8, d_state=4, batch_size=4, train_length=16,
                    conv_kernel=0, layer_kwargs="")


@pytest.mark.parametrize("model", registry.names())
def test_a_shorter_bucket_computes_the_full_lengths_loss_and_gradients(model):
  """Every built-in layer is causal: at current length 8, a step on the first 8 tokens has the
  loss, accuracy and gradients of the step on all 16 (to float32 rounding). A layer that looked
  ahead, or a step that cut tokens and labels apart, fails here."""
  cfg = SMALL.replace(model=model)
  trainer = train.Trainer(cfg)
  hp = jax.tree.map(lambda x: x[0], train.hparams([cfg]))
  state = {**trainer.init(hp), "length": jnp.int32(8)}

  @functools.partial(jax.jit, static_argnums=0)
  def grad(length):
    tokens, labels, mask = trainer.batch(state, hp, length)
    return jax.value_and_grad(trainer.loss_fn, has_aux=True)(state["params"], tokens, labels, mask)
  ((l_short, a_short), g_short), ((l_full, a_full), g_full) = grad(8), grad(16)
  np.testing.assert_allclose(l_short, l_full, rtol=1e-5, err_msg=f"{model}: loss differs")
  assert a_short == a_full, f"{model}: accuracy {a_short} at the bucket, {a_full} in full"
  for (path, b), a in zip(jax.tree_util.tree_flatten_with_path(g_full)[0],
                          jax.tree.leaves(g_short)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6,
                               err_msg=f"{model}: gradient {jax.tree_util.keystr(path)}")


def test_a_log_interval_of_several_chunks_reports_their_mean_and_the_last_length():
  """A logged row over chunks at growing buckets: loss and accuracy averaged over the chunks,
  curriculum length and learning rate as they stand at its end, not at its start."""
  parts = [{"loss": np.array([2.0]), "acc": np.array([0.5]), "length": np.array([8]),
            "lr": np.array([1e-3])},
           {"loss": np.array([1.0]), "acc": np.array([0.9]), "length": np.array([16]),
            "lr": np.array([5e-4])}]
  m = train.merge_metrics(parts)
  np.testing.assert_allclose([m["loss"][0], m["acc"][0]], [1.5, 0.7])
  assert (int(m["length"][0]), float(m["lr"][0])) == (16, 5e-4), (
      f"the row reports length {m['length']} and lr {m['lr']}, not the last chunk's")
