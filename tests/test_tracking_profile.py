"""The profile report from summaries alone: a verdict against the theory on too few runs is
called tentative, one on enough runs is not (synthetic summaries; no training)."""
from ssm_bench import tables
from ssm_bench import tracking_profile
import launcher


def _summary(task, depth, seed, max_len, model="mamba", d_state=4):
  return {"run": f"{task}-{model}-L{depth}-s{seed}", "status": "done", "max_len": max_len,
          "config": {"model": model, "task": task, "depth": depth, "seed": seed,
                     "preset": "profile_cpu", "layer_kwargs": "", "d_state": d_state}}


def _rows(summaries) -> dict:
  report = tracking_profile.markdown(tracking_profile.profile_data(summaries))
  return {line.split(" | ")[0][2:]: line for line in report.splitlines()
          if line.startswith("| ") and not line.startswith("| group")}, report


def _overview_rows(report: str) -> dict:
  """{group: the overview's cells after the order column} of a report's opening table."""
  return {line.split(" | ")[0][2:]: line.split(" | ")[2:] for line in report.split("\n## ")[0]
          .splitlines() if line.startswith("| ") and not line.startswith("| group")}


def test_a_verdict_against_the_theory_is_tentative_below_the_settling_run_count():
  enough = tables.MIN_RUNS_AGAINST_THEORY
  # negmamba: D4 expressible at depth 2 (two signed layers), C3 never (rotations)
  few = [_summary("D4", 2, s, 0, "negmamba") for s in range(enough - 1)]
  many = [_summary("Q8", 2, s, 40, "negmamba") for s in range(enough)]
  beyond = [_summary("C3", 1, 0, 1000, "negmamba")]
  rows, report = _rows(few + many + beyond)
  assert "*below theory, tentative*" in rows["D4"], (
      f"{enough - 1} runs below the theory were reported as settled: {rows['D4']}")
  assert "**below theory**" in rows["Q8"] and "tentative" not in rows["Q8"], (
      f"{enough} runs below the theory were reported as tentative: {rows['Q8']}")
  assert "*beats theory, tentative*" in rows["C3"], rows["C3"]
  assert f"- D4 at depth 2: below theory (best max_len 0, 0/{enough - 1} runs reach 100; " \
         f"theory ✓); tentative: fewer than {enough} runs" in report, report
  assert "- Q8 at depth 2: below theory (best max_len 40, 0/4 runs reach 100; theory ✓)\n" \
         in report, report


def test_agreement_is_never_tentative():
  agree = [_summary("C2", 1, 0, 1000, "negmamba"), _summary("C3", 1, 0, 0, "negmamba")]
  data = tracking_profile.profile_data(agree)
  cells = next(iter(data.values()))["cells"]
  assert not any(tracking_profile.tentative(cells[g][1]) for g in ("C2", "C3")), cells
  rows, _ = _rows(agree)
  assert "tentative" not in rows["C2"] + rows["C3"], rows


def test_the_theory_column_reads_the_runs_key_width():
  """DeltaProduct (n_h 2) holds A5 in 3 dimensions: at d_state 4 a failed cell is below theory,
  at d_state 2 there is no theorem (and the min-depth column says so)."""
  for d_state, mark, min_depth in ((4, "✓ *below theory, tentative*", "| 1 |"),
                                   (2, "?", "| no theorem |")):
    rows, _ = _rows([_summary("A5", 1, s, 0, "deltaproduct", d_state) for s in (0, 1)])
    assert rows["A5"].endswith(f"✘ (0/2) {mark} {min_depth}"), (d_state, rows["A5"])


