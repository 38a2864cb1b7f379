"""Tables from stored run summaries only: Table 2 (paper layout), theory and paper side by side
(the neighbouring papers' tables are in `neighbours`).

Cells: the best max_len over every run of the cell (grid and seeds), shown as the number, or
'✘' below 100, with how many of the cell's runs extrapolate. A Table 2 pools only runs of one
protocol (preset, step budget, init, ...) and names it. Runs that are failed, diverged,
incomplete or unreadable are counted and listed; diverged runs count as runs that did not
extrapolate.
"""
from __future__ import annotations

import dataclasses
import json
import os

from ssm_bench import neighbours
from ssm_bench import plugins
from ssm_bench import registry
from ssm_bench import runs
from ssm_bench import state_widths
from ssm_bench import theory
from ssm_bench.config import (EXECUTION_FIELDS, NUMERICS_FIELDS, PROFILE_LABELS, TrainConfig,
                              preset_values)
from ssm_bench.paper import TABLE2_DEPTHS, TABLE2_GROUPS, TABLE2_MODELS
from tasks import groups

CROSS = "✘"
THEORY_MARK = {True: "✓", False: "✗", None: "?"}  # expressible, not, no theorem
EXTRAPOLATES = 100  # the paper's cross mark: below 100 counts as "did not extrapolate"
# A cell whose runs go against the theory (none extrapolates where it allows the cell, or some do
# where it rules it out) is settled only on at least this many runs: the CPU sweeps' second stages
# train more seeds below it (launch/sweeps.py) and the profile report calls it tentative.
MIN_RUNS_AGAINST_THEORY = 4
PAPER_MODELS = TABLE2_MODELS


@dataclasses.dataclass
class RunSet:
  good: list  # summaries with status done
  problems: list  # (run dir name, status or reason)
  diverged: list = dataclasses.field(default_factory=list)  # valid summaries, status diverged


def load(runs_dir: str, only=None) -> RunSet:
  """Every run directory under runs_dir (or only those named in `only`), sorted by name; never
  raises on a bad one."""
  good, problems, diverged = [], [], []
  names = sorted(n for n in os.listdir(runs_dir) if os.path.isdir(os.path.join(runs_dir, n))
                 and (only is None or n in only)) if os.path.isdir(runs_dir) else []
  for name in names:
    d = os.path.join(runs_dir, name)
    path = os.path.join(d, "summary.json")
    if not os.path.exists(path):
      if os.path.exists(os.path.join(d, "config.json")):
        problems.append((name, "incomplete (no summary.json)"))
      continue
    summary = runs.read_json(path)
    issues = runs.validate_summary(summary) if summary is not None else ["unreadable JSON"]
    if issues:
      problems.append((name, "corrupt: " + "; ".join(issues)))
    elif summary["status"] != "done":
      where = f" at step {summary.get('diverged_at')}" if summary["status"] == "diverged" else ""
      problems.append((name, summary["status"] + where))
      if summary["status"] == "diverged":
        diverged.append(summary)
    elif (summary.get("causal") or {}).get("ok") is False:  # (runs before the check: no field)
      problems.append((name, "its trained network reads ahead, so its curves measure no state "
                             "tracking: " + summary["causal"]["detail"]))
    else:
      good.append(summary)
  return RunSet(good, problems, diverged)


def stack_prediction(model: str, depth: int, group, layer_kwargs: str = "",
                     width: int | None = None) -> dict:
  """The theory's prediction from the stack's declared transition classes (registry records);
  a layer the registry does not know counts as class `unknown` (no theorem). width: the
  dimensions its state lives in as a width-conditioned class reads them (a householder layer's
  keys: `state_widths.state_width`), None: assumed wide enough."""
  return theory.prediction(registry.theory_classes(model, depth, layer_kwargs), group, width)


def cell_width(summaries) -> int | None:
  """The widest state among a cell's runs (`state_widths.state_width` of each run's config): the
  theory allows the cell if it allows one of them (a width only ever turns a claim into 'no
  theorem')."""
  return max((state_widths.state_width(s["config"]["model"], s["config"],
                                   s["config"].get("layer_kwargs", "")) for s in summaries),
             default=None)


