"""The neighbouring papers' tables read the right numbers out of stored summaries."""
import os

from ssm_bench import neighbours
from ssm_bench import tables
from test_tables import fake_summary


def test_illusion_table_takes_the_minimal_depth_per_length():
  runs_ = []
  for depth, acc in ((1, 0.5), (2, 0.95), (3, 0.99)):
    s = fake_summary("A5", "mamba", depth, 0)
    s["config"].update(train_length=10, curriculum_start=10)
    s["acc_at_train_length"] = acc
    runs_.append(s)
  s = fake_summary("A5", "mamba", 4, 0)
  s["config"].update(train_length=20, curriculum_start=20)
  s["acc_at_train_length"] = 0.2
  runs_.append(s)
  late = fake_summary("A5", "mamba", 1, 0, seed=1)  # a weaker run read last: best stays 0.99
  late["config"].update(train_length=10, curriculum_start=10)
  late["acc_at_train_length"] = 0.3
  curriculum = fake_summary("A5", "mamba", 1, 1000)  # Table 2's protocol: not a fixed length
  curriculum["acc_at_train_length"] = 1.0
  assert not neighbours.takes_illusion(curriculum)
  data = neighbours.illusion_data(runs_ + [late, curriculum])
  assert data == {"A5": {"mamba": {"10": {"depth": 2, "tried": 3, "best": 0.99},
                                   "20": {"depth": None, "tried": 4, "best": 0.2}}}}
  runs_[1]["seq_acc_at_train_length"] = 0.6  # every position right in only 60% of sequences
  data = neighbours.illusion_data(runs_)
  assert data["A5"]["mamba"]["10"]["depth"] == 3, "per-position accuracy used, not sequence"
  table = neighbours.illusion_markdown(data)
  assert "| mamba | 3 | > 4 (0.20) |" in table, table


def _parity(model, depth, train_acc, uniform, adversarial, length=10000):
  s = fake_summary("parity", model, depth, 0)
  s["config"].update(eval_length=length, train_length=8, curriculum_start=8)
  s["final_train_acc"] = train_acc
  s["acc_curve"] = {"20": 1.0, str(length): uniform}
  s["other_streams"] = {"adversarial": {"acc_curve": {"20": 1.0, str(length): adversarial}}}
  return s


def test_parity_table_gives_train_accuracy_and_accuracy_at_the_evaluation_length():
  # 0.9 on the adversarial stream is not solved: solved means above SOLVED
  runs_ = [_parity("rnn", 1, 1.0, 1.0, 1.0), _parity("rnn", 1, 1.0, 0.99, 0.9),
           _parity("s4d,mamba", 2, 0.99, 0.51, 0.49)]
  data = neighbours.parity_data(runs_)
  assert data[("rnn x1", 10000)] == {"runs": 2, "diverged": 0, "train_acc": [1.0, 1.0],
                                     "uniform": [1.0, 0.99], "adversarial": [1.0, 0.9]}
  table = neighbours.parity_markdown(data)
  assert "| rnn x1 | 2 | 1.000 | 0.995 (2/2) | 0.950 (1/2) | 10000 |" in table, table
  assert "| s4d,mamba | 1 | 0.990 | 0.510 (0/1) | 0.490 (0/1) | 10000 |" in table, table


def test_parity_table_gives_the_median_train_accuracy_and_counts_a_stack_that_only_diverged():
  runs_ = [_parity("negmamba", 1, acc, 1.0, 1.0) for acc in (0.6, 1.0, 0.8)]
  for seed in (0, 1):
    gone = _parity("mamba", 1, 0.0, 0.0, 0.0)
    gone["config"]["seed"], gone["status"] = seed, "diverged"
    runs_.append(gone)
  table = neighbours.parity_markdown(neighbours.parity_data(runs_))
  assert "| negmamba x1 | 3 | 0.800 | 1.000 (3/3) | 1.000 (3/3) | 10000 |" in table, table
  assert "| mamba x1 | 2 | · | · (0/2) | · (0/2) | 10000 |" in table, (
      f"a stack whose runs all diverged must show them as runs that solved nothing:\n{table}")