def test_a_plugin_class_judges_the_runs_of_its_layer_by_their_kwargs():
  """Stored clock runs (examples/clock.py, a class of its own): the same C3 success beats the
  theory of 4th roots of unity and agrees with that of 6th roots; each m is its own profile."""
  tables.load_plugins([{"config": {"plugins": "examples.clock"}}])
  runs = []
  for kwargs in ('{"m":4}', '{"m":6}'):
    for seed in range(tables.MIN_RUNS_AGAINST_THEORY):
      s = _summary("C3", 1, seed, 1000, "clock")
      s["config"].update(layer_kwargs=kwargs, plugins="examples.clock")
      runs.append(s)
  data = tracking_profile.profile_data(runs)
  by_kwargs = {p["layer_kwargs"]: p for p in data.values()}
  assert {k: p["class"] for k, p in by_kwargs.items()} == {
      '{"m":4}': "roots_of_unity:4", '{"m":6}': "roots_of_unity:6"}, by_kwargs
  report = tracking_profile.markdown(data)
  assert report.count("**beats theory**") == 1, report
  assert "- C3 at depth 1: beats theory" in report, report


def test_runs_at_another_width_make_their_own_profile():
  """A width override (--config.d_state=8) must not pool into the preset's profile: one success
  at d_state 8 would otherwise turn the preset's failed cell into a success."""
  preset = [_summary("C2", 1, s, 0) for s in (0, 1)]
  wide = [_summary("C2", 1, s, 1000, d_state=8) for s in (0, 1)]
  data = tracking_profile.profile_data(preset + wide)
  protocols = sorted(p["protocol"] for p in data.values())
  assert protocols == ["profile_cpu", "profile_cpu + d_state=8"], protocols
  by_protocol = {p["protocol"]: p["cells"]["C2"][1] for p in data.values()}
  assert by_protocol["profile_cpu"]["successes"] == 0, by_protocol
  assert by_protocol["profile_cpu + d_state=8"]["successes"] == 2, by_protocol
  report = tracking_profile.markdown(data)
  assert "## mamba (protocol profile_cpu + d_state=8, 2 runs)" in report, report


def test_the_report_shows_an_overridden_width_as_its_own_section(tmp_path):
  """launch.profile's report covers the preset's runs and, apart, those run with an override."""
  import json
  import os
  src = os.path.join(os.path.dirname(__file__), "..", "results", "runs",
                     "C2-mamba-L1-n4-lr0.003-cosine-s0-2c4dee78", "summary.json")
  base = json.load(open(src))
  assert base["config"]["preset"] == "profile_cpu", base["config"]
  for name, d_state in (("preset", base["config"]["d_state"]), ("wide", 8)):
    s = {**base, "run": name, "config": {**base["config"], "d_state": d_state}}
    os.makedirs(tmp_path / "runs" / name)
    json.dump(s, open(tmp_path / "runs" / name / "summary.json", "w"))
  # a subprocess: launch.profile's flags clash with launch.sweep's in one test process
  p = launcher.run(["launch.profile", "--model=mamba", "--preset=cpu",
                    "--report_only", f"--workdir={tmp_path / 'runs'}", f"--out={tmp_path}"], timeout=300)
  assert p.returncode == 0, p.stderr[-2000:]
  written = p.stdout.strip().split(" to ")[0].removeprefix("wrote ").split(", ")
  report = open(tmp_path / "profile_profile_cpu_mamba.md").read()
  assert "## mamba (protocol profile_cpu, 1 runs)" in report, report
  assert "## mamba (protocol profile_cpu + d_state=8, 1 runs)" in report, report
  heatmaps = [w for w in written if w.endswith(".png")]  # matplotlib is a test dependency
  assert len(set(heatmaps)) == 2, f"one heatmap per profile expected: {written}"


def test_the_report_names_the_groups_the_layer_holds_by_hand():
  """negmamba has hand-built weights for the 2-groups (analytic_signed.signed), none for C3 or
  S3: a below-theory D4 cell is then a training failure, not a missing construction."""
  runs = [_summary(g, 1, 0, 0, "negmamba") for g in ("C2", "C3", "D4", "S3")]
  runs.append(_summary("S3", 1, 0, 0, "mamba"))
  _, report = _rows(runs)
  line = "- Held exactly by hand-built `negmamba` weights"
  held = [l for l in report.splitlines() if l.startswith(line)]
  assert len(held) == 1 and held[0].endswith(": C2, D4."), (
      f"expected negmamba's constructions for C2 and D4 only: {held}")
  assert "hand-built `mamba`" not in report, "mamba has no construction, yet one is named"


