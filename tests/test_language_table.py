"""The language table (ssm_bench/language_table.py): measurement beside star-freeness and the
theory's prediction, a language scored on whole strings (flip-flop on its reads), a skipped
deeper cell told from a gap, and rows and columns of their own for membership targets and a
layer at other kwargs."""
import pytest

from ssm_bench import language_table
from tasks import registry


def _run(task: str, model: str, max_len: int, status: str = "done", depth: int = 1) -> dict:
  """A language run's summary whose whole strings are right up to `max_len` and whose
  per-position max_len reads 1000 (what a last-symbol rule scored on a^n b^n c^n)."""
  import dataclasses
  from ssm_bench import evaluation
  from ssm_bench.config import TrainConfig
  return {"config": dataclasses.asdict(TrainConfig(task=task, model=model, depth=depth)),
          "status": status, "max_len": 1000,
          "seq_acc_curve": {str(n): float(n <= max_len) for n in evaluation.grid()}}


def test_language_table_shows_measurement_beside_star_freeness_and_prediction():
  runs = [_run(f"lang-{lang}", m, ml, st)
          for lang, m, st, ml in [("parity", "mamba", "done", 0), ("parity", "rnn", "done", 1000),
                                  ("parity", "rnn", "diverged", 0), ("tomita4", "mamba", "done", 400)]]
  md = language_table.markdown(language_table.language_data(runs))
  rows = {line.split("|")[1].strip(): line for line in md.splitlines()[2:]}
  assert "| no | C2 |" in rows["parity"] and "✘ (0/1) ✗" in rows["parity"], md
  assert "1000 (1/2) ✓" in rows["parity"], "a diverged run must count as a run"
  assert "| yes | - |" in rows["tomita4"] and "400 (1/1) ✓" in rows["tomita4"], md


def test_each_language_cell_carries_its_prediction_for_the_json_tables():
  """`launch.tables --format=json` hands scripts the cells as data: each carries the verdict the
  markdown marks (True ✓, False ✗, None ?), at the cell's depth and width."""
  runs = [_run("lang-parity", "mamba", 0), _run("lang-parity", "rnn", 1000),
          _run("lang-tomita6", "deltanet", 0, depth=2), _run("lang-tomita6", "deltanet", 0),
          _run("lang-tomita3", "transformer", 0)]
  data = language_table.language_data(runs)
  got = {(lang, model, depth): c["prediction"] for (lang, _), e in data.items()
         for (model, depth, _), c in e["cells"].items()}
  assert got == {("parity", "mamba", 1): False, ("parity", "rnn", 1): True,
                 ("tomita6", "deltanet", 2): True, ("tomita6", "deltanet", 1): None,
                 ("tomita3", "transformer", 1): None}, got


@pytest.mark.parametrize("kwargs,parity,tomita3", [('{"m":3}', False, False),
                                                   ('{"m":4}', True, None)])
def test_a_plugin_class_predicts_on_languages_by_its_series_with_its_parameter(kwargs, parity,
                                                                             tomita3):
  """examples/clock.py's roots_of_unity:<m>: parity's and tomita3's monoids hold C2, which cube
  roots cannot track at any depth (✗), 4th roots can: parity's monoid is C2 itself (✓), tomita3's
  holds more (?: the rest of the monoid has no theorem); a counter language is no monoid (?)."""
  from ssm_bench import plugins
  plugins.load("examples.clock")
  got = [language_table.predicted(f"lang-{lang}", "clock", kwargs)
         for lang in ("parity", "tomita3", "dyck1")]
  assert got == [parity, tomita3, None], f"clock {kwargs}: predicted {got}"


def test_language_table_tells_a_skipped_deeper_cell_from_one_not_trained_yet():
  """Depth 2 trains only where depth 1 failed: a missing depth-2 cell reads `= d1` (skipped, as
  in the profile) only when a depth-1 run succeeded, else `·` (an interrupted sweep's gap must
  not read as a skip)."""
  runs = [_run(f"lang-{lang}", "rnn", ml, depth=d)
          for lang, d, ml in [("tomita1", 1, 1000), ("parity", 1, 0), ("tomita4", 1, 0),
                              ("tomita4", 2, 100), ("tomita7", 1, 0), ("tomita7", 1, 1000)]]
  md = language_table.markdown(language_table.language_data(runs))
  rows = {line.split("|")[1].strip(): line.rstrip(" |").rsplit("|", 1)[1].strip()
          for line in md.splitlines()[2:]}
  # one depth-1 success of two is a success (the skip rule's); 100 reaches the line, no cross
  assert rows == {"parity": "·", "tomita1": "= d1", "tomita4": "100 (1/1) ✓",
                  "tomita7": "= d1"}, f"rnn x2 cells: {rows}"


