"""Tables come only from summaries; bad runs are reported, output is deterministic."""
import json
import os

import pytest

from ssm_bench import evaluation
from ssm_bench import runs
from ssm_bench import tables
from ssm_bench.config import TrainConfig
import launcher


def fake_summary(task, model, depth, max_len, status="done", seed=0, lr=1e-3):
  cfg = TrainConfig(task=task, model=model, depth=depth, seed=seed, lr=lr)
  curve = {str(L): (1.0 if L <= max_len else 0.5) for L in evaluation.GRID}
  return {"schema_version": 1, "run": runs.run_name(cfg), "config": cfg.__dict__.copy(),
          "status": status, "max_len": max_len if status == "done" else 0,
          "acc_curve": curve if status == "done" else None,
          "seq_acc_curve": curve if status == "done" else None, "steps": 100,
          "diverged_at": 42 if status == "diverged" else None, "wall_time_s": 1.0,
          "versions": {}, "backend": "cpu", "device": "cpu"}


def write_runs(root):
  entries = [fake_summary("C2", "negmamba", 1, 1000), fake_summary("C2", "negmamba", 1, 300, seed=1),
             fake_summary("C2", "mamba", 1, 60), fake_summary("S3", "rnn", 1, 1000),
             fake_summary("C2", "mamba", 2, 120), fake_summary("S3", "aussm", 1, 0, status="diverged")]
  for s in entries:
    d = os.path.join(root, s["run"])
    os.makedirs(d)
    json.dump(s, open(os.path.join(d, "summary.json"), "w"))
  os.makedirs(os.path.join(root, "corrupt-run"))
  open(os.path.join(root, "corrupt-run", "summary.json"), "w").write("{not json")
  os.makedirs(os.path.join(root, "incomplete-run"))
  open(os.path.join(root, "incomplete-run", "config.json"), "w").write("{}")


def one_protocol(data):
  assert len(data) == 1, f"expected one protocol, got {list(data)}"
  return next(iter(data.values()))


def test_cells_are_best_over_seeds_and_cross_below_100(tmp_path):
  write_runs(str(tmp_path))
  rs = tables.load(str(tmp_path))
  data = one_protocol(tables.table2_data(rs))
  assert data[1]["rows"]["C2"]["negmamba"]["max_len"] == 1000
  assert tables.cell(data[1]["rows"]["C2"]["mamba"]["max_len"]) == "✘"
  assert data[2]["rows"]["C2"]["mamba"]["max_len"] == 120
  assert data[1]["rows"]["S3"]["rnn"]["max_len"] == 1000
  assert data[1]["rows"]["C2"]["rnn"]["max_len"] is None  # no run: shown as '·'
  assert "| C2 | ✘ (0/1) | 1000 (2/2) | · |" in tables.markdown_table2(tables.table2_data(rs))


def test_bad_runs_are_counted_and_listed(tmp_path):
  write_runs(str(tmp_path))
  rs = tables.load(str(tmp_path))
  reasons = dict(rs.problems)
  assert len(rs.good) == 5 and len(rs.problems) == 3
  assert reasons["corrupt-run"].startswith("corrupt")
  assert reasons["incomplete-run"].startswith("incomplete")
  assert any(r == "diverged at step 42" for r in reasons.values())
  text = tables.problems_markdown(rs)
  assert "corrupt-run" in text and "incomplete-run" in text and "diverged" in text


def test_diverged_runs_are_summed_per_model_not_listed_as_unused(tmp_path):
  """Diverged runs count in their cells (as runs that did not extrapolate): the list under Table
  2 sums them per model and protocol, names them where there are few, and keeps "not used in
  the cells" for the runs no cell reads (152 diverged ids4 profile runs were listed one by one
  as unused)."""
  write_runs(str(tmp_path))  # one diverged aussm run, one corrupt, one incomplete
  for seed in range(4):
    s = fake_summary("C2", "ids4", 1, 0, status="diverged", seed=seed)
    s["diverged_at"] = 100 + seed
    os.makedirs(tmp_path / s["run"])
    json.dump(s, open(tmp_path / s["run"] / "summary.json", "w"))
  text = tables.problems_markdown(tables.load(str(tmp_path)))
  lines = text.splitlines()
  assert lines[0] == ("5 runs done, 5 diverged (a non-finite training loss: each counts in its "
                      "cell as a run that did not extrapolate); 2 not used in the cells:"), text
  assert "- diverged, ids4 (no preset): 4 runs at steps 100-103" in lines, text
  assert any(l.startswith("- diverged, aussm (no preset): 1 run at step 42: `S3-aussm") for l in lines), text
  assert not any("ids4" in l and "`" in l for l in lines), f"diverged runs listed one by one: {text}"