def test_the_report_names_only_the_groups_held_by_hand_at_the_profiles_kwargs():
  """The clock's weights for C3 are built at m = 3: a profile at the default m = 4 (where no
  depth tracks C3) must not read its C3 cell as a training failure; D4 is built at m = 4."""
  from ssm_bench import plugins
  plugins.load("examples.clock")
  runs = [_summary(g, 1, 0, 0, "clock") for g in ("C3", "D4")]
  _, report = _rows(runs)
  held = [l for l in report.splitlines() if l.startswith("- Held exactly by hand-built `clock`")]
  assert len(held) == 1 and held[0].endswith(": D4."), f"held at m = 4: {held}"


def test_the_overview_sets_each_layers_first_extrapolating_depth_beside_the_theorys():
  """profile.md opens with every profile side by side: per group, the smallest depth at which a
  run reached 100 / the theory's minimal depth, flagged where they disagree on a trained depth;
  a deeper stack failing after a shallower one succeeded is no disagreement; a depth that one
  run reached is marked, one that two reached is not."""
  enough = tables.MIN_RUNS_AGAINST_THEORY
  runs = [_summary("C2", 1, 0, 1000, "negmamba"), _summary("C2", 1, 1, 120, "negmamba"),
          _summary("C3", 1, 0, 200, "negmamba"),  # a rotation: never, so beats (one run)
          *[_summary("D4", d, s, 0, "negmamba") for d in (1, 2) for s in range(enough)],
          _summary("D4", 1, 0, 0, "aussm"), _summary("D4", 2, 0, 140, "aussm"),
          *[_summary("D4", 3, s, 0, "aussm") for s in range(enough)],
          _summary("A5", 1, 0, 0, "aussm"),
          # the theory's depth 1 failed on enough runs, depth 2 then extrapolated: below
          *[_summary("C2xC2", 1, s, 0, "negmamba") for s in range(enough)],
          _summary("C2xC2", 2, 0, 300, "negmamba")]
  report = tracking_profile.markdown(tracking_profile.profile_data(runs))
  assert report.startswith("## All profiles"), report[:300]
  rows = _overview_rows(report)
  assert rows["C2"] == ["·", "1 / 1 |"], rows["C2"]  # columns: aussm, negmamba
  assert rows["C3"] == ["·", "1† / never *beats?* |"], rows["C3"]
  assert rows["D4"] == ["2† / 2", "✘ / 2 **below** |"], rows["D4"]
  assert rows["A5"] == ["✘ / never", "· |"], rows["A5"]
  assert rows["C2xC2"] == ["·", "2† / 1 **below** |"], rows["C2xC2"]
  one = tracking_profile.markdown(tracking_profile.profile_data(runs[:3]))
  assert "All profiles" not in one, "a single profile got an overview of itself"


def test_the_overview_calls_below_settled_when_any_of_its_depths_has_enough_runs():
  """D4 with negmamba: the theory's depth 2 failed on enough runs and depth 3 on one: the
  disagreement is settled by depth 2, whatever depth 3's count."""
  enough = tables.MIN_RUNS_AGAINST_THEORY
  runs = [_summary("C2", 1, 0, 1000, "aussm"),  # a second profile: the overview is drawn
          *[_summary("D4", 2, s, 0, "negmamba") for s in range(enough)],
          _summary("D4", 3, 0, 0, "negmamba")]
  report = tracking_profile.markdown(tracking_profile.profile_data(runs))
  row = next(l for l in report.split("\n## ")[0].splitlines() if l.startswith("| D4 |"))
  assert row.endswith("| ✘ / 2 **below** |"), row


def test_a_cell_whose_best_run_reaches_100_shows_100_not_a_cross():
  rows, _ = _rows([_summary("C2", 1, 0, 100, "negmamba")])
  assert "| 100 (1/1) ✓ |" in rows["C2"], rows["C2"]