def test_near_solution_table_counts_runs_per_noise_and_the_default_init_apart():
  runs_ = []
  for noise, max_len in ((0.0, 1000), (0.0, 1000), (0.1, 300), (0.1, 60), (-1.0, 0)):
    s = fake_summary("S3", "aussm", 2, max_len)
    s["config"].update(preset=neighbours.NEAR_SOLUTION, init_from_analytic=noise)
    runs_.append(s)
  other = fake_summary("S3", "aussm", 2, 1000)  # a Table 2 run: not in this table
  data = neighbours.near_solution_data(runs_ + [other])
  assert data == {("S3", "aussm x2", 60): {0.0: [1000, 1000], 0.1: [300, 60], None: [0]}}
  table = neighbours.near_solution_markdown(data)
  assert "| construction + noise 0.1 | 2 | 300 | 180 | 1 | 1 |" in table, table
  assert "| default init | 1 | 0 | 0 | 0 | 0 |" in table, table
  assert "| runs >= 100 | runs >= 240 (4x train) |" in table, "4x the training length of 60"
  assert table.index("noise 0.1") < table.index("default init"), "the baseline is not last"
  assert not tables.is_table2_run(runs_[-1]["config"]), "the baseline leaked into Table 2"
  assert tables.is_table2_run(other["config"])


def test_offset_table_reports_each_stream_and_kind_of_position():
  runs_ = []
  for inside in (1.0, 0.8):
    s = fake_summary("offset", "s4d", 1, 0)
    s["eval_stream"] = "cycles"
    s["acc_per_position"] = [1.0, 0.5]
    s["event_acc"] = {"in_isi": inside, "offset": 0.9, "onset": None, "iti": 1.0}
    s["other_streams"] = {"two_isi": {"acc_per_position": [1.0, 1.0],
                                      "event_acc": {"in_isi": 0.5, "offset": 0.25,
                                                    "onset": 0.0, "iti": 1.0}}}
    runs_.append(s)
  data = neighbours.offset_data(runs_ + [fake_summary("C2", "s4d", 1, 1000)])
  assert list(data) == ["s4d x1"] and list(data["s4d x1"]) == ["cycles", "two_isi"]
  table = neighbours.offset_markdown(data)
  assert "| s4d x1 | cycles | 2 | 0.750 | 0.900 | 0.900 | · | 1.000 |" in table, table
  assert "| s4d x1 | two_isi | 2 | 1.000 | 0.500 | 0.250 | 0.000 | 1.000 |" in table, table
  # a diverged run is a run of every stream, with no accuracy to take a median of
  table = neighbours.offset_markdown(neighbours.offset_data(
      runs_ + [fake_summary("offset", "s4d", 1, 0, status="diverged")]))
  assert "| s4d x1 | cycles | 3 | 0.750 | 0.900 | 0.900 | · | 1.000 |" in table, table
  assert "| s4d x1 | double_isi | 1 | · | · | · | · | · |" in table, table


def test_curve_figures_keep_protocols_apart_and_leave_out_other_experiments(tmp_path):
  from ssm_bench import figures
  paper, cpu = fake_summary("C2", "mamba", 1, 60), fake_summary("C2", "mamba", 1, 1000)
  from ssm_bench.config import PRESETS
  cpu["config"].update(PRESETS["cpu"])  # the cpu protocol: its preset's values
  fixed = fake_summary("A5", "mamba", 1, 0)  # an illusion run: fixed length, not Table 2
  fixed["config"].update(train_length=4, curriculum_start=4)
  rs = tables.RunSet([paper, cpu, fixed], [])
  names = figures.write_curves(rs, str(tmp_path))
  assert names == ["acc_curve_cpu_C2_depth1.png", "acc_curve_paper_C2_depth1.png"], names


def test_illusion_figure_is_written_from_the_table_data(tmp_path):
  from ssm_bench import figures
  data = {"A5": {"mamba": {"2": {"depth": 1, "tried": 1, "best": 0.95},
                           "4": {"depth": None, "tried": 3, "best": 0.1}}}}
  assert figures.write_illusion(data, str(tmp_path)) == ["illusion_depth.png"]
  assert (tmp_path / "illusion_depth.png").stat().st_size > 1000
  assert figures.write_illusion({}, str(tmp_path / "none")) == []


