"""Samplers: labels equal a NumPy fold, seeds are deterministic, everything runs under jit."""
import functools

import jax
import numpy as np
import pytest

from tasks import counter_languages
from tasks import languages
from tasks import registry
from tasks import streams

TASKS = ["C2", "C6", "C60", "C2xC4", "C2xC30", "S3", "A4", "A5", "Q8", "D4", "A4xC5", "S3-gen",
         "A5-gen", "parity", "modcount5", "flipflop"]
NEXT_TOKEN = ["offset"]  # labels are the next token: no fold to compare with


@functools.lru_cache(maxsize=None)
def jitted(name):
  return jax.jit(registry.get_task(name).sample, static_argnums=(1, 2, 3))


@pytest.mark.parametrize("name", TASKS)
def test_labels_equal_numpy_fold(name):
  task = registry.get_task(name)
  tokens, labels = jitted(name)(jax.random.PRNGKey(3), 8, 200, None)
  expected = streams.prefix_products_numpy(task.table, np.asarray(tokens))
  if task.label_map is not None:
    expected = task.label_map[expected]
  np.testing.assert_array_equal(np.asarray(labels), expected, err_msg=f"{name}: scan != fold")
  assert tokens.dtype == np.int32 and labels.dtype == np.int32
  assert tokens.min() >= 0 and tokens.max() < task.vocab_size
  assert labels.min() >= 0 and labels.max() < task.num_classes


@pytest.mark.parametrize("name", TASKS + NEXT_TOKEN)
def test_same_seed_same_batch_different_seed_differs(name):
  a = jitted(name)(jax.random.PRNGKey(7), 4, 64, None)
  b = jitted(name)(jax.random.PRNGKey(7), 4, 64, None)
  c = jitted(name)(jax.random.PRNGKey(8), 4, 64, None)
  np.testing.assert_array_equal(a[0], b[0])
  np.testing.assert_array_equal(a[1], b[1])
  if name != "modcount5":  # the all-ones stream has no randomness by design
    assert not np.array_equal(a[0], c[0]), f"{name}: seeds 7 and 8 gave the same tokens"


def _every_kind_of_task():
  """Task names of every kind: every language (DFA, stream variant, counter; next-symbol sets
  and, where offered, membership), the fixed tasks, groups and their generating sets."""
  names = TASKS + NEXT_TOKEN + [f"lang-{n}" for n in registry.language_names()]
  for n in registry.language_names():
    try:
      names.append(registry.get_task(f"lang-{n}-member").name)
    except registry.TaskError:  # refused: membership decided by the last symbol
      pass
  return names


@pytest.mark.parametrize("name", _every_kind_of_task())
def test_every_tasks_tokens_and_labels_fit_its_vocabulary_and_classes(name):
  """A label past num_classes is silently dropped by the one-hot loss (and a token past
  vocab_size embeds as zeros): the sizes a task declares must hold what its sampler draws."""
  task = registry.get_task(name)
  tokens, labels = jitted(name)(jax.random.PRNGKey(5), 16, 300, None)
  tokens, labels = np.asarray(tokens), np.asarray(labels)
  assert 0 <= tokens.min() and tokens.max() < task.vocab_size, (
      f"{name}: tokens {tokens.min()}..{tokens.max()} outside vocab_size {task.vocab_size}")
  assert 0 <= labels.min() and labels.max() < task.num_classes, (
      f"{name}: labels {labels.min()}..{labels.max()} outside num_classes {task.num_classes}")


@pytest.mark.parametrize("name", ["C6", "A4", "parity", "modcount5", "flipflop"])
def test_a_tasks_classes_are_exactly_the_labels_it_draws(name):
  """Where every class occurs in a long batch (a group's elements, a count, flip-flop's two
  bits), num_classes is the number of labels: a spare class would change chance level and loss."""
  task = registry.get_task(name)
  labels = np.asarray(jitted(name)(jax.random.PRNGKey(5), 16, 300, None)[1])
  assert sorted(set(labels.ravel().tolist())) == list(range(task.num_classes)), (
      f"{name}: num_classes {task.num_classes}, labels drawn {sorted(set(labels.ravel()))}")


