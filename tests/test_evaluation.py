"""The one number: max_len on hand-made curves, and the one-pass curves themselves."""
import numpy as np

from ssm_bench import evaluation


def curve(values):
  return {str(20 * (i + 1)): v for i, v in enumerate(values)}


def test_max_len_all_pass_is_the_last_grid_point():
  assert evaluation.max_len(curve([1.0] * 50)) == 1000


def test_max_len_stops_at_a_dip_even_if_it_recovers():
  values = [1.0] * 10 + [0.5] + [1.0] * 39
  assert evaluation.max_len(curve(values)) == 200


def test_max_len_all_fail_is_zero():
  assert evaluation.max_len(curve([0.5] * 50)) == 0


def test_max_len_threshold_is_strict():
  assert evaluation.max_len(curve([0.95, 0.9, 1.0])) == 20


def test_max_len_ignores_key_order():
  c = curve([1.0] * 5 + [0.1])
  assert evaluation.max_len(dict(reversed(list(c.items())))) == 100


def test_curves_from_correctness():
  correct = np.array([[1, 1, 0, 1], [1, 0, 1, 1]], bool)
  per_pos, seq = evaluation.curves(correct)
  np.testing.assert_allclose(per_pos, [1.0, 0.5, 0.5, 1.0])
  np.testing.assert_allclose(seq, [1.0, 0.5, 0.0, 0.0])


def test_grid_is_20_to_1000():
  assert evaluation.GRID[0] == 20 and evaluation.GRID[-1] == 1000 and len(evaluation.GRID) == 50
  assert list(evaluation.on_grid(np.ones(1000))) == [str(L) for L in evaluation.GRID]


def test_grid_past_1000_steps_by_200_to_the_evaluation_length():
  g = evaluation.grid(10000)
  assert g[:50] == evaluation.GRID and g[50:53] == (1200, 1400, 1600) and g[-1] == 10000
  assert len(g) == 95, f"{len(g)} grid points"
  assert evaluation.grid(100) == (20, 40, 60, 80, 100)
  curve = evaluation.on_grid(np.ones(10000))
  assert list(curve)[-1] == "10000" and evaluation.max_len(curve) == 10000


def test_a_windowed_task_is_scored_through_its_window():
  """scored() hands on_grid the task's window: (aa)*'s labels alternate, and a model right at
  even positions only must score 0.5 there, not the 1.0 of the one position per grid length."""
  from tasks import registry
  task = registry.get_task("lang-aa_star")
  assert task.acc_window > 1
  correct = np.tile([False, True], (4, 500))  # right at positions 2, 4, ... (1-based)
  s = evaluation.scored(task, correct)
  assert set(s["acc_curve"].values()) == {0.5}, "the window was not applied"
  s1 = evaluation.scored(registry.get_task("C2"), correct)
  assert s1["acc_curve"]["1000"] == 1.0  # a window of 1: the position itself


def test_an_event_with_no_positions_has_no_accuracy():
  """A stream without one kind of position (offset's events) says None there, not 0.0: a table
  would read 0.0 as a model that failed at it."""
  correct = np.array([[1, 0, 1], [1, 1, 0]], bool)
  masks = {"some": np.array([[1, 1, 0], [0, 0, 0]], bool), "none": np.zeros((2, 3), bool)}
  assert evaluation.event_accuracy(correct, masks) == {"some": 0.5, "none": None}


def test_a_constructions_check_names_its_first_wrong_position_from_one():
  """launch.analytic's numbers: whole-sequence accuracy, accuracy at the last position, and the
  first position (counted from 1) where any sequence is wrong."""
  correct = np.array([[1, 1, 0, 1], [1, 1, 1, 1], [1, 1, 1, 0]], bool)
  got = evaluation.at_length(correct)
  assert got == {"accuracy": 1 / 3, "acc_at_length": 2 / 3, "first_error": 3}, got
  assert evaluation.at_length(np.ones((2, 5), bool))["first_error"] is None


def test_an_example_output_is_the_probability_of_class_one_on_the_first_sequence():
  """The offset figures draw p(next token is 1) against the signal, from the first sequence."""
  import jax.numpy as jnp
  logits = jnp.log(jnp.array([[[0.8, 0.2], [0.3, 0.7]], [[0.5, 0.5], [0.5, 0.5]]]))
  tokens, labels = np.array([[0, 1], [1, 1]]), np.array([[1, 0], [0, 0]])
  ex = evaluation.example_output(lambda params, t: logits[:t.shape[0]], None, tokens, labels)
  assert ex == {"tokens": [0, 1], "labels": [1, 0], "p1": [0.2, 0.7]}, ex
