"""Regenerate the tables (and figures) from stored run summaries; trains nothing.

  python -m launch.tables --runs=results/runs --out=results
  python -m launch.tables --runs=results/runs --format=json
"""
from __future__ import annotations

import os
import sys

from absl import flags

from launch import common
from ssm_bench import figures
from ssm_bench import grid_breakdown
from ssm_bench import language_table
from ssm_bench import report
from ssm_bench import tables

_RUNS = flags.DEFINE_string("runs", "results/runs", "Directory of run directories.")
_OUT = flags.DEFINE_string("out", None, "Where to write the tables and figures.")
_FORMAT = flags.DEFINE_enum("format", "files", ["files", "json", "markdown"],
                            "files: write under --out; json/markdown: print to stdout (markdown: "
                            "Table 2, then every other table the runs fill).")
_PAPER = flags.DEFINE_string("paper", None, "Paper Table 2 JSON (default results/paper_table2.json).")
_FIGURES = flags.DEFINE_bool("figures", True, "Also write PNG figures (needs matplotlib).")


def default_paper_path() -> str:
  here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  return os.path.join(here, "results", "paper_table2.json")


def build(runs_dir: str, paper_path: str | None) -> dict:
  if not os.path.isdir(runs_dir):
    raise common.UsageError(f"--runs={runs_dir} is not a directory")
  paper = None
  path = paper_path or default_paper_path()
  if paper_path and not os.path.isfile(paper_path):
    raise common.UsageError(f"--paper={paper_path} is not a file")
  if os.path.isfile(path):
    try:
      paper = tables.load_paper(path)
    except (OSError, ValueError) as e:
      raise common.UsageError(f"cannot read paper table {path}: {e}") from None
  rs = tables.load(runs_dir)
  common.load_plugins()
  finished = rs.good + rs.diverged
  unloaded = tables.load_plugins(finished)
  return {"unloaded_plugins": unloaded, "runs_dir": runs_dir, "rs": rs, "paper": paper,
          "table2": tables.table2_data(rs, paper), "grid": grid_breakdown.breakdown(finished),
          **{t.key: data for t, data in report.build(finished).items()}}


# where no run is a Table 2 run (tables.is_table2_run), rather than a title over nothing
NO_TABLE2 = ("No Table 2 runs (a group's uniform stream, trained from a random init with the "
             "length curriculum).\n")


def render(data: dict) -> dict:
  """File name -> text; deterministic for the same summaries."""
  rs = data["rs"]
  md = ["# Table 2: longest length with accuracy above 90% (best over grid and seeds)", "",
        "Built only from run summaries. A cell: the best max_len over the grid and seeds, `✘` "
        "below 100, then (runs that reach 100 / runs); `·`: no run. One table per protocol.", "",
        tables.markdown_table2(data["table2"]) or NO_TABLE2, "## Runs not in the cells", "",
        tables.problems_markdown(rs), ""]
  if data["other"]:
    n = sum(e["runs"] for rows in data["other"].values() for e in rows.values())
    md[-1:] = ["", f"{n} finished run{'s' * (n != 1)} in no table's cells (a task or protocol no "
               "table reads): other_runs.md.", ""]
  # the comparison is a separate file, so the plain table keeps the paper's layout
  cmp = ["# Table 2 with the paper and the theory", "",
         "Cell: ours / paper / theory. `≠paper`: we and the paper disagree on whether the model "
         "extrapolates (max_len >= 100). `beats theory` / `below theory`: a measurement past or short "
         "of what the model family can express at that depth.", ""]
  if data["paper"] and data["paper"].get("row_notes"):
    cmp += [f"Note on {k}: {v}" for k, v in data["paper"]["row_notes"].items()] + [""]
  cmp += [tables.markdown_table2(data["table2"], compare=True) or NO_TABLE2]
  if data["grid"]:
    cmp += ["## Where the successes come from in the grid", "",
            "Per grid axis on which a stack's runs vary: extrapolated (max_len >= 100) / reached "
            "the training length / runs, pooled over the groups the theory allows the stack at "
            "that depth (`ssm_bench/grid_breakdown.py`). Reaching the training length without "
            "extrapolating is a fit that does not generalize; not reaching it, a curriculum "
            "that ran out of steps.", "", grid_breakdown.markdown(data["grid"])]
  files = {"table2.md": "\n".join(md), "table2.tex": tables.latex_table2(data["table2"]),
           "table2_compare.md": "\n".join(cmp)}
  if ext := tables.extended_data(data["table2"]):
    files["table2_extended.md"] = "\n".join([
        "# Table 2's C2, S3 and A5 rows with the baselines (not the paper's Table 2)", "",
        "The paper's models from protocol table2_cpu, the baselines (lstm, gru, deltanet, "
        "deltaproduct, transformer) from protocol table2_ext_cpu (the same values). Cell: best "
        "max_len, (runs that reach 100 / runs), then the theory's verdict for the layer's "
        "class.", "", tables.markdown_extended(ext)])
  for t in report.TABLES + (report.OTHER,):
    if data[t.key]:
      notes = ([f"Not loaded (theory shown as ?): {why}" for why in data["unloaded_plugins"]]
               if t.key == "profile" else [])
      files[t.file] = report.file_text(t, data[t.key], notes)
  return files