def test_flipflop_rows_score_the_reads_and_depth_2_trains_where_reads_failed():
  """Every flip-flop run reached max_len 1000 over all positions while its reads were at chance
  (sparse: reads are 1% of positions): the table and the sweep's depth staging must use reads."""
  import dataclasses
  from launch import sweep_stages
  from ssm_bench.config import TrainConfig
  cfg = TrainConfig(task="lang-flipflop_sparse", model="mamba", preset="cpu")
  chance = {"config": dataclasses.asdict(cfg), "status": "done", "max_len": 1000,
            "event_acc": {"after_read": 0.59}}
  md = language_table.markdown(language_table.language_data([chance]))
  assert "0.59 (0/1)" in md, md
  deeper = cfg.replace(depth=2)
  assert not sweep_stages.shallower_modelled(deeper, [(cfg, chance)]), "depth 2 skipped on max_len"
  solved = {**chance, "event_acc": {"after_read": 0.97}}
  assert sweep_stages.shallower_modelled(deeper, [(cfg, solved)])
  group = TrainConfig(task="lang-parity", model="mamba", preset="cpu")
  assert sweep_stages.shallower_modelled(group.replace(depth=2), [(group, {
      "config": dataclasses.asdict(group), "status": "done", "max_len": 1000,
      "seq_acc_curve": {"20": 1.0, "100": 1.0}})])


def test_a_language_run_is_judged_on_whole_strings_and_a_group_run_per_position():
  """A model right everywhere but once per string (at position 30) is right at 99.9% of
  positions: a group task's max_len is 1000, a language's 20; the language table reads stored
  runs from their whole-string curve, whatever their max_len field says."""
  import numpy as np
  from ssm_bench import evaluation
  hits = np.ones((64, 1000), bool)
  hits[:, 29] = False
  assert evaluation.scored(registry.get_task("C2"), hits)["max_len"] == 1000
  scored = evaluation.scored(registry.get_task("lang-dyck1"), hits)
  assert scored["max_len"] == 20, f"a language scored per position: {scored['max_len']}"
  stored = _run("lang-dyck1", "mamba", 20)  # its max_len field: 1000
  assert language_table.score(stored) == (20, False)


@pytest.mark.parametrize("task,event_acc,status,want", [
    ("lang-flipflop_language", {"after_read": 0.9}, "done", (0.9, False)),  # success is above 0.9
    ("lang-flipflop_language", {"after_read": 0.95}, "done", (0.95, True)),
    ("lang-flipflop_language", None, "diverged", (0.0, False)),
    ("lang-tomita3", None, "diverged", (0, False)),
])
def test_a_language_run_scores_reads_above_the_threshold_and_a_diverged_run_zero(
    task, event_acc, status, want):
  from test_tables import fake_summary
  s = fake_summary(task, "mamba", 1, 1000, status=status)
  if event_acc:
    s["event_acc"] = event_acc
  assert language_table.score(s) == want, (task, status, language_table.score(s))


def test_a_membership_run_is_its_own_row_beside_the_next_set_run():
  """lang-<name>-member is the membership target of <name>: a row of its own, never pooled with
  the predictive (next set) target's runs."""
  data = language_table.language_data([_run("lang-tomita3-member", "rnn", 1000),
                                       _run("lang-tomita3", "rnn", 40)])
  assert list(data) == [("tomita3", "membership"), ("tomita3", "next set")], list(data)
  assert data[("tomita3", "membership")]["cells"][("rnn", 1, "")]["scores"] == [(1000, True)]


def test_a_layers_runs_at_other_kwargs_are_columns_of_their_own_with_their_own_prediction():
  """The clock at m = 3 and m = 4 on parity: two columns, ✗ (cube roots never track C2) and ✓,
  each scored on its own runs; before, both pooled in one cell under the default m's class."""
  from ssm_bench import plugins
  plugins.load("examples.clock")
  runs = []
  for kwargs, max_len in (('{"m":3}', 0), ('{"m":4}', 1000)):
    r = _run("lang-parity", "clock", max_len)
    r["config"].update(layer_kwargs=kwargs, plugins="examples.clock")
    runs.append(r)
  data = language_table.language_data(runs)
  md = language_table.markdown(data)
  header, _, row = md.splitlines()
  assert header.endswith('| clock {"m":3} x1 | clock {"m":4} x1 |'), header
  assert row.endswith("| ✘ (0/1) ✗ | 1000 (1/1) ✓ |"), row


