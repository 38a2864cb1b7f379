"""Tables from stored run summaries only: Table 2 (paper layout), theory and paper side by side,
the illusion depth table, parity on uniform vs adversarial streams.

Cells: the best max_len over every run of the cell (grid and seeds); shown as the number, or
'✘' below 100. Runs that are failed, diverged, incomplete or unreadable are counted and listed.
"""
from __future__ import annotations

import dataclasses
import json
import os

from ssm_bench import runs
from ssm_bench import theory

CROSS = "✘"
EXTRAPOLATES = 100  # the paper's cross mark: below 100 counts as "did not extrapolate"
PAPER_MODELS = ("mamba", "negmamba", "simple_aussm", "aussm", "rnn")


@dataclasses.dataclass
class RunSet:
  good: list  # summaries with status done
  problems: list  # (run dir name, status or reason)


def load(runs_dir: str) -> RunSet:
  """Every run directory under runs_dir, sorted by name; never raises on a bad one."""
  good, problems = [], []
  names = sorted(n for n in os.listdir(runs_dir) if os.path.isdir(os.path.join(runs_dir, n))) \
      if os.path.isdir(runs_dir) else []
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
    else:
      good.append(summary)
  return RunSet(good, problems)


def cell(value) -> str:
  if value is None:
    return "·"
  return CROSS if value < EXTRAPOLATES else str(value)


def best(summaries, **match) -> int | None:
  """Best max_len among summaries whose config matches every key=value; None if none."""
  vals = [s["max_len"] for s in summaries
          if all(s["config"].get(k) == v for k, v in match.items())]
  return max(vals) if vals else None


def load_paper(path: str) -> dict:
  with open(path) as f:
    return json.load(f)


def _rows(summaries, preferred):
  seen = {s["config"]["task"] for s in summaries}
  return [g for g in preferred if g in seen] + sorted(seen - set(preferred))


def table2_data(rs: RunSet, paper: dict | None = None) -> dict:
  """{depth: {group: {model: {...}}}} for every (group, model, depth) that has runs."""
  from launch.sweeps import TABLE2_GROUPS
  summaries = [s for s in rs.good if "," not in s["config"]["model"]]
  out = {}
  for depth in sorted({s["config"]["depth"] for s in summaries}):
    at = [s for s in summaries if s["config"]["depth"] == depth]
    models = [m for m in PAPER_MODELS if any(s["config"]["model"] == m for s in at)] + sorted(
        {s["config"]["model"] for s in at} - set(PAPER_MODELS))
    rows = {}
    for g in _rows(at, TABLE2_GROUPS):
      rows[g] = {}
      for m in models:
        runs_here = [s for s in at if s["config"]["task"] == g and s["config"]["model"] == m]
        ours = max((s["max_len"] for s in runs_here), default=None)
        entry = {"max_len": ours, "runs": len(runs_here)}
        try:
          entry["theory"] = theory.prediction(m, depth, g)["expressible"]
        except Exception:  # a task that is not a group (parity is C2; flipflop has no theory)
          entry["theory"] = theory.prediction(m, depth, "C2")["expressible"] if g == "parity" else None
        if paper and m in paper["columns"] and g in paper.get(f"depth_{depth}", {}):
          pv = paper[f"depth_{depth}"][g][paper["columns"].index(m)]
          entry["paper"] = pv
        rows[g][m] = entry
    out[depth] = {"models": models, "rows": rows}
  return out


def _flags(e) -> str:
  marks = []
  ours = e.get("max_len")
  if ours is None:
    return ""
  ok = ours >= EXTRAPOLATES
  if "paper" in e and (e["paper"] is not None) != ok:
    marks.append("≠paper")
  if e.get("theory") is False and ok:
    marks.append("beats theory")
  if e.get("theory") is True and not ok:
    marks.append("below theory")
  return " ".join(marks)