def test_illusion_figures_are_one_per_protocol(tmp_path):
  """Each protocol's minimal depths get a figure of their own, named by the protocol as the
  curves are (its preset, then a hash of the fields that differ from it)."""
  from ssm_bench import figures
  from ssm_bench import report
  runs = []
  for steps in (2000, 4000):
    s = fake_summary("A5", "mamba", 1, 0)
    s["config"].update(train_length=4, curriculum_start=4, steps=steps)
    s["seq_acc_at_train_length"] = 0.95
    runs.append(s)
  (table,) = [t for t in report.TABLES if t.key == "illusion"]
  names = figures.write_illusions(report.build(runs)[table], str(tmp_path))
  assert len(names) == 2 and len(set(names)) == 2, f"two protocols drew {names}"
  assert all(n.startswith("illusion_depth_paper-") for n in names), names
  assert sorted(os.listdir(tmp_path)) == sorted(names)


def test_offset_examples_are_one_figure_per_protocol_and_layer_at_its_kwargs(tmp_path):
  """An offset run's stored example is drawn per (protocol, layer at its kwargs, depth), from
  the first seed; a flip-flop language run's example is not (its table has no figure)."""
  from ssm_bench import figures
  ex = {"tokens": [0, 1, 1, 0], "labels": [1, 1, 0, 0], "p1": [0.1, 0.9, 0.2, 0.1]}

  def run(task="offset", seed=0, **config):
    s = fake_summary(task, "s4d", 1, 0, seed=seed)
    s["config"].update(config)
    s.update(eval_stream="cycles", example=ex, other_streams={"two_isi": {"example": ex}})
    return s
  runs_ = [run(), run(seed=1), run(steps=999), run(layer_kwargs='{"r_min":0.5}'),
           run(task="lang-flipflop_language")]
  names = figures.write_examples(tables.RunSet(runs_, []), str(tmp_path))
  assert len(names) == 3 and len(set(names)) == 3, f"three offset stacks drew {names}"
  assert all(n.startswith("example_offset_paper") for n in names), names
  assert sorted(os.listdir(tmp_path)) == sorted(names)


def test_runs_of_one_layer_at_other_kwargs_are_rows_of_their_own():
  """ids4 and ids4 with row_norm (another layer in effect) are two rows of the parity and the
  illusion tables, and of other runs; a hybrid's name stays its list."""
  from ssm_bench import other_runs
  plain, normed = _parity("ids4", 1, 1.0, 1.0, 1.0), _parity("ids4", 1, 0.6, 0.5, 0.5)
  normed["config"]["layer_kwargs"] = '{"row_norm":true}'
  assert sorted(neighbours.parity_data([plain, normed])) == [
      ("ids4 x1", 10000), ('ids4 {"row_norm":true} x1', 10000)]
  fixed = []
  for kwargs, acc in (("", 0.95), ('{"row_norm":true}', 0.2)):
    s = fake_summary("A5", "ids4", 1, 0)
    s["config"].update(train_length=10, curriculum_start=10, layer_kwargs=kwargs)
    s["acc_at_train_length"] = acc
    fixed.append(s)
  assert sorted(neighbours.illusion_data(fixed)["A5"]) == ["ids4", 'ids4 {"row_norm":true}']
  gen = [fake_summary("C2-gen", "ids4", 1, 1000), fake_summary("C2-gen", "ids4", 1, 0, seed=1)]
  gen[1]["config"]["layer_kwargs"] = '{"row_norm":true}'
  rows = [key for proto in other_runs.other_data(gen).values() for key in proto]
  assert ("C2-gen", 'ids4 {"row_norm":true} x1') in rows and ("C2-gen", "ids4 x1") in rows, rows
  assert neighbours.stack_name({"model": "s4d,mamba", "depth": 2, "layer_kwargs": ""}) == \
      "s4d,mamba"