def test_a_stored_run_of_a_language_this_version_lacks_is_listed_with_the_unread_runs():
  """A run from another version (its language renamed or gone) is no language-table cell, and
  the table of runs no table reads lists it, so it is reported, not dropped."""
  from ssm_bench import report
  gone, kept = _run("lang-tomita99", "rnn", 1000), _run("lang-tomita3", "rnn", 40)
  assert not language_table.takes(gone) and language_table.takes(kept)
  assert list(language_table.language_data([gone, kept])) == [("tomita3", "next set")]
  built = report.build([gone, kept])
  rows = {key for by_task in built[report.OTHER].values() for key in by_task}
  assert rows == {("lang-tomita99", "rnn x1")}, f"other_runs holds {sorted(rows)}"


def test_a_group_languages_cell_is_predicted_at_its_depth_and_its_runs_width():
  """tomita6's monoid is C3: deltaproduct (two reflections a token) tracks it in one layer
  with keys of two dimensions, so its cell is ✓ at d_state 2 and ? at d_state 1; negmamba's
  is ✗ at every depth, aussm's ✓ at depth 1 and 2."""
  runs = []
  for model, depth, d_state in (("deltaproduct", 1, 1), ("deltaproduct", 2, 2),
                                ("negmamba", 1, 4), ("negmamba", 2, 4), ("aussm", 1, 4),
                                ("aussm", 2, 4)):
    r = _run("lang-tomita6", model, 0, depth=depth)
    r["config"]["d_state"] = d_state
    runs.append(r)
  cells = language_table.markdown(language_table.language_data(runs)).splitlines()[2]
  marks = [c.strip()[-1] for c in cells.strip(" |").split("|")[4:]]
  assert marks == ["✓", "✓", "?", "✓", "✗", "✗"], cells  # aussm x1, x2, deltaproduct x1, x2, ...
  assert language_table.predicted("lang-tomita6", "aussm", depth=1) is True


def test_a_group_languages_cell_below_the_classs_minimal_depth_has_no_theorem(monkeypatch):
  """A language whose monoid is C4 (a counter mod 4): a signed diagonal stack tracks C4 from
  depth 2 on (C4 -> C2 -> 1), so negmamba's cell is ? at depth 1 and ✓ at depth 2."""
  from tasks import languages
  monkeypatch.setitem(languages.LANGUAGES, "mod4_for_test", lambda: languages.from_spec(
      "mod4_for_test", "ab", ["0", "1", "2", "3"], "0", ["0"],
      {"0 a": "1", "1 a": "2", "2 a": "3", "3 a": "0", "0 b": "0", "1 b": "1", "2 b": "2",
       "3 b": "3"}, member=lambda w: w.count("a") % 4 == 0))
  runs = [_run("lang-mod4_for_test", "negmamba", 0, depth=d) for d in (1, 2)]
  row = language_table.markdown(language_table.language_data(runs)).splitlines()[2]
  assert row.endswith("| ✘ (0/1) ? | ✘ (0/1) ✓ |"), row


def test_a_hybrid_stack_on_a_group_language_is_predicted_from_its_classes_together():
  """tomita6's monoid is C3: mamba,aussm tracks C3 (its aussm layer alone does), so ✓;
  mamba,negmamba does not (no theorem claimed for a mix beyond the group: ?); on a language
  whose monoid is not a group (tomita3), a hybrid gets no verdict."""
  assert language_table.predicted("lang-tomita6", "mamba,aussm", depth=2) is True
  assert language_table.predicted("lang-tomita6", "mamba,negmamba", depth=2) is None
  assert language_table.predicted("lang-tomita3", "negmamba,aussm", depth=2) is None
  row = language_table.markdown(language_table.language_data(
      [_run("lang-tomita6", "mamba,aussm", 0, depth=2)])).splitlines()[2]
  assert row.endswith("| ✘ (0/1) ✓ |"), row


def test_a_layer_that_models_a_group_language_only_deeper_says_from_which_depth(monkeypatch):
  """`launch.info --language`'s verdict by layer: on a counter mod 4 (monoid C4) negmamba's
  signed class tracks C4 with two layers, aussm's with one, mamba's never."""
  from tasks import languages
  monkeypatch.setitem(languages.LANGUAGES, "mod4_for_info", lambda: languages.from_spec(
      "mod4_for_info", "ab", ["0", "1", "2", "3"], "0", ["0"],
      {"0 a": "1", "1 a": "2", "2 a": "3", "3 a": "0", "0 b": "0", "1 b": "1", "2 b": "2",
       "3 b": "3"}, member=lambda w: w.count("a") % 4 == 0))
  by_layer = language_table.verdict_by_layer("mod4_for_info")
  assert (by_layer["negmamba"], by_layer["aussm"], by_layer["mamba"]) == (
      "yes from depth 2", "yes", "no"), by_layer