def nested(runs_dir: str) -> list[tuple[str, int]]:
  """(directory, run count) of the directories under runs_dir that are not runs but hold runs:
  a sweep's or a profile's workdir inside `runs/`, which `load` does not read (it reads one
  level, so that one sweep's table is not mixed with another's)."""
  is_run = lambda d: any(os.path.exists(os.path.join(d, f))
                         for f in ("config.json", "summary.json"))
  out = []
  for name in sorted(os.listdir(runs_dir)) if os.path.isdir(runs_dir) else []:
    d = os.path.join(runs_dir, name)
    if os.path.isdir(d) and not is_run(d):
      n = sum(is_run(os.path.join(d, r)) for r in os.listdir(d))
      if n:
        out.append((d, n))
  return out


def load_plugins(summaries) -> list[str]:
  """Import the plugins the runs recorded, so their layers' classes are known; returns the
  one-line reasons for those that could not be loaded (their layers show `?`)."""
  wanted = sorted({s["config"].get("plugins", "") for s in summaries} - {""})
  return [why for why in (plugins.try_load(p) for p in wanted) if why]


def cell(value) -> str:
  if value is None:
    return "·"
  return CROSS if value < EXTRAPOLATES else str(value)


def untrained_cell(solved_at: int | None) -> str:
  """A staged cell with no runs: skipped because depth `solved_at` succeeded, or not trained."""
  return f"= d{solved_at}" if solved_at else "·"


def load_paper(path: str) -> dict:
  """The published Table 2; ValueError (one line) if it is not one."""
  with open(path) as f:
    try:
      paper = json.load(f)
    except ValueError as e:
      raise ValueError(f"not valid JSON ({e})") from None
  ok = (isinstance(paper, dict) and isinstance(paper.get("columns"), list)
        and all(isinstance(paper.get(f"depth_{d}", {}), dict) for d in TABLE2_DEPTHS))
  if not ok:
    raise ValueError("expected an object with 'columns' (model names) and 'depth_1'/'depth_2' "
                     "(group -> one value per column)")
  return paper


def _rows(summaries, preferred):
  seen = {s["config"]["task"] for s in summaries}
  return [g for g in preferred if g in seen] + sorted(seen - set(preferred))


# Config fields a Table 2 cell ranges over (its grid, seeds and the scan implementation); every
# other field is the protocol, and a cell only ever pools runs of one protocol. `plugins` only
# says where a model's code comes from, so a plugged-in layer trained on a preset gets a column
# in that preset's table, beside the built-in layers, rather than a table of its own.
CELL_FIELDS = ("task", "model", "depth", "d_state", "lr", "schedule", "seed",
               "plugins") + NUMERICS_FIELDS


def is_table2_run(config: dict) -> bool:
  """Trained from a random init with the length curriculum on one group's uniform stream (a
  hybrid stack is a column of its own at its depth): near-solution (analytic init), illusion
  (fixed length), parity and -gen runs belong to other tables."""
  if config.get("init_from_analytic", -1) >= 0:
    return False
  if config.get("preset") == neighbours.NEAR_SOLUTION:  # its default-init baseline
    return False
  if config.get("preset", "") in PROFILE_LABELS:  # the state-tracking profile's own report
    return False
  if config.get("curriculum_start", 2) >= config.get("train_length", 60):
    return False
  try:
    groups.get_group(config["task"])
  except groups.GroupError:
    return False
  return True


def protocol(config: dict, axes: tuple = CELL_FIELDS) -> str:
  """The protocol's name: its preset, plus every field outside the table's axes that differs
  from that preset's values (for the run's model, where the preset sizes models apart)."""
  preset = config.get("preset") or "paper"
  base = dataclasses.asdict(TrainConfig(**preset_values(preset, config.get("model"))))
  diffs = [f"{k}={v}" for k, v in sorted(config.items())
           if k not in axes + EXECUTION_FIELDS and k != "preset" and base.get(k) != v]
  return preset + (" + " + ", ".join(diffs) if diffs else "")


def takes(summary) -> bool:
  return is_table2_run(summary["config"])


def by_protocol(summaries, axes: tuple = CELL_FIELDS) -> dict:
  """{protocol (over a table's axes): its summaries}, protocols sorted: every table pools runs
  of one protocol only."""
  out = {}
  for s in summaries:
    out.setdefault(protocol(s["config"], axes), []).append(s)
  return dict(sorted(out.items()))


def table2_runs(summaries) -> dict:
  """{protocol: its Table 2 runs}, protocols sorted."""
  return by_protocol([s for s in summaries if takes(s)])


