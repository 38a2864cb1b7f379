"""What the figures draw (ssm_bench/figures.py), read from their artists before they are saved:
the minimal-depth markers, the offset example's seed and curves, the profile heatmap's colours
and red outlines, the overview's colours for tentative cells. (Which figures are written, and
their names, are tested beside the tables that draw them.)"""
import numpy as np
import pytest

from ssm_bench import figures
from ssm_bench import tables
from ssm_bench import tracking_profile
from test_tables import fake_summary

pytest.importorskip("matplotlib")


@pytest.fixture
def drawn(monkeypatch):
  """The figures `_save` was handed, kept open for reading (closed after the test)."""
  import matplotlib.pyplot as plt
  figs = []
  monkeypatch.setattr(figures, "_save", lambda fig, plt_, out_dir, name: figs.append(fig) or name)
  yield figs
  for f in figs:
    plt.close(f)


def test_the_minimal_depth_figure_draws_an_unsolved_length_hollow_above_the_deepest_tried(
    tmp_path, drawn):
  """Paper 002, Fig. 3: length 2 solved at depth 1 (a filled marker at 1), length 4 solved by
  no depth up to 3 (a hollow marker at 4, the axis's "> 3")."""
  data = {"A5": {"mamba": {"2": {"depth": 1, "tried": 1, "best": 0.95},
                           "4": {"depth": None, "tried": 3, "best": 0.1}}}}
  figures.write_illusion(data, str(tmp_path))
  (ax,) = drawn[0].axes
  line, hollow = ax.get_lines()
  assert list(line.get_xdata()) == [2, 4] and list(line.get_ydata()) == [1, 4], (
      line.get_xdata(), line.get_ydata())
  assert list(hollow.get_xdata()) == [4] and list(hollow.get_ydata()) == [4], (
      "the hollow marker is not the unsolved length alone")
  assert hollow.get_markerfacecolor() == "white"


def test_an_offset_example_is_the_first_seeds_model_curve_over_its_signal(tmp_path, drawn):
  """Two seeds of one stack: the figure draws seed 0's stored example, its signal as the step
  and the model's P(next = 1) as the curve."""
  runs = []
  for seed in (1, 0):
    s = fake_summary("offset", "s4d", 1, 0, seed=seed)
    ex = {"tokens": [0, 1, 1, 0], "labels": [1, 1, 0, 0], "p1": [0.1 + seed / 10, 0.9, 0.2, 0.1]}
    s.update(eval_stream="cycles", example=ex)
    runs.append(s)
  figures.write_examples(tables.RunSet(runs, []), str(tmp_path))
  (ax,) = drawn[0].axes
  by_label = {line.get_label(): list(line.get_ydata()) for line in ax.get_lines()}
  assert by_label["model P(next = 1)"] == [0.1, 0.9, 0.2, 0.1], by_label
  assert by_label["next token (signal)"] == [1, 1, 0, 0], by_label


def _summary(task, depth, seed, max_len, model="negmamba"):
  return {"run": f"{task}-{model}-L{depth}-s{seed}", "status": "done", "max_len": max_len,
          "config": {"model": model, "task": task, "depth": depth, "seed": seed,
                     "preset": "profile_cpu", "layer_kwargs": "", "d_state": 4}}


def test_the_profile_heatmap_colours_by_max_len_and_outlines_only_disagreements(tmp_path, drawn):
  """negmamba: C2 at depth 1 extrapolates (agrees), D4 at depth 2 does not on one run (below
  theory, tentative: a dashed red outline), C3 at depth 1 reaches 300 where the theory says
  never (beats it, tentative too), Q8 at depth 2 fails on enough runs (below, settled: solid).
  Colours are the best max_len."""
  runs = [_summary("C2", 1, 0, 1000), _summary("C2", 1, 1, 0), _summary("D4", 2, 0, 20),
          _summary("C3", 1, 0, 300)] + [_summary("Q8", 2, s, 0)
                                         for s in range(tables.MIN_RUNS_AGAINST_THEORY)]
  data = tracking_profile.profile_data(runs)
  figures.write_profiles(data, str(tmp_path))
  (ax,) = drawn[0].axes
  p = next(iter(data.values()))
  gs, ds = p["groups"], p["depths"]
  values = ax.get_images()[0].get_array()
  assert values[gs.index("C2"), ds.index(1)] == 1000 and values[gs.index("D4"), ds.index(2)] == 20
  outlined = {(round(r.get_y() + 0.45), round(r.get_x() + 0.45)): r.get_linestyle()
              for r in ax.patches}
  assert outlined == {(gs.index("D4"), ds.index(2)): "--", (gs.index("C3"), ds.index(1)): "--",
                      (gs.index("Q8"), ds.index(2)): "-"}, \
      f"red outlines at {outlined} (rows {gs}, columns {ds})"


def test_the_overview_colours_a_tentative_cell_apart_from_a_settled_one(tmp_path, drawn):
  """D4 at depth 2 below the theory on one run is `below?` (the lighter red); Q8 on enough runs
  is `below`."""
  enough = tables.MIN_RUNS_AGAINST_THEORY
  runs = ([_summary("D4", 2, 0, 0)] + [_summary("Q8", 2, s, 0) for s in range(enough)]
          + [_summary("C2", 1, 0, 1000, "mamba")])
  data = tracking_profile.profile_data(runs)
  figures.write_profile_overview(data, str(tmp_path))
  (ax, *_) = drawn[0].axes
  codes = ax.get_images()[0].get_array()
  groups = tracking_profile.overview_groups(list(data.values()))
  column = [p["model"] for p in data.values()].index("negmamba")
  kinds = list(figures._OVERVIEW_KINDS)
  assert kinds[int(codes[groups.index("D4"), column])] == "below?"
  assert kinds[int(codes[groups.index("Q8"), column])] == "below"
  assert np.isfinite(codes).all()