def test_report_only_trains_nothing(tmp_path):
  """--report_only writes the report from the runs already there and starts no sweep: over an
  empty directory it says there are none (exit 2) at once and leaves the directory empty."""
  p = launcher.run(["launch.profile", "--model=mamba", "--report_only",
                    f"--workdir={tmp_path}"], timeout=60)
  assert p.returncode == 2 and "no finished profile_cpu runs of mamba" in p.stderr, (
      f"exit {p.returncode}:\n{p.stderr[-1500:]}")
  assert not list(tmp_path.iterdir()), f"--report_only wrote {list(tmp_path.iterdir())}"


def test_a_layers_report_compares_it_with_the_profiles_in_another_directory(tmp_path):
  """launch.profile --compare_with=DIR: the report's overview sets the layer beside the other
  layers' profiles stored in DIR at the same protocol (and those only: not another protocol's,
  nor this layer's own runs stored there); its sections stay its own protocol's."""
  import json
  import os
  src = os.path.join(os.path.dirname(__file__), "..", "results", "runs",
                     "C2-mamba-L1-n4-lr0.003-cosine-s0-2c4dee78", "summary.json")
  base = json.load(open(src))
  for where, name, model, preset, max_len in (
      ("runs", "mine", "mamba", "profile_cpu", 0), ("stored", "neg", "negmamba", "profile_cpu", 0),
      ("stored", "tiny", "aussm", "profile_tiny", 0),
      ("runs", "mine_tiny", "mamba", "profile_tiny", 0),  # another protocol: another report
      ("stored", "mine_there", "mamba", "profile_cpu", 1000)):  # this layer's: not compared
    s = {**base, "run": name, "max_len": max_len,
         "config": {**base["config"], "model": model, "preset": preset}}
    os.makedirs(tmp_path / where / name)
    json.dump(s, open(tmp_path / where / name / "summary.json", "w"))
  p = launcher.run(["launch.profile", "--model=mamba", "--report_only",
                    f"--workdir={tmp_path / 'runs'}", f"--out={tmp_path}",
                    f"--compare_with={tmp_path / 'stored'}"], timeout=300)
  assert p.returncode == 0, p.stderr[-2000:]
  report = open(tmp_path / "profile_profile_cpu_mamba.md").read()
  assert "| group | order | mamba (depth 1) | negmamba (depth 1) |\n" in report, report
  assert "## negmamba" not in report and "## mamba (protocol profile_cpu" in report, report
  assert "profile_tiny" not in report, "the profile_cpu report took in profile_tiny runs"
  assert "| C2 | 2 | ✘ / never | ✘ / 1 *below?* |\n" in report, (
      "the layer's own runs in --compare_with replaced its profile:\n" + report)
  assert "profile_profile_cpu_mamba_overview.png" in p.stdout, p.stdout  # drawn beside them too
  assert os.path.exists(tmp_path / "profile_profile_cpu_mamba_overview.png")


def test_diverged_runs_are_counted_in_their_cells_and_in_the_section():
  """A layer whose runs diverge reads "below theory" like one that trained and missed: the cell
  and the section say how many of its runs diverged (ids4 at profile_cpu: most of them)."""
  runs = [_summary("C2", 1, s, 0, "ids4") for s in range(4)] + [_summary("C3", 1, 0, 1000, "ids4")]
  for s in runs[:3]:
    s["status"] = "diverged"
  rows, report = _rows(runs)
  assert "✘ (0/4, 3 diverged) ✓ **below theory**" in rows["C2"], rows["C2"]
  assert "diverged" not in rows["C3"], rows["C3"]
  assert "- **Diverged**: 3 of 5 runs" in report, report
  both = tracking_profile.markdown(tracking_profile.profile_data(runs + [_summary("C2", 1, 0, 0)]))
  assert "| group | order | ids4 (depth 1; 3 of 5 runs diverged) | mamba (depth 1) |" in both, both


