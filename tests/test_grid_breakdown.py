"""Where in a protocol's grid the successes come from (`ssm_bench/grid_breakdown.py`)."""
from ssm_bench import grid_breakdown
from test_tables import fake_summary


def _run(task, model, max_len, lr, reached=True, status="done"):
  s = fake_summary(task, model, 1, max_len, status=status, lr=lr)
  s["final_train_length"] = s["config"]["train_length"] if reached else 4
  return s


def test_counts_per_learning_rate_only_where_the_theory_allows_and_the_stack_varies():
  runs = [_run("C2", "negmamba", 1000, 1e-3),
          _run("C2", "negmamba", 60, 1e-2),  # reached the training length, did not extrapolate
          _run("C2", "negmamba", 0, 1e-2, reached=False),
          _run("C2", "negmamba", 0, 1e-2, status="diverged"),  # a run that reached nothing
          _run("S3", "negmamba", 1000, 1e-2),  # the theory rules S3 out for negmamba: not pooled
          _run("C2", "rnn", 1000, 1e-3)]  # one learning rate for this stack: no row
  data = grid_breakdown.breakdown(runs)
  assert data == {"paper": {"lr": {("negmamba", 1): {1e-3: [1, 1, 1], 1e-2: [3, 1, 0]}}}}, data
  text = grid_breakdown.markdown(data)
  assert "### Protocol: paper, by lr" in text and "| negmamba | 1 | 1/1/1 | 0/1/3 |" in text, text
  assert grid_breakdown.as_json(data) == {"paper": {"lr": {"negmamba depth 1": {
      "0.001": {"runs": 1, "reached": 1, "extrapolated": 1},
      "0.01": {"runs": 3, "reached": 1, "extrapolated": 0}}}}}


def test_a_protocol_whose_stacks_each_take_one_value_has_no_breakdown():
  runs = [_run("C2", "negmamba", 1000, 1e-3), _run("C2", "rnn", 1000, 1e-2)]  # sized apart
  assert grid_breakdown.breakdown(runs) == {}


def test_a_stack_the_theory_says_nothing_of_is_not_pooled():
  """A plugin layer not loaded here (its class unknown: no verdict) has no group the theory
  allows, so its runs give no row, as a stack the theory rules out gives none."""
  runs = [_run("C2", "mystery", 1000, 1e-3), _run("C2", "mystery", 0, 1e-2)]
  assert grid_breakdown.breakdown(runs) == {}, grid_breakdown.breakdown(runs)


def test_rows_list_the_papers_models_in_its_order_before_the_others():
  """As Table 2's columns: the paper's models in the paper's order, then other layers by name
  (deltanet sorts before negmamba by name, and comes after it here)."""
  runs = [_run("C2", m, 1000, lr) for m in ("deltanet", "negmamba") for lr in (1e-3, 1e-2)]
  rows = list(grid_breakdown.breakdown(runs)["paper"]["lr"])
  assert rows == [("negmamba", 1), ("deltanet", 1)], rows