def test_sampling_is_traced_once_under_jit():
  traces = []
  task = registry.get_task("S3")

  @functools.partial(jax.jit, static_argnums=(1, 2))
  def f(key, b, t):
    traces.append(1)
    return task.sample(key, b, t)

  for seed in range(3):
    f(jax.random.PRNGKey(seed), 2, 10)
  assert len(traces) == 1, "sampling retraced for a new key"


def test_labels_are_left_to_right_products():
  task = registry.get_task("S3")
  tokens, labels = jitted("S3")(jax.random.PRNGKey(0), 64, 3, None)
  t = task.table
  tokens = np.asarray(tokens)
  np.testing.assert_array_equal(labels[:, 2], t[t[tokens[:, 0], tokens[:, 1]], tokens[:, 2]])
  # non-abelian: the right-to-left product differs somewhere
  assert np.any(np.asarray(labels[:, 1]) != t[tokens[:, 1], tokens[:, 0]])


def test_generating_stream_uses_only_generators():
  task = registry.get_task("A5-gen")
  tokens, _ = jitted("A5-gen")(jax.random.PRNGKey(0), 16, 100, None)
  assert set(np.unique(tokens)) <= set(task.group.generating_set.tolist())


def test_generating_set_task_is_scored_on_its_own_stream():
  from ssm_bench import evaluation
  task = registry.get_task("S3-gen")
  tokens, labels = evaluation.eval_set(task, 8, 50, task.main_stream)
  assert set(np.unique(tokens)) <= set(task.group.generating_set.tolist()), (
      "S3-gen is scored on tokens whose embeddings it never trained")
  np.testing.assert_array_equal(labels, task.labels(tokens))


def test_adversarial_parity_is_blocks_of_zeros_then_odd_ones():
  tokens, labels = jitted("parity")(jax.random.PRNGKey(1), 32, 100, "adversarial")
  for row in np.asarray(tokens):
    runs = np.split(row, np.nonzero(np.diff(row))[0] + 1)
    inner_ones = [len(r) for r in runs[1:-1] if r[0] == 1]
    assert all(n % 2 == 1 for n in inner_ones), f"even run of ones in {row}"
    assert len(set(inner_ones)) <= 1 and len(set(len(r) for r in runs[1:-1] if r[0] == 0)) <= 1


def test_adversarial_parity_starts_anywhere_in_its_period():
  """Each sequence starts at a random phase of its (0^k 1^m) period, so the stream is not
  always led by a full block of zeros: some rows open with ones, and the opening zeros vary."""
  tokens, _ = jitted("parity")(jax.random.PRNGKey(1), 64, 100, "adversarial")
  tokens = np.asarray(tokens)
  assert 0 < tokens[:, 0].sum() < 64, f"first tokens all {tokens[0, 0]}: the phase is fixed"
  # a row opening with zeros opens with a whole block (k of them, as its next block) or part of one
  whole = [row for row in tokens if row[0] == 0 and _runs(row)[0][1] == _runs(row)[2][1]]
  assert len(whole) < (tokens[:, 0] == 0).sum(), "every row opens with a whole block of zeros"


def test_flipflop_labels_read_the_last_written_bit():
  """Token 1 writes 0, token 2 writes 1, token 0 keeps the bit; before any write the bit is 0."""
  task = registry.get_task("flipflop")
  tokens = np.array([[0, 2, 0, 1, 0, 2, 2, 1]], np.int32)
  np.testing.assert_array_equal(task.labels(tokens), [[0, 1, 1, 0, 0, 1, 1, 0]],
                                err_msg="flip-flop labels are not the last written bit")


def test_offset_cycles_fill_a_long_evaluation_sequence():
  """At the evaluation length (1000) the cycles go on to the end: the sequence never closes
  with a gap longer than the training ITIs, even where every ITI is drawn short."""
  tokens, _ = jitted("offset")(jax.random.PRNGKey(0), 64, 1000, None)
  for row in np.asarray(tokens):
    last = _runs(row)[-1]
    assert last[0] == 1 or last[1] <= 40, f"the sequence ends with {last[1]} zeros"


def test_modcount_counts():
  tokens, labels = jitted("modcount5")(jax.random.PRNGKey(0), 2, 12, None)
  np.testing.assert_array_equal(labels[0], (np.arange(1, 13)) % 5)