def test_the_overview_figure_is_drawn_for_two_profiles_or_more(tmp_path):
  """launch.tables draws profile.md's overview as profile_overview.png (matplotlib is a test
  dependency); a single profile gets none, as it gets no overview table."""
  from ssm_bench import figures
  runs = [_summary("C2", 1, 0, 1000, "negmamba"), _summary("D4", 2, 0, 0, "negmamba"),
          _summary("C2", 1, 0, 0, "mamba")]
  assert figures.write_profile_overview(tracking_profile.profile_data(runs), str(tmp_path)) \
      == ["profile_overview.png"]
  assert (tmp_path / "profile_overview.png").stat().st_size > 1000
  kinds = {g: tracking_profile.min_depth_entry(p, g)["kind"]
           for p in tracking_profile.profile_data(runs).values() for g in p["groups"]
           if p["model"] == "negmamba"}
  assert kinds == {"C2": "tracked", "D4": "below"}, kinds
  shallow = tracking_profile.profile_data([_summary("D4", 1, 0, 0, "negmamba")])
  assert tracking_profile.min_depth_entry(next(iter(shallow.values())), "D4")["kind"] == \
      "too shallow", "a depth-1 profile's D4 (theory: 2) read as agreeing with the theory"
  one = tracking_profile.profile_data(runs[2:])
  assert figures.write_profile_overview(one, str(tmp_path / "x")) == []


def test_no_theorem_gives_no_verdict_and_untrained_depths_name_the_first_that_extrapolated():
  """A failed cell of a class with no theorem (DeltaNet on C3) is neither below nor beyond the
  theory; a depth left untrained shows the smallest depth that extrapolated (1 here, though
  depth 2 extrapolated too)."""
  runs = [_summary("C3", 1, 0, 0, "deltanet"), _summary("C2", 1, 0, 1000, "deltanet"),
          _summary("C2", 2, 0, 1000, "deltanet"), _summary("C3", 3, 0, 0, "deltanet")]
  cells = next(iter(tracking_profile.profile_data(runs).values()))["cells"]
  assert cells["C3"][1]["theory"] is None and tracking_profile.verdict(cells["C3"][1]) is None, (
      cells["C3"][1])
  assert cells["C2"][3]["solved_at"] == 1, cells["C2"][3]


def test_a_run_whose_transitions_leave_the_declared_class_is_listed_with_the_reason():
  """The profile says how many checked runs broke the layer's declaration, and which and why."""
  detail = {"layer": "layer0", "class": "signed_diagonal", "ok": False,
            "detail": "a in [-1.2, 0.9], outside [-1, 1]"}
  bad = {**_summary("C2", 1, 0, 1000, "negmamba"),
         "declaration": {"checked": True, "ok": False, "layers": [detail]}}
  good = {**_summary("C2", 1, 1, 1000, "negmamba"),
          "declaration": {"checked": True, "ok": True, "layers": [{**detail, "ok": True}]}}
  _, report = _rows([bad, good])
  assert "**Declaration violated** in 1 of 2 checked runs" in report, report
  assert "`C2-negmamba-L1-s0`: layer0 (signed_diagonal): a in [-1.2, 0.9], outside" in report


def test_a_section_says_beats_only_where_a_run_beats_and_never_checked_where_none_was():
  """"No measurement beats the theory" only without a beat; "not checked" where no run's
  summary has a declaration check (the synthetic runs here), never "all 0 checked runs"."""
  _, beaten = _rows([_summary("C3", 1, 0, 1000, "negmamba")])  # C3 needs rotations
  assert "- C3 at depth 1: beats theory" in beaten and "No measurement beats" not in beaten, beaten
  _, agreed = _rows([_summary("C2", 1, 0, 1000, "negmamba")])
  assert "No measurement beats the theory." in agreed, agreed
  assert "- Declaration check: not checked" in agreed and "of all 0" not in agreed, agreed


def test_a_profile_is_one_networks_and_lists_every_group_it_trained():
  """A hybrid stack's runs (`negmamba,aussm`) make a profile of their own, never rows of a
  layer's; a group beyond the ten (`--groups=D3`) is a row after them; a layer not registered
  here says so."""
  hybrid = _summary("S3", 2, 0, 1000, "negmamba,aussm")
  data = tracking_profile.profile_data([_summary("C2", 1, 0, 1000, "negmamba"),
                                        _summary("D3", 1, 0, 0, "negmamba"), hybrid])
  assert sorted(k[0] for k in data) == ["negmamba", "negmamba,aussm"], list(data)
  assert data[("negmamba", "", "profile_cpu")]["groups"] == ["C2", "D3"], data
  assert data[("negmamba,aussm", "", "profile_cpu")]["groups"] == ["S3"], data
  _, unknown = _rows([_summary("C2", 1, 0, 1000, "not_a_layer_here")])
  assert "(the layer is not registered here: load its plugin)" in unknown, unknown