def table2_data(rs: RunSet, paper: dict | None = None) -> dict:
  """{protocol: {depth: {"models", "rows": {group: {model: entry}}}}} from Table 2 runs only.

  An entry holds the best max_len, the number of runs, how many extrapolate (max_len >= 100;
  diverged runs count as runs that did not) and every run's max_len."""
  load_plugins(rs.good + rs.diverged)
  return {p: _protocol_table(runs, paper) for p, runs in table2_runs(rs.good + rs.diverged).items()}


def _protocol_table(summaries, paper):
  kwargs = summaries[0]["config"].get("layer_kwargs", "")  # part of the protocol: one per table
  out = {}
  for depth in sorted({s["config"]["depth"] for s in summaries}):
    at = [s for s in summaries if s["config"]["depth"] == depth]
    models = [m for m in PAPER_MODELS if any(s["config"]["model"] == m for s in at)] + sorted(
        {s["config"]["model"] for s in at} - set(PAPER_MODELS))
    rows = {}
    for g in _rows(at, TABLE2_GROUPS):
      rows[g] = {}
      for m in models:
        cell = [s for s in at if s["config"]["task"] == g and s["config"]["model"] == m]
        lens = sorted((s["max_len"] for s in cell), reverse=True)
        entry = {"max_len": lens[0] if lens else None, "runs": len(lens),
                 "successes": sum(v >= EXTRAPOLATES for v in lens), "max_lens": lens,
                 "theory": stack_prediction(m, depth, g, kwargs,
                                            cell_width(cell))["expressible"]}
        if paper and m in paper["columns"] and g in paper.get(f"depth_{depth}", {}):
          entry["paper"] = paper[f"depth_{depth}"][g][paper["columns"].index(m)]
        rows[g][m] = entry
    out[depth] = {"models": models, "rows": rows}
  return out


def _extrapolates(e) -> bool:
  return e["max_len"] is not None and e["max_len"] >= EXTRAPOLATES


def agrees_with_paper(e) -> bool | None:
  """Whether we and the paper agree on "extrapolates or not"; None without both numbers."""
  if e.get("max_len") is None or "paper" not in e:
    return None
  return (e["paper"] is not None and e["paper"] >= EXTRAPOLATES) == _extrapolates(e)


def _flags(e) -> str:
  marks = []
  if e.get("max_len") is None:
    return ""
  ok = _extrapolates(e)
  if agrees_with_paper(e) is False:
    marks.append("≠paper")
  if e.get("theory") is False and ok:
    marks.append("beats theory")
  if e.get("theory") is True and not ok:
    marks.append("below theory")
  if e["runs"] == 1 or (ok and e["successes"] == 1):
    marks.append("one run")  # the verdict rests on a single run
  return " ".join(marks)


def cell_with_rate(e) -> str:
  """`1000 (7/27)`: the best max_len and how many runs of the cell extrapolate."""
  if e["max_len"] is None:
    return "·"
  return f"{cell(e['max_len'])} ({e['successes']}/{e['runs']})"


def markdown_table2(data: dict, compare: bool = False) -> str:
  out = []
  for proto, by_depth in data.items():
    out += [f"### Protocol: {proto}", ""]
    agree = [agrees_with_paper(e) for t in by_depth.values() for row in t["rows"].values()
             for e in row.values()]
    for depth, t in by_depth.items():
      out.append(f"**Depth {depth}**" + (" — ours / paper / theory (✓ expressible, ✗ not)"
                                         if compare else ""))
      out.append("")
      out.append("| group | " + " | ".join(t["models"]) + " |")
      out.append("|---|" + "---|" * len(t["models"]))
      for g, row in t["rows"].items():
        cells = []
        for m in t["models"]:
          e = row[m]
          if not compare:
            cells.append(cell_with_rate(e))
            continue
          paper = cell(e["paper"] or 0) if "paper" in e else "–"
          th = THEORY_MARK[e.get("theory")]
          flags = _flags(e)
          cells.append(f"{cell_with_rate(e)} / {paper} / {th}" + (f" **{flags}**" if flags else ""))
        out.append(f"| {g} | " + " | ".join(cells) + " |")
      out.append("")
    if compare:
      known = [a for a in agree if a is not None]
      out += [f"Agree with the paper on extrapolates (>= {EXTRAPOLATES}) or not: "
              f"{sum(known)} of {len(known)} cells with both numbers.", ""]
      differ = [(depth, g, m, e) for depth, t in by_depth.items() for g, row in t["rows"].items()
                for m, e in row.items() if agrees_with_paper(e) is False]
      if differ:
        out += ["Cells that disagree (ours with runs reaching 100 / runs; the paper):", ""]
        out += [f"- {g}, {m}, depth {depth}: ours {cell_with_rate(e)}, paper "
                f"{cell(e['paper'] or 0)}, theory {THEORY_MARK[e.get('theory')]}"
                for depth, g, m, e in differ] + [""]
  return "\n".join(out)