@pytest.mark.parametrize("name", ["banana", "modcount1", "S3-gen-gen", ""])
def test_unknown_task_names_the_choices(name):
  with pytest.raises(registry.TaskError, match="tasks: "):
    registry.get_task(name)


@pytest.mark.parametrize("name", ["S9", "S9-gen"])
def test_a_group_too_large_is_refused_as_too_large_not_unknown(name):
  with pytest.raises(registry.TaskError, match="too large .limit 5040") as e:
    registry.get_task(name)
  assert "unknown" not in str(e.value), str(e.value)


def test_an_unknown_language_lists_every_language_name():
  """The DFA languages, their stream variants and the counter languages, all accepted names."""
  with pytest.raises(registry.TaskError) as e:
    registry.get_task("lang-banana")
  listed = str(e.value).split("choose from ", 1)[-1].split(", ")
  names = [*languages.LANGUAGES, *languages.VARIANTS, *counter_languages.LANGUAGES]
  assert sorted(listed) == sorted(names), f"listed {listed}, accepted {names}"


def _runs(row):
  """[(value, length)] of the maximal constant runs of a 0/1 row."""
  cuts = np.nonzero(np.diff(row))[0] + 1
  return [(int(r[0]), len(r)) for r in np.split(row, cuts)]


def test_offset_cycles_are_isi_of_10_after_itis_of_20_to_40_and_labels_are_the_next_token():
  task = registry.get_task("offset")
  tokens, labels = jitted("offset")(jax.random.PRNGKey(0), 32, 200, None)
  tokens, labels = np.asarray(tokens), np.asarray(labels)
  np.testing.assert_array_equal(tokens[:, 1:], labels[:, :-1], err_msg="label != next token")
  for row in tokens:
    runs = _runs(row)
    assert runs[0][0] == 0 and 20 <= runs[0][1] <= 40, f"does not start with an ITI: {runs[:2]}"
    inner = runs[1:-1]
    assert all(n == 10 for v, n in inner if v == 1), f"ISI not of length 10: {runs}"
    assert all(20 <= n <= 40 for v, n in inner if v == 0), f"ITI out of [20, 40]: {runs}"
  assert task.next_token and task.main_stream == "cycles"
  itis = {n for row in tokens for v, n in _runs(row)[1:-1] if v == 0}
  assert {20, 40} <= itis, f"both ends of the ITI range are drawn (both included): {sorted(itis)}"


def test_flipflop_writes_a_fifth_of_its_tokens_both_bits_alike():
  """p_ignore = 0.8: 1 (write 0) and 2 (write 1) each about a tenth of the tokens, 0 the rest;
  64,000 tokens put each fraction within 0.01 of its value (the binomial's sd is 0.0016)."""
  tokens, _ = jitted("flipflop")(jax.random.PRNGKey(3), 64, 1000, None)
  counts = np.bincount(np.asarray(tokens).ravel(), minlength=3) / 64000
  np.testing.assert_allclose(counts, [0.8, 0.1, 0.1], atol=0.01,
                             err_msg="flip-flop's ignore / write-0 / write-1 frequencies")


def test_offset_generalisation_streams():
  two, _ = jitted("offset")(jax.random.PRNGKey(1), 16, 200, "two_isi")
  for row in np.asarray(two):
    runs = _runs(row)
    ones = [n for v, n in runs if v == 1]
    assert ones == [10, 10], f"two_isi must hold exactly two ISIs: {runs}"
    assert 60 <= runs[2][1] <= 100, f"the gap between them is not longer than trained: {runs}"
  double, _ = jitted("offset")(jax.random.PRNGKey(2), 16, 200, "double_isi")
  for row in np.asarray(double):
    runs = _runs(row)
    assert runs[1] == (1, 20), f"double_isi must start with two ISIs back to back: {runs}"


def test_offset_events_mark_the_four_kinds_of_position():
  task = registry.get_task("offset")
  tokens = np.array([[0, 0, 1, 1, 0]])
  labels = np.array([[0, 1, 1, 0, 0]])
  ev = {k: np.asarray(v).astype(int).tolist() for k, v in task.events(tokens, labels).items()}
  assert ev == {"in_isi": [[0, 0, 1, 0, 0]], "offset": [[0, 0, 0, 1, 0]],
                "onset": [[0, 1, 0, 0, 0]], "iti": [[1, 0, 0, 0, 1]]}