def test_a_hybrid_stacks_profile_is_judged_at_its_own_depth_by_the_stacks_theory():
  """negmamba under aussm tracks S3 (its series: S3 -> A3 -> 1) but not A4 (A4 has no
  quotient of order 2: the signed layer leaves it whole); negmamba under deltanet has no theorem
  for A5. The overview reads `2 / 2`, `not at 2` with **beats** where a run tracked A4, `?`
  where nothing decides; the stack's section names both classes and judges by the stack."""
  runs = [_summary("S3", 2, s, 1000, "negmamba,aussm") for s in range(4)]
  runs += [_summary("A4", 2, s, 1000 if s == 0 else 20, "negmamba,aussm") for s in range(4)]
  runs += [_summary("A5", 2, 0, 0, "negmamba,deltanet")]
  report = tracking_profile.markdown(tracking_profile.profile_data(runs))
  overview = {g: [c.removesuffix(" |") for c in cells]
              for g, cells in _overview_rows(report).items()}
  assert overview["S3"] == ["2 / 2", "·"], overview
  assert overview["A4"] == ["2† / not at 2 **beats**", "·"], overview
  assert overview["A5"] == ["·", "✘ / ?"], overview
  head = next(line for line in report.splitlines() if line.startswith("| group | order | neg"))
  assert "(depth" not in head, f"a stack's own depth named as a restriction: {head}"
  stack = report.split("## negmamba,aussm ")[1].split("\n## ")[0]
  assert "Declared classes, bottom first: `signed_diagonal`, `unit_modulus_diagonal`" in stack
  rows = {line.split(" | ")[0][2:]: line for line in stack.splitlines() if line.startswith("| ")}
  assert rows["group"].endswith("| depth 2 | theory: the stack |"), rows["group"]
  assert rows["S3"].endswith("1000 (4/4) ✓ | 2 |"), rows["S3"]
  assert rows["A4"].endswith("1000 (1/4) ✗ **beats theory** | not at 2 |"), rows["A4"]
  other = report.split("## negmamba,deltanet ")[1]
  assert "No theorem decides this stack for A5" in other, other


def test_the_overview_reads_the_theorys_depth_at_the_runs_key_width():
  """As the layer's own table (test above): DeltaProduct's A5 at d_state 4 has a theory depth
  of 1, at d_state 2 (keys too narrow for A5's reflections) none."""
  for d_state, text in ((4, "✘ / 1"), (2, "✘ / ?")):
    data = tracking_profile.profile_data([_summary("A5", 1, 0, 0, "deltaproduct", d_state)])
    entry = tracking_profile.min_depth_entry(next(iter(data.values())), "A5")
    assert entry["text"] == text, (d_state, entry)


def _profile_command(tmp_path, *extra):
  return ["launch.profile", "--model=mamba", "--preset=tiny", "--groups=C2,D3", "--depths=1",
          f"--workdir={tmp_path}", "--quiet", *extra]


def test_a_profile_dry_run_lists_both_sweeps_hands_on_its_flags_and_writes_no_report(tmp_path):
  """--dry_run plans the profile's groups and each other group's sweep, then stops (no report:
  there are no runs); the profile's flags reach its sweeps (the sweep refuses --workers with
  Ray, so that refusal shows --workers arrived)."""
  p = launcher.run(_profile_command(tmp_path, "--dry_run"), timeout=300)
  assert p.returncode == 0, p.stderr[-2000:]
  assert "C2-mamba-L1-" in p.stdout and "D3-mamba-L1-" in p.stdout, p.stdout
  assert "C2xC2-" not in p.stdout, f"--groups=C2 planned C2xC2 too:\n{p.stdout}"
  assert not list(tmp_path.glob("profile_*")), list(tmp_path.iterdir())
  p = launcher.run(_profile_command(tmp_path, "--dry_run", "--workers=2", "--executor=ray"),
                   timeout=300)
  assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
  assert p.stderr.strip() == "error: --workers is for the local executor (Ray runs a task per " \
                             "group)", p.stderr[-2000:]