def test_compare_marks_disagreements_with_paper_and_theory(tmp_path):
  write_runs(str(tmp_path))
  paper = {"columns": ["mamba", "negmamba", "simple_aussm", "aussm", "rnn"],
           "depth_1": {"C2": [None, 1000, 160, 1000, 1000], "S3": [None, None, None, None, 1000]},
           "depth_2": {"C2": [None, 1000, 1000, 200, 1000]}}
  full = tables.table2_data(tables.load(str(tmp_path)), paper)
  data = one_protocol(full)
  e = data[2]["rows"]["C2"]["mamba"]  # 120: extrapolates, the paper and the theory say no
  assert e["paper"] is None and e["theory"] is False
  md = tables.markdown_table2(full, compare=True)
  assert "120 (1/1) / ✘ / ✗ **≠paper beats theory one run**" in md
  assert "1000 (2/2) / 1000 / ✓ |" in md
  assert "Agree with the paper on extrapolates (>= 100) or not: 4 of 5 cells" in md
  assert "- C2, mamba, depth 2: ours 120 (1/1), paper ✘, theory ✗" in md, md
  assert md.count("\n- ") == 1, "a cell that agrees was listed as a disagreement"


def run_tables(runs_dir, out):
  return launcher.run(["launch.tables", f"--runs={runs_dir}", f"--out={out}"], timeout=300)


def test_table2_counts_only_its_own_protocol(tmp_path):
  ordinary = fake_summary("S3", "simple_aussm", 2, 60)
  near = fake_summary("S3", "simple_aussm", 2, 1000)  # started from the construction
  near["config"]["init_from_analytic"] = 0.01
  illusion = fake_summary("S3", "simple_aussm", 2, 1000)  # fixed length, no curriculum
  illusion["config"].update(train_length=10, curriculum_start=10)
  hybrid = fake_summary("S3", "s4d,mamba", 2, 1000)
  parity = fake_summary("parity", "negmamba", 1, 1000)
  cpu = fake_summary("S3", "simple_aussm", 2, 1000)
  cpu["config"].update(preset="cpu", d_model=32, steps=3000, lr=0.03)
  rs = tables.RunSet([ordinary, near, illusion, hybrid, parity, cpu], [])
  data = tables.table2_data(rs)
  assert sorted(data) == ["cpu + batch_size=256, conv_kernel=4, "
                          "eval_seqs=512", "paper"], list(data)
  cell = data["paper"][2]["rows"]["S3"]["simple_aussm"]
  assert (cell["max_len"], cell["runs"]) == (60, 1), "a run of another protocol entered the cell"
  assert list(data["paper"][2]["rows"]) == ["S3"] and list(data["paper"]) == [2]
  assert "### Protocol: paper" in tables.markdown_table2(data)


def test_a_hybrid_stack_on_a_group_is_a_column_at_its_depth_beside_its_stacks_theory():
  """A stack's theory applies its layers' classes bottom first: a signed layer below a rotation
  takes S3's sign first and tracks it; the reverse order cannot."""
  rs = tables.RunSet([fake_summary("S3", "negmamba,aussm", 2, 1000),
                      fake_summary("S3", "aussm,negmamba", 2, 0),
                      fake_summary("S3", "simple_aussm", 2, 1000)], [])
  data = one_protocol(tables.table2_data(rs))
  row = data.get(2, {"rows": {"S3": {}}})["rows"]["S3"]
  assert {"negmamba,aussm", "aussm,negmamba"} <= set(row), f"no column for the stacks: {list(row)}"
  assert (row["negmamba,aussm"]["max_len"], row["aussm,negmamba"]["max_len"]) == (1000, 0), row
  md = tables.markdown_table2({"paper": data}, compare=True)
  assert "| group | simple_aussm | aussm,negmamba | negmamba,aussm |" in md, md
  assert ("| S3 | 1000 (1/1) / – / ✓ **one run** | ✘ (0/1) / – / ✗ **one run** | "
          "1000 (1/1) / – / ✓ **one run** |") in md, md


