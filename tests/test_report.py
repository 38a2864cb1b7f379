"""The list of tables (ssm_bench/report.py): every finished run is read by some table, the runs
no table is for are listed in other_runs.md, and a sweep prints every table its runs fill."""
import copy
import json
import os

import pytest

from ssm_bench import report
from ssm_bench import tables
from test_tables import fake_summary


def _runs():
  """One finished run per kind of task and protocol the suite trains."""
  illusion = fake_summary("A5", "mamba", 1, 0)
  illusion["config"].update(train_length=10, curriculum_start=10)
  illusion["seq_acc_at_train_length"] = 0.95
  near = fake_summary("S3", "aussm", 2, 1000)
  near["config"].update(preset="near_solution", init_from_analytic=0.01)
  from_construction = fake_summary("S3", "aussm", 2, 1000)  # outside the near-solution sweep
  from_construction["config"].update(init_from_analytic=0.0)
  profile = fake_summary("C3", "negmamba", 1, 0)
  profile["config"].update(preset="profile_cpu")
  offset = fake_summary("offset", "s4d", 1, 0)
  offset["event_acc"] = {"onset": 0.5}
  return {"table2": fake_summary("C2", "negmamba", 1, 1000),
          "hybrid": fake_summary("S3", "negmamba,aussm", 2, 1000),
          "parity": fake_summary("parity", "negmamba", 1, 1000),
          "language": fake_summary("lang-tomita3", "rnn", 1, 1000), "illusion": illusion,
          "near": near, "profile": profile, "offset": offset,
          "generators": fake_summary("C2-gen", "negmamba", 1, 1000),
          "modcount": fake_summary("modcount3", "s4d", 1, 1000),
          "flipflop": fake_summary("flipflop", "mamba", 1, 1000),
          "from_construction": from_construction}


def test_every_finished_run_is_in_a_table_and_other_runs_holds_those_no_table_reads():
  runs = _runs()
  built = report.build(list(runs.values()))
  read_by = {name: [t.key for t in report.TABLES if t.takes(s)] + ["table2"] * tables.takes(s)
             for name, s in runs.items()}
  unread = sorted(name for name, keys in read_by.items() if not keys)
  assert unread == ["flipflop", "from_construction", "generators", "modcount"], read_by
  other = built[report.OTHER]
  rows = {key: e for by_task in other.values() for key, e in by_task.items()}
  assert set(rows) == {("flipflop", "mamba x1"), ("S3", "aussm x2"), ("C2-gen", "negmamba x1"),
                       ("modcount3", "s4d x1")}, f"other_runs holds {sorted(rows)}"
  # a group's stream gets its stack's theory (over generators too), other tasks none
  assert (rows[("C2-gen", "negmamba x1")]["theory"], rows[("modcount3", "s4d x1")]["theory"]) == (
      True, "-"), rows
  assert all(data for t, data in built.items() if t is not report.OTHER), (
      "a table read none of the runs made for it: "
      + ", ".join(t.key for t, data in built.items() if not data))


def test_a_sweep_prints_every_table_its_own_runs_fill(tmp_path):
  runs = _runs()
  for name in ("language", "illusion", "generators", "table2"):
    s = runs[name]
    os.makedirs(tmp_path / s["run"])
    json.dump(s, open(tmp_path / s["run"] / "summary.json", "w"))
  text = report.sweep_table(str(tmp_path))
  for title in ("# Formal languages", "# Minimal depth", "# Runs in no other table",
                "| C2 | 1000 (1/1) |", "All 4 runs finished (status done).",
                "### Protocol: paper\n\n| language |", "| tomita3 | next set |",
                "| mamba | 1 |"):
    assert title in text, f"{title!r} not printed at the sweep's end:\n{text}"


def test_other_runs_count_a_run_at_100_as_one_that_extrapolates():
  """The same line as Table 2's: max_len >= 100 extrapolates, so a best of exactly 100 is a
  success shown as 100, not a cross."""
  from ssm_bench import other_runs
  from test_tables import fake_summary
  runs = [fake_summary("C2-gen", "mamba", 1, 100), fake_summary("C2-gen", "mamba", 1, 80, seed=1)]
  (entry,) = other_runs.other_data(runs)["paper"].values()
  assert (entry["max_len"], entry["successes"], entry["runs"]) == (100, 1, 2), entry
  assert "| C2-gen | mamba x1 | 100 (1/2) | ✗ |" in other_runs.markdown(other_runs.other_data(runs))


_MADE_FOR = {"languages": "language", "illusion": "illusion", "parity": "parity",
             "near_solution": "near", "offset": "offset"}


@pytest.mark.parametrize("table", [t for t in report.TABLES if t.axes is not None],
                         ids=lambda t: t.key)
def test_runs_under_another_protocol_are_a_table_of_their_own(table):
  """A stack's runs at another step budget are never pooled into its row: the table is one table
  per protocol, each headed by its name (as Table 2)."""
  run = _runs()[_MADE_FOR[table.key]]
  longer = copy.deepcopy(run)
  longer["config"]["steps"] = run["config"]["steps"] * 2
  built = report.build([run, longer])[table]
  assert len(built) == 2, f"{table.key}: runs of two step budgets pooled into {list(built)}"
  assert all(built.values()), f"{table.key}: a protocol's table is empty: {built}"
  text = table.render(built)
  assert text.count("### Protocol: ") == 2 and f"steps={run['config']['steps'] * 2}" in text, text


@pytest.mark.parametrize("table,axis,value", [
    ("illusion", "train_length", 20), ("parity", "eval_length", 500),
    ("near_solution", "init_from_analytic", 0.1), ("languages", "layer_kwargs", '{"x":1}'),
    ("offset", "seed", 3)])
def test_runs_that_differ_on_a_tables_own_axis_stay_in_one_protocol(table, axis, value):
  (t,) = [t for t in report.TABLES if t.key == table]
  run = _runs()[_MADE_FOR[table]]
  other = copy.deepcopy(run)
  other["config"][axis] = value
  if axis == "train_length":
    other["config"]["curriculum_start"] = value
  built = report.build([run, other])[t]
  assert len(built) == 1, f"{table}: its own axis {axis} split it into protocols {list(built)}"