def as_json(data: dict) -> dict:
  rs = data["rs"]
  return {"table2": {p: {str(k): v for k, v in t.items()} for p, t in data["table2"].items()},
          "grid": grid_breakdown.as_json(data["grid"]),
          "illusion": data["illusion"],
          "parity": {p: {f"{stack} at {length}": slot for (stack, length), slot in d.items()}
                     for p, d in data["parity"].items()},
          "near_solution": {p: {f"{task} {stack} (train {length})": {
              "default init" if k is None else f"noise {k:g}": v for k, v in by_noise.items()}
              for (task, stack, length), by_noise in d.items()}
              for p, d in data["near_solution"].items()},
          "offset": data["offset"], "runs_done": len(rs.good),
          "languages": {p: {f"{lang} ({target})": {
              **{k: v for k, v in entry.items() if k != "cells"},
              "cells": {language_table.column(*mc): c for mc, c in entry["cells"].items()}}
              for (lang, target), entry in d.items()} for p, d in data["languages"].items()},
          "other": {p: {f"{task} {stack}": e for (task, stack), e in rows.items()}
                    for p, rows in data["other"].items()},
          "profile": [{**{k: v for k, v in p.items() if k != "cells"},
                       "cells": {g: {str(d): e for d, e in row.items()}
                                 for g, row in p["cells"].items()}}
                      for p in data["profile"].values()],
          "problems": [{"run": n, "reason": r} for n, r in rs.problems]}


def main(argv):
  del argv
  data = build(_RUNS.value, _PAPER.value)
  unread = tables.nested(_RUNS.value)
  if unread:  # e.g. --runs=runs, where runs/smoke and runs/profile hold the sweeps' runs
    where = ", ".join(f"{d} ({n} run{'s' * (n != 1)})" for d, n in unread)
    print(f"note: not read: {where}; --runs reads the run directories directly in it "
          f"(pass --runs={unread[0][0]})", file=sys.stderr)
  for why in data["unloaded_plugins"]:  # said where it is seen, not only inside profile.md
    print(f"note: not loaded, so the theory of its runs' layers reads ?: {why}", file=sys.stderr)
  empty = not unread and not data["rs"].good and not data["rs"].problems  # a mistyped --runs

  def empty_note():  # once the output is made: a write that fails is its one error line
    if empty:
      print(f"note: no run directories in {_RUNS.value} (a run directory holds config.json or "
            "summary.json): the tables are empty", file=sys.stderr)

  if _FORMAT.value == "json":
    empty_note()
    common.print_json(as_json(data))
    return
  files = render(data)
  if _FORMAT.value == "markdown" or not _OUT.value:  # Table 2, then every other table filled
    empty_note()
    print("\n".join([files["table2.md"]] + [files[t.file] for t in report.TABLES + (report.OTHER,)
                                             if t.file in files]))
    return
  try:
    os.makedirs(_OUT.value, exist_ok=True)
    for name, text in files.items():
      with open(os.path.join(_OUT.value, name), "w") as f:
        f.write(text)
    written = sorted(files)
    if _FIGURES.value:
      written += figures.write_curves(data["rs"], _OUT.value)
      written += figures.write_examples(data["rs"], _OUT.value)
      written += figures.write_illusions(data["illusion"], _OUT.value)
      written += figures.write_profiles(data["profile"], _OUT.value)
      written += figures.write_profile_overview(data["profile"], _OUT.value)
  except OSError as e:
    raise common.UsageError(f"cannot write to --out={_OUT.value}: {e.strerror or e}") from None
  empty_note()
  print(f"wrote {', '.join(written)} to {_OUT.value} from {len(data['rs'].good)} runs "
        f"({len(data['rs'].problems)} listed as not done)")


if __name__ == "__main__":
  common.run_main(main)