def test_a_hybrid_stacks_profile_dry_run_plans_the_ten_groups_at_its_own_depth(tmp_path):
  """launch.profile --model='negmamba, deltanet' (spaces as a user types them): every group of
  the profile at depth 2, run directories named as a stack's (`negmamba+deltanet`)."""
  p = launcher.run(["launch.profile", "--model=negmamba, deltanet", "--preset=tiny",
                    f"--workdir={tmp_path}", "--quiet", "--dry_run"], timeout=300)
  assert p.returncode == 0, p.stderr[-2000:]
  planned = [line.split()[0] for line in p.stdout.splitlines() if line.startswith("    ")]
  assert sorted(n.split("-")[0] for n in planned) == sorted(tracking_profile.GROUPS), p.stdout
  assert all("-negmamba+deltanet-L2-" in n for n in planned), planned


def test_a_failed_sweep_stops_the_profile_with_its_status(tmp_path):
  """A group that fails (a program that raises) makes its sweep exit 1: the profile exits 1
  too, before the next group's sweep and the report (which would read the failed runs)."""
  import os
  env = {**os.environ, "SSM_BENCH_FAULT": "group_start:1:raise"}
  p = launcher.run(_profile_command(tmp_path), env=env, timeout=300)
  assert p.returncode == 1, (p.returncode, p.stderr[-2000:])
  assert not list(tmp_path.glob("D3-*")), "the next sweep ran after a failed one"
  assert not list(tmp_path.glob("profile_*")), "a report was written after a failed sweep"


def test_a_class_without_a_theorem_is_judged_by_the_classes_it_includes_and_never_beats(
    monkeypatch):
  """A researcher's class with no theorem that includes complex_diagonal: its layer's depth-k
  stack tracks what k complex layers do (`≤ k` in the overview, ✓ and "below" where its runs
  fail there), and a success the included class could not reach is no "beats" (the wider
  class may do more: A5 stays `?`)."""
  from ssm_bench import registry
  from ssm_bench import theory
  registry.names()  # the built-ins registered before the copies
  monkeypatch.setattr(theory, "CLASSES", dict(theory.CLASSES))
  monkeypatch.setattr(registry, "_LAYERS", dict(registry._LAYERS))
  theory.register_class("wider", "a researcher's class", "no theorem of its own",
                        includes={"complex_diagonal": "decay and phase are among its transitions"})
  registry.register_layer("wide", lambda cfg, **kw: None, theory_class="wider")
  enough = tables.MIN_RUNS_AGAINST_THEORY
  runs = [_summary("C2", 1, 0, 1000, "wide"), _summary("S3", 1, 0, 1000, "wide"),
          *[_summary("D4", d, s, 0, "wide") for d in (1, 2) for s in range(enough)],
          _summary("A5", 1, 0, 1000, "wide"), _summary("C2", 1, 0, 1000, "aussm")]
  report = tracking_profile.markdown(tracking_profile.profile_data(runs))
  rows = _overview_rows(report)
  assert rows["C2"] == ["1† / 1", "1† / ≤ 1 |"], rows["C2"]  # columns: aussm, wide
  assert rows["S3"] == ["·", "1† / ≤ 2 |"], rows["S3"]
  assert rows["D4"] == ["·", "✘ / ≤ 2 **below** |"], rows["D4"]
  assert rows["A5"] == ["·", "1† / ? |"], rows["A5"]
  section = report.split("## wide")[1]
  assert "beats" not in section, section
  assert "- D4 at depth 2: below theory (best max_len 0, 0/4 runs reach 100; theory ✓)" in section
  assert "| S3 | 6 | 1000 (1/1) ? | = d1 | ≤ 2 |" in section, section
  assert "No theorem of its own for this class: its ✓ come from the classes it includes " \
         "(complex_diagonal, signed_diagonal, unit_modulus_diagonal, nonnegative_diagonal)" in \
         section, section
