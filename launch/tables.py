"""Regenerate the tables (and figures) from stored run summaries; trains nothing.

  python -m launch.tables --runs=results/runs --out=results
  python -m launch.tables --runs=results/runs --format=json
"""
from __future__ import annotations

import os

from absl import flags

from launch import common
from ssm_bench import figures
from ssm_bench import tables

_RUNS = flags.DEFINE_string("runs", "results/runs", "Directory of run directories.")
_OUT = flags.DEFINE_string("out", None, "Where to write the tables and figures.")
_FORMAT = flags.DEFINE_enum("format", "files", ["files", "json", "markdown"],
                            "files: write under --out; json/markdown: print to stdout.")
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
  return {"runs_dir": runs_dir, "rs": rs, "paper": paper,
          "table2": tables.table2_data(rs, paper), "illusion": tables.illusion_data(rs),
          "parity": tables.parity_streams_data(rs)}


def render(data: dict) -> dict:
  """File name -> text; deterministic for the same summaries."""
  rs = data["rs"]
  md = ["# Table 2: longest length with accuracy above 90% (best over grid and seeds)", "",
        "Built only from run summaries. A cell: the best max_len over the grid and seeds, `✘` "
        "below 100, then (runs that reach 100 / runs); `·`: no run. One table per protocol.", "",
        tables.markdown_table2(data["table2"]), "## Runs not in the cells", "",
        tables.problems_markdown(rs), ""]
  # the comparison is a separate file, so the plain table keeps the paper's layout
  cmp = ["# Table 2 with the paper and the theory", "",
         "Cell: ours / paper / theory. `≠paper`: we and the paper disagree on whether the model "
         "extrapolates (max_len >= 100). `beats theory` / `below theory`: a measurement past or short "
         "of what the model family can express at that depth.", ""]
  if data["paper"] and data["paper"].get("row_notes"):
    cmp += [f"Note on {k}: {v}" for k, v in data["paper"]["row_notes"].items()] + [""]
  cmp += [tables.markdown_table2(data["table2"], compare=True)]
  files = {"table2.md": "\n".join(md), "table2.tex": tables.latex_table2(data["table2"]),
           "table2_compare.md": "\n".join(cmp)}
  if data["illusion"]:
    lines = ["# Minimal depth reaching > 90% accuracy at each training length", ""]
    for g, by_model in data["illusion"].items():
      lengths = sorted({int(L) for m in by_model.values() for L in m})
      lines += [f"**{g}**", "", "| model | " + " | ".join(map(str, lengths)) + " |",
                "|---|" + "---|" * len(lengths)]
      for m, row in sorted(by_model.items()):
        lines.append(f"| {m} | " + " | ".join(
            str(row.get(str(L))) if row.get(str(L)) else "–" for L in lengths) + " |")
      lines.append("")
    files["illusion.md"] = "\n".join(lines)
  if data["parity"]:
    lines = ["# Parity: max_len on uniform vs adversarial (0^k 1^m)^* streams", "",
             "| stack | uniform | adversarial |", "|---|---|---|"]
    lines += [f"| {k} | {tables.cell(v['uniform'])} | {tables.cell(v['adversarial'])} |"
              for k, v in sorted(data["parity"].items())]
    files["parity.md"] = "\n".join(lines) + "\n"
  return files


def as_json(data: dict) -> dict:
  rs = data["rs"]
  return {"table2": {p: {str(k): v for k, v in t.items()} for p, t in data["table2"].items()},
          "illusion": data["illusion"],
          "parity": data["parity"], "runs_done": len(rs.good),
          "problems": [{"run": n, "reason": r} for n, r in rs.problems]}


def main(argv):
  del argv
  data = build(_RUNS.value, _PAPER.value)
  if _FORMAT.value == "json":
    common.print_json(as_json(data))
    return
  files = render(data)
  if _FORMAT.value == "markdown" or not _OUT.value:
    print(files["table2.md"])
    return
  try:
    os.makedirs(_OUT.value, exist_ok=True)
    for name, text in files.items():
      with open(os.path.join(_OUT.value, name), "w") as f:
        f.write(text)
    written = sorted(files)
    if _FIGURES.value:
      written += figures.write_curves(data["rs"], _OUT.value)
  except OSError as e:
    raise common.UsageError(f"cannot write to --out={_OUT.value}: {e.strerror or e}") from None
  print(f"wrote {', '.join(written)} to {_OUT.value} from {len(data['rs'].good)} runs "
        f"({len(data['rs'].problems)} listed as not done)")


if __name__ == "__main__":
  common.run_main(main)