def latex_table2(data: dict) -> str:
  out = []
  for proto, by_depth in data.items():
    for depth, t in by_depth.items():
      cols = "l" + "c" * len(t["models"])
      out.append(f"% Protocol: {proto}. Depth {depth}: best max_len over grid and seeds "
                 "(runs that extrapolate / runs); \\ding{55} below 100")
      out.append(f"\\begin{{tabular}}{{{cols}}}")
      out.append("\\toprule")
      out.append("Task & " + " & ".join(m.replace("_", "\\_") for m in t["models"]) + " \\\\")
      out.append("\\midrule")
      for g, row in t["rows"].items():
        vals = [cell_with_rate(row[m]).replace(CROSS, "\\ding{55}").replace("·", "--")
                for m in t["models"]]
        name = g.replace("x", " \\times ")
        out.append(f"${name}$ & " + " & ".join(vals) + " \\\\")
      out.append("\\bottomrule")
      out.append("\\end{tabular}")
      out.append("")
  return "\n".join(out)


def problems_markdown(rs: RunSet) -> str:
  """The runs done; the diverged ones, which every table counts in its cells as runs that did
  not extrapolate, per model and protocol (their names where a group has at most 3); then each
  run no cell uses (failed, incomplete, corrupt, reading ahead), with why."""
  if not rs.problems:
    return f"All {len(rs.good)} runs finished (status done)." if rs.good else "No runs."
  diverged = {s["run"] for s in rs.diverged}
  unused = [(name, why) for name, why in rs.problems if name not in diverged]
  head = f"{len(rs.good)} runs done"
  if diverged:
    head += (f", {len(diverged)} diverged (a non-finite training loss: each counts in its cell "
             "as a run that did not extrapolate)")
  lines = [head + (f"; {len(unused)} not used in the cells:" if unused else ".")]
  by_kind = {}
  for s in rs.diverged:
    c = s["config"]
    layer = neighbours.layer_label(c["model"], c.get("layer_kwargs", ""))
    by_kind.setdefault(f"{layer} ({c.get('preset') or 'no preset'})", []).append(s)
  for kind, ss in sorted(by_kind.items()):
    steps = sorted(s.get("diverged_at") or 0 for s in ss)
    at = f"at step {steps[0]}" if steps[0] == steps[-1] else f"at steps {steps[0]}-{steps[-1]}"
    names = ": " + ", ".join(f"`{s['run']}`" for s in ss) if len(ss) <= 3 else ""
    lines.append(f"- diverged, {kind}: {len(ss)} run{'s' * (len(ss) != 1)} {at}{names}")
  lines += [f"- `{name}`: {why}" for name, why in unused]
  return "\n".join(lines)


EXTENDED = ("table2_cpu", "table2_ext_cpu")  # the paper models' protocol, then the baselines'


def extended_data(data: dict) -> dict:
  """The baselines' table (protocol table2_ext_cpu) with the paper models' table2_cpu cells of
  the same groups beside them, per depth: {depth: {"models", "rows"}}."""
  base, ext = (next((v for p, v in data.items() if p.split(" + ")[0] == name), None)
               for name in EXTENDED)
  if not ext:
    return {}
  out = {}
  for depth, t in ext.items():
    paper_t = (base or {}).get(depth, {"models": [], "rows": {}})
    rows = {g: {**paper_t["rows"].get(g, {}), **row} for g, row in t["rows"].items()}
    measured = [m for m in paper_t["models"] if any(
        rows[g].get(m, {}).get("max_len") is not None for g in rows)]  # on these groups
    out[depth] = {"models": measured + t["models"], "rows": rows}
  return out


def markdown_extended(ext: dict) -> str:
  lines = []
  for depth, t in ext.items():
    lines += [f"**Depth {depth}** — ours / theory (✓ expressible, ✗ not, ? no theorem)", "",
              "| group | " + " | ".join(t["models"]) + " |", "|---|" + "---|" * len(t["models"])]
    for g, row in t["rows"].items():
      cells = [f"{cell_with_rate(row[m])} / {THEORY_MARK[row[m].get('theory')]}" if m in row
               else "·" for m in t["models"]]
      lines.append(f"| {g} | " + " | ".join(cells) + " |")
    lines.append("")
  return "\n".join(lines)