def markdown_table2(data: dict, compare: bool = False) -> str:
  out = []
  for depth, t in data.items():
    out.append(f"**Depth {depth}**" + (" — ours / paper / theory (✓ expressible, ✗ not)" if compare else ""))
    out.append("")
    out.append("| group | " + " | ".join(t["models"]) + " |")
    out.append("|---|" + "---|" * len(t["models"]))
    for g, row in t["rows"].items():
      cells = []
      for m in t["models"]:
        e = row[m]
        if not compare:
          cells.append(cell(e["max_len"]))
          continue
        paper = cell(e["paper"] or 0) if "paper" in e else "–"
        th = {True: "✓", False: "✗", None: "?"}[e.get("theory")]
        flags = _flags(e)
        cells.append(f"{cell(e['max_len'])} / {paper} / {th}" + (f" **{flags}**" if flags else ""))
      out.append(f"| {g} | " + " | ".join(cells) + " |")
    out.append("")
  return "\n".join(out)


def latex_table2(data: dict) -> str:
  out = []
  for depth, t in data.items():
    cols = "l" + "c" * len(t["models"])
    out.append(f"% Depth {depth}: best max_len over grid and seeds; \\ding{{55}} below 100")
    out.append(f"\\begin{{tabular}}{{{cols}}}")
    out.append("\\toprule")
    out.append("Task & " + " & ".join(m.replace("_", "\\_") for m in t["models"]) + " \\\\")
    out.append("\\midrule")
    for g, row in t["rows"].items():
      vals = [cell(row[m]["max_len"]).replace(CROSS, "\\ding{55}").replace("·", "--")
              for m in t["models"]]
      name = g.replace("x", " \\times ")
      out.append(f"${name}$ & " + " & ".join(vals) + " \\\\")
    out.append("\\bottomrule")
    out.append("\\end{tabular}")
    out.append("")
  return "\n".join(out)


def illusion_data(rs: RunSet) -> dict:
  """{group: {model: {length: minimal depth with acc at the training length > 0.9, or None}}}."""
  out = {}
  for s in rs.good:
    c = s["config"]
    if c["curriculum_start"] != c["train_length"]:
      continue
    acc = s.get("acc_at_train_length")
    if acc is None:
      continue
    slot = out.setdefault(c["task"], {}).setdefault(c["model"], {})
    key = str(c["train_length"])
    if acc > 0.9:
      slot[key] = min(slot.get(key) or c["depth"], c["depth"])
    else:
      slot.setdefault(key, None)
  return out


def parity_streams_data(rs: RunSet) -> dict:
  """{model stack: {"uniform": best max_len, "adversarial": best max_len}} for parity runs."""
  out = {}
  for s in rs.good:
    c = s["config"]
    if c["task"] != "parity":
      continue
    name = c["model"] if "," in c["model"] else f"{c['model']} x{c['depth']}"
    slot = out.setdefault(name, {"uniform": 0, "adversarial": 0})
    slot["uniform"] = max(slot["uniform"], s["max_len"])
    adv = s.get("other_streams", {}).get("adversarial", {}).get("max_len", 0)
    slot["adversarial"] = max(slot["adversarial"], adv)
  return out


def problems_markdown(rs: RunSet) -> str:
  if not rs.problems:
    return f"All {len(rs.good)} runs finished (status done)."
  lines = [f"{len(rs.good)} runs done; {len(rs.problems)} not used in the cells:"]
  lines += [f"- `{name}`: {why}" for name, why in rs.problems]
  return "\n".join(lines)


def sweep_table(runs_dir: str) -> str:
  """The table a sweep prints when it finishes."""
  rs = load(runs_dir)
  parts = [markdown_table2(table2_data(rs))]
  par = parity_streams_data(rs)
  if par:
    parts.append("| parity | uniform max_len | adversarial max_len |\n|---|---|---|")
    parts += [f"| {k} | {cell(v['uniform'])} | {cell(v['adversarial'])} |" for k, v in par.items()]
  parts.append(problems_markdown(rs))
  return "\n".join(parts)
