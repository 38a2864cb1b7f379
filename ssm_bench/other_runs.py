"""Finished runs that no table reads: a task or a protocol that neither Table 2 nor another
table is for (a stream over a generating set, modular counting, flip-flop, a network started
from a construction outside the near-solution sweep, ...). They are listed per protocol, task
and stack with their best max_len, so that no stored run goes unreported.
"""
from __future__ import annotations

from ssm_bench import neighbours
from ssm_bench import tables
from tasks import groups

INTRO = ("Finished runs that neither Table 2 nor another table reads (their task or protocol has "
         "no table of its own). A row: the runs of one task and stack; the best max_len (`✘` "
         "below 100), (runs that reach 100 / runs), then, for a group's stream (uniform or over "
         "a generating set), whether the stack's classes can track the group (✓ expressible, ✗ "
         "not, ? no theorem); – for other tasks.")


def other_data(summaries) -> dict:
  """{protocol: {(task, stack): {"runs", "max_len", "successes", "theory"}}}, sorted; diverged
  runs count as runs with max_len 0."""
  out = {}
  for p, runs in tables.by_protocol(summaries).items():
    rows = {}
    for s in runs:
      rows.setdefault((s["config"]["task"], neighbours.stack_name(s["config"])), []).append(s)
    out[p] = {key: _entry(rows[key]) for key in sorted(rows)}
  return out


def _entry(runs) -> dict:
  lens = sorted((s["max_len"] if s.get("status") == "done" else 0 for s in runs), reverse=True)
  return {"runs": len(runs), "max_len": lens[0],
          "successes": sum(v >= tables.EXTRAPOLATES for v in lens), "theory": _theory(runs)}


def _theory(runs):
  """The stack's prediction for the group a task streams ('-' for a task that streams none)."""
  c = runs[0]["config"]
  name = c["task"].removesuffix("-gen")
  try:
    groups.get_group(name)
  except groups.GroupError:
    return "-"
  return tables.stack_prediction(c["model"], c["depth"], name, c.get("layer_kwargs", ""),
                                 tables.cell_width(runs))["expressible"]


def markdown(data: dict) -> str:
  lines = []
  for proto, rows in data.items():
    lines += [f"### Protocol: {proto}", "", "| task | stack | best max_len | theory |",
              "|---|---|---|---|"]
    for (task, stack), e in rows.items():
      theory = "–" if e["theory"] == "-" else tables.THEORY_MARK[e["theory"]]
      lines.append(f"| {task} | {stack} | {tables.cell(e['max_len'])} ({e['successes']}/"
                   f"{e['runs']}) | {theory} |")
    lines.append("")
  return "\n".join(lines)