def test_regenerating_twice_gives_identical_files(tmp_path):
  write_runs(str(tmp_path / "runs"))
  a, b = run_tables(tmp_path / "runs", tmp_path / "a"), run_tables(tmp_path / "runs", tmp_path / "b")
  assert a.returncode == 0 and b.returncode == 0, a.stderr
  names = sorted(os.listdir(tmp_path / "a"))
  assert names == sorted(os.listdir(tmp_path / "b")) and "table2.md" in names
  assert any(n.endswith(".png") for n in names)
  for n in names:
    assert open(tmp_path / "a" / n, "rb").read() == open(tmp_path / "b" / n, "rb").read(), n


def test_runs_in_a_sweeps_own_directory_are_named_not_silently_skipped(tmp_path):
  """`--runs=runs` reads the runs directly in runs/; those in runs/smoke (a sweep's default
  workdir) are not mixed in, and a note on stderr says where they are and how many."""
  write_runs(str(tmp_path / "runs" / "smoke"))
  out = run_tables(tmp_path / "runs", tmp_path / "out")
  assert out.returncode == 0, out.stderr[-2000:]
  assert "from 0 runs" in out.stdout, out.stdout
  note = [l for l in out.stderr.splitlines() if l.startswith("note: not read:")]
  assert note and f"{tmp_path / 'runs' / 'smoke'} (8 runs)" in note[0], out.stderr[-2000:]
  assert tables.nested(str(tmp_path / "runs" / "smoke")) == [], "run directories are not sweeps"


def test_a_directory_without_runs_is_said_not_tabled_silently(tmp_path):
  """A mistyped --runs (a directory with no run in it or below it) writes empty tables, and a
  note on stderr says there was nothing to read; the tables say "No runs.", not "All 0 runs
  finished"."""
  (tmp_path / "empty").mkdir()
  out = run_tables(tmp_path / "empty", tmp_path / "out")
  assert out.returncode == 0, out.stderr[-2000:]
  assert f"note: no run directories in {tmp_path / 'empty'}" in out.stderr, out.stderr[-2000:]
  assert "No runs." in (tmp_path / "out" / "table2.md").read_text()
  for name in ("table2.md", "table2_compare.md"):  # not a title over nothing
    assert "No Table 2 runs (" in (tmp_path / "out" / name).read_text(), f"{name} says nothing"


def test_json_format_and_missing_dir(tmp_path):
  from ssm_bench import report
  write_runs(str(tmp_path / "runs"))
  for s in (fake_summary("lang-tomita3", "rnn", 1, 1000), fake_summary("C2-gen", "mamba", 1, 0)):
    os.makedirs(tmp_path / "runs" / s["run"])
    json.dump(s, open(tmp_path / "runs" / s["run"] / "summary.json", "w"))
  out = launcher.run(["launch.tables", f"--runs={tmp_path / 'runs'}",
                      "--format=json"], timeout=300)
  data = json.loads(out.stdout)
  assert data["runs_done"] == 7 and len(data["problems"]) == 3
  missing = [t.key for t in report.TABLES + (report.OTHER,) if t.key not in data]
  assert not missing, f"tables left out of the JSON: {missing}"
  assert data["languages"]["paper"]["tomita3 (next set)"]["cells"]["rnn x1"]["scores"] == [[1000, True]]
  assert list(data["other"]["paper"]) == ["C2-gen mamba x1"], data["other"]
  bad = launcher.run(["launch.tables", "--runs=/nonexistent"], timeout=300)
  assert bad.returncode != 0 and "Traceback" not in bad.stderr


