"""Where in a protocol's grid Table 2's successes come from, from stored summaries only.

For each grid axis (d_state, lr, schedule) on which a stack's runs in a protocol take more than
one value, per model and depth: how many runs reached the training length (the curriculum's
last stage) and how many extrapolated (max_len >= 100), pooled over the Table 2 groups the
theory allows that stack.
This is the "why" behind a cell that disagrees with the paper: a model that reaches the
training length but does not extrapolate at one learning rate and does at another points at
the learning rate; one that never reaches the training length points at the step budget.
Diverged runs count as runs that reached nothing.
"""
from __future__ import annotations

import functools

from ssm_bench import tables

AXES = ("d_state", "lr", "schedule")


@functools.lru_cache(maxsize=None)
def _allowed(model: str, depth: int, task: str, layer_kwargs: str, width: int) -> bool:
  return tables.stack_prediction(model, depth, task, layer_kwargs, width)["expressible"] is True


def _counts(s) -> tuple[int, int, int]:
  """(1, reached the training length, extrapolated) of one run."""
  c = s["config"]
  if s.get("status") != "done":
    return 1, 0, 0
  reached = (s.get("final_train_length") or 0) >= c["train_length"]
  return 1, int(reached), int((s.get("max_len") or 0) >= tables.EXTRAPOLATES)


def breakdown(summaries) -> dict:
  """{protocol: {axis: {(model, depth): {value: [runs, reached, extrapolated]}}}} over the
  stacks whose runs take more than one value of the axis; an axis (a protocol) with no such
  stack is left out."""
  out = {}
  for proto, runs in tables.table2_runs(summaries).items():
    allowed = [s for s in runs if _allowed(s["config"]["model"], s["config"]["depth"],
                                           s["config"]["task"],
                                           s["config"].get("layer_kwargs", ""),
                                           tables.cell_width([s]))]
    for axis in AXES:
      table = {}
      for s in allowed:
        c = s["config"]
        slot = table.setdefault((c["model"], c["depth"]), {}).setdefault(c[axis], [0, 0, 0])
        for i, v in enumerate(_counts(s)):
          slot[i] += v
      # a grid axis of the stack, not the preset sizing models apart (one value per stack)
      table = {k: v for k, v in table.items() if len(v) > 1}
      if table:
        out.setdefault(proto, {})[axis] = {k: dict(sorted(v.items())) for k, v in
                                           sorted(table.items(), key=_model_order)}
  return out


def _model_order(item):
  (model, depth), _ = item
  order = tables.PAPER_MODELS
  return (order.index(model) if model in order else len(order), model, depth)


def markdown(data: dict) -> str:
  out = []
  for proto, by_axis in data.items():
    for axis, table in by_axis.items():
      values = sorted({v for row in table.values() for v in row})
      out += [f"### Protocol: {proto}, by {axis}", "",
              "| model | depth | " + " | ".join(f"{axis} {v}" for v in values) + " |",
              "|---|---|" + "---|" * len(values)]
      for (model, depth), row in table.items():
        cells = ["/".join(str(n) for n in row[v][::-1]) if v in row else "·" for v in values]
        out.append(f"| {model} | {depth} | " + " | ".join(cells) + " |")
      out.append("")
  return "\n".join(out)


def as_json(data: dict) -> dict:
  return {proto: {axis: {f"{m} depth {d}": {str(v): dict(zip(("runs", "reached", "extrapolated"),
                                                              n)) for v, n in row.items()}
                         for (m, d), row in table.items()}
                  for axis, table in by_axis.items()}
          for proto, by_axis in data.items()}