def test_markdown_format_prints_every_table_the_runs_fill(tmp_path):
  for s in (fake_summary("C2", "negmamba", 1, 1000), fake_summary("lang-tomita3", "rnn", 1, 1000)):
    os.makedirs(tmp_path / s["run"])
    json.dump(s, open(tmp_path / s["run"] / "summary.json", "w"))
  out = launcher.run(["launch.tables", f"--runs={tmp_path}", "--format=markdown"], timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  for title in ("# Table 2", "| C2 | 1000 (1/1) |", "# Formal languages", "| tomita3 |"):
    assert title in out.stdout, f"{title!r} not printed:\n{out.stdout}"


def _diverged(cfg: dict) -> dict:
  return {"config": cfg, "status": "diverged", "diverged_at": 5, "max_len": 0, "run": "x"}


def test_neighbour_tables_count_diverged_runs_as_runs_that_did_not_solve():
  """A diverged run must not vanish from a "(k/n)": it is a run that solved nothing."""
  from ssm_bench import neighbours
  from ssm_bench.config import TrainConfig
  import dataclasses
  par = dataclasses.asdict(TrainConfig(task="parity", model="negmamba", eval_length=100))
  done = {"config": par, "status": "done", "final_train_acc": 1.0, "eval_stream": "uniform",
          "acc_curve": {"100": 1.0}, "other_streams": {"adversarial": {"acc_curve": {"100": 1.0}}}}
  md = neighbours.parity_markdown(neighbours.parity_data([done, _diverged(par)]))
  assert "| 2 |" in md and md.count("(1/2)") == 2, md
  ill = dataclasses.asdict(TrainConfig(task="A5", model="mamba", train_length=4,
                                       curriculum_start=4, eval_length=20, depth=2))
  cell = neighbours.illusion_data([_diverged(ill)])["A5"]["mamba"]["4"]
  assert cell == {"depth": None, "tried": 2, "best": 0.0}, cell
  off = dataclasses.asdict(TrainConfig(task="offset", model="s4d", train_length=200,
                                       curriculum_start=200, eval_length=200))
  rows = neighbours.offset_data([_diverged(off)])
  assert rows and all(len(r["all"]) == 1 for r in rows["s4d x1"].values()), rows


def test_a_plugged_in_layer_gets_a_column_in_its_presets_table():
  built_in = fake_summary("C2", "negmamba", 1, 1000)
  mine = fake_summary("C2", "rotation", 1, 1000)
  mine["config"]["plugins"] = "examples.rotation"
  data = tables.table2_data(tables.RunSet([built_in, mine], []))
  assert list(data) == ["paper"], f"the plugged-in layer's runs made a protocol of their own: {list(data)}"
  assert data["paper"][1]["models"] == ["negmamba", "rotation"]


def test_figures_keep_two_protocols_of_one_preset_apart(tmp_path):
  """Runs of the cpu preset at 3000 and at 5000 steps are two protocols: two figures."""
  pytest.importorskip("matplotlib")
  import dataclasses
  from ssm_bench import figures
  from ssm_bench.config import PRESETS, TrainConfig
  curve = {str(L): 1.0 for L in range(20, 1001, 20)}
  made = []
  for steps in (3000, 5000):
    c = dataclasses.asdict(TrainConfig(**{**PRESETS["cpu"], "task": "C2", "steps": steps}))
    made.append({"config": c, "status": "done", "max_len": 1000, "acc_curve": curve})
  names = figures.write_curves(tables.RunSet(made, []), str(tmp_path))
  assert len(names) == 2, f"one figure for two protocols: {names}"


def test_a_curve_figure_draws_each_cells_best_run(tmp_path, monkeypatch):
  """Two seeds of one cell, max_len 100 and 1000: the figure's line is the 1000 run's."""
  pytest.importorskip("matplotlib")
  from ssm_bench import figures
  drawn = []
  monkeypatch.setattr(figures, "_save", lambda fig, plt, out_dir, name: drawn.append(
      [line.get_label() for ax in fig.axes for line in ax.get_lines() if "max_len" in
       line.get_label()]) or plt.close(fig) or name)
  made = [fake_summary("C2", "mamba", 1, max_len, seed=seed)
          for seed, max_len in ((0, 100), (1, 1000), (2, 260))]
  figures.write_curves(tables.RunSet(made, []), str(tmp_path))
  assert drawn == [["mamba (max_len 1000)"]], f"the figure draws {drawn}, not the best run"


def test_extended_table_puts_baselines_beside_the_paper_models_of_their_groups():
  import dataclasses
  from ssm_bench.config import PRESETS
  curve = {str(L): 1.0 for L in range(20, 1001, 20)}

  def run(task, model, preset, max_len):
    c = dataclasses.asdict(TrainConfig(**{**PRESETS[preset], "task": task, "model": model}))
    return {"config": c, "status": "done", "max_len": max_len, "acc_curve": curve, "run": "x"}
  rs = tables.RunSet([run("C2", "negmamba", "table2_cpu", 1000), run("S3", "mamba", "table2_cpu", 0),
                      run("C2", "deltanet", "table2_ext_cpu", 500)], [])
  md = tables.markdown_extended(tables.extended_data(tables.table2_data(rs)))
  header = md.splitlines()[2]
  assert header == "| group | negmamba | deltanet |", header  # paper models first, S3 not listed
  assert "| C2 | 1000 (1/1) / ✓ | 500 (1/1) / ✓ |" in md, md


@pytest.mark.parametrize("d_state,mark", [(4, "✓"), (2, "?")])
def test_table_theory_reads_the_cells_key_width(d_state, mark):
  """A5 fits one DeltaProduct layer (n_h 2) only with keys of width 3: the table's theory mark
  follows the cell's d_state."""
  import dataclasses
  from ssm_bench.config import PRESETS
  c = dataclasses.asdict(TrainConfig(**{**PRESETS["table2_ext_cpu"], "task": "A5",
                                        "model": "deltaproduct", "d_state": d_state}))
  rs = tables.RunSet([{"config": c, "status": "done", "max_len": 0, "run": "x",
                       "acc_curve": {str(L): 0.1 for L in range(20, 1001, 20)}}], [])
  md = tables.markdown_extended(tables.extended_data(tables.table2_data(rs)))
  assert f"| A5 | ✘ (0/1) / {mark} |" in md, f"d_state {d_state}, want {mark}:\n{md}"


def test_the_committed_tables_are_what_the_stored_runs_give(tmp_path):
  """Every table committed under results/ is launch.tables' output for results/runs, as it is
  now: a table edited by hand, a run committed without its tables regenerated, or a change to
  the tables' code left unapplied to the stored ones fails here (figures are left out: their
  bytes follow the matplotlib version)."""
  root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
  out = launcher.run(["launch.tables", "--runs=results/runs", f"--out={tmp_path}",
                      "--nofigures"], cwd=root, timeout=600)
  assert out.returncode == 0, out.stderr[-2000:]
  made = sorted(os.listdir(tmp_path))
  assert "table2.md" in made and "profile.md" in made, made
  stale = []
  for name in made:
    committed = os.path.join(root, "results", name)
    new = open(tmp_path / name).read()
    old = open(committed).read() if os.path.exists(committed) else None
    if new != old:
      first = next((i for i, (a, b) in enumerate(zip((old or "").splitlines(),
                                                       new.splitlines())) if a != b), None)
      stale.append(f"{name} (first differing line {first})" if old is not None
                   else f"{name} (not committed)")
  assert not stale, ("committed tables differ from `python -m launch.tables "
                     f"--runs=results/runs --out=results`: {stale}")
  from ssm_bench import report
  tables_files = {t.file for t in report.TABLES + (report.OTHER,)} | {
      "table2.md", "table2.tex", "table2_compare.md", "table2_extended.md"}
  gone = sorted(n for n in tables_files if os.path.exists(os.path.join(root, "results", n))
                and n not in made)
  assert not gone, f"committed tables the stored runs no longer give: {gone}"
  # the same tables as JSON (`--format=json`, what a script reads): each one filled here
  js = launcher.run(["launch.tables", "--runs=results/runs", "--format=json"], cwd=root,
                    timeout=600)
  assert js.returncode == 0, js.stderr[-2000:]
  data = json.loads(js.stdout)
  empty = [t.key for t in report.TABLES if t.file in made and not data[t.key]]
  empty += [] if data["grid"] else ["grid"]
  assert not empty, f"tables written as files but empty in the JSON: {empty}"


def test_a_summary_that_parses_but_breaks_the_schema_is_listed_as_corrupt(tmp_path):
  """Valid JSON is not enough: a done summary whose curve misses grid lengths (or whose status is
  unknown) never reaches a cell; it is listed with what is wrong."""
  cut = fake_summary("C2", "mamba", 1, 1000)
  cut["acc_curve"] = {"20": 1.0}
  odd = fake_summary("C2", "mamba", 1, 1000, seed=1)
  odd["status"] = "finished"
  for name, s in (("cut-curve", cut), ("odd-status", odd)):
    os.makedirs(tmp_path / name)
    json.dump(s, open(tmp_path / name / "summary.json", "w"))
  rs = tables.load(str(tmp_path))
  reasons = dict(rs.problems)
  assert not rs.good, f"a summary breaking the schema reached the cells: {rs.good}"
  assert "acc_curve must map every grid length" in reasons["cut-curve"], reasons
  assert "unknown status 'finished'" in reasons["odd-status"], reasons


def test_a_cells_theory_reads_its_widest_run():
  """Runs of one cell at d_state 2 and 4 (A5, DeltaProduct n_h 2: keys of width 3 needed): the
  theory allows the cell if it allows one of its runs, so the widest decides (✓, not ?)."""
  import dataclasses
  from ssm_bench.config import PRESETS
  summaries = []
  for d_state in (2, 4):
    c = dataclasses.asdict(TrainConfig(**{**PRESETS["table2_ext_cpu"], "task": "A5",
                                          "model": "deltaproduct", "d_state": d_state}))
    summaries.append({"config": c, "status": "done", "max_len": 0, "run": f"x{d_state}"})
  assert tables.cell_width(summaries) == 4
  md = tables.markdown_extended(tables.extended_data(tables.table2_data(
      tables.RunSet(summaries, []))))
  assert "| A5 | ✘ (0/2) / ✓ |" in md, md


@pytest.mark.parametrize("paper", [{"depth_1": {}}, {"columns": "mamba"},
                                   {"columns": ["mamba"], "depth_2": [1000]}])
def test_a_paper_table_without_columns_or_with_a_non_dict_depth_is_refused(tmp_path, paper):
  path = tmp_path / "paper.json"
  path.write_text(json.dumps(paper))
  with pytest.raises(ValueError, match="expected an object with 'columns'"):
    tables.load_paper(str(path))


def test_execution_fields_never_split_a_protocol():
  """How often a run logs, checkpoints or splits its evaluation changes no number in its cell:
  such runs pool with the preset's others under the preset's name."""
  from ssm_bench.config import EXECUTION_FIELDS
  base = fake_summary("C2", "mamba", 1, 1000)["config"]
  for field in EXECUTION_FIELDS:
    cfg = {**base, field: 7}
    assert tables.protocol(cfg) == "paper", f"{field} split the protocol: {tables.protocol(cfg)}"


def test_tables_without_out_print_markdown_noting_other_runs_and_unloaded_plugins(tmp_path):
  """No --out prints the tables (as --format=markdown does) instead of writing files; Table 2
  names the finished runs no table reads, and a profile whose plugin cannot be loaded says so
  above its table (its layer's theory then reads `?`)."""
  other = fake_summary("C2-gen", "mamba", 1, 0)
  profile = fake_summary("C2", "mamba", 1, 1000)
  profile["config"].update(preset="profile_cpu", model="ghost", plugins="no_such_plugin_module")
  profile["run"] = "profile-ghost"
  for s in (fake_summary("C2", "negmamba", 1, 1000), other, profile):
    os.makedirs(tmp_path / s["run"])
    json.dump(s, open(tmp_path / s["run"] / "summary.json", "w"))
  out = launcher.run(["launch.tables", f"--runs={tmp_path}"], timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  for text in ("# Table 2", "| C2 | 1000 (1/1) |",
               "1 finished run in no table's cells (a task or protocol no table reads)",
               "# State-tracking profiles", "Not loaded (theory shown as ?):",
               "no_such_plugin_module"):
    assert text in out.stdout, f"{text!r} not printed:\n{out.stdout}"
  assert "note: not loaded, so the theory of its runs' layers reads ?: cannot import plugin " \
      "'no_such_plugin_module'" in out.stderr, f"no note on stderr:\n{out.stderr[-2000:]}"
  assert not [n for n in os.listdir(tmp_path) if n.endswith(".md")], "files written without --out"
