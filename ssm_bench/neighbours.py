"""Tables of the neighbouring papers' experiments, from stored run summaries only.

- parity with S4D, Mamba, their hybrid, negmamba and an RNN (paper 001, Table 1): training
  accuracy and accuracy at the evaluation length on the uniform and adversarial streams;
- minimal depth against training length (paper 002, Figure 3);
- training from near a construction (paper 000, Sec. 6: AUSSM on S3): max_len per noise scale,
  beside the same network from a default initialisation;
- offset prediction (paper 001, Sec. 5): accuracy inside the ISI, at its offset, at onsets and
  over all positions, per stream.

Sweeps tag their runs with a `preset` label (NEAR_SOLUTION) where the config alone would not
tell them apart from Table 2 runs.
"""
from __future__ import annotations

import statistics

from tasks import groups
from tasks import registry as task_registry

NEAR_SOLUTION = "near_solution"  # preset label of the near-solution sweep, baseline included
SOLVED = 0.9  # accuracy at the evaluation length that counts as solved


def layer_label(model: str, kwargs: str = "") -> str:
  """A layer as the tables name it: with its kwargs when the run gave any, so runs of one layer
  at other kwargs (another class, another size) are rows of their own, never pooled."""
  return f"{model} {kwargs}" if kwargs else model


def stack_name(c: dict) -> str:
  """A stack as the neighbour tables name it: a hybrid's list, else `model xDEPTH`."""
  label = layer_label(c["model"], c.get("layer_kwargs", ""))
  return label if "," in c["model"] else f"{label} x{c['depth']}"


def _last(curve: dict | None):
  return curve[max(curve, key=int)] if curve else None


def takes_parity(summary) -> bool:
  return summary["config"]["task"] == "parity"


def parity_data(summaries) -> dict:
  """{(stack, eval_length): {"runs", "train_acc": [...], stream: [acc at eval_length, ...]}}."""
  out = {}
  for s in summaries:
    c = s["config"]
    if not takes_parity(s):
      continue
    length = c.get("eval_length", 1000)
    slot = out.setdefault((stack_name(c), length), {"runs": 0, "train_acc": [], "diverged": 0})
    slot["runs"] += 1
    if s.get("status") == "diverged":  # a run that did not solve any stream
      slot["diverged"] += 1
      continue
    slot["train_acc"].append(s.get("final_train_acc"))
    streams = {s.get("eval_stream", "uniform"): s, **s.get("other_streams", {})}
    for name, res in streams.items():
      slot.setdefault(name, []).append(_last(res.get("acc_curve")))
  return out


def _rate(values, solved=SOLVED, diverged: int = 0) -> str:
  """Median accuracy of the measured runs, then (runs above `solved` / runs, diverged ones
  counted as runs that did not solve it)."""
  vals = [v for v in values if v is not None]
  if not vals:
    return f"· (0/{diverged})" if diverged else "·"
  return f"{statistics.median(vals):.3f} ({sum(v > solved for v in vals)}/{len(vals) + diverged})"


def parity_markdown(data: dict) -> str:
  """Paper 001's Table 1 layout, one row per stack and evaluation length."""
  streams = sorted({k for slot in data.values() for k in slot} - {"runs", "train_acc", "diverged"},
                   key=lambda n: (n != "uniform", n))
  lines = ["| model | runs | train accuracy | " + " | ".join(
      f"{n} at L" for n in streams) + " | L |", "|---|---|---|" + "---|" * len(streams) + "---|"]
  for (stack, length), slot in sorted(data.items()):
    tr = [v for v in slot["train_acc"] if v is not None]
    train = f"{statistics.median(tr):.3f}" if tr else "·"
    lines.append(f"| {stack} | {slot['runs']} | {train} | " + " | ".join(
        _rate(slot.get(n, []), diverged=slot.get("diverged", 0)) for n in streams)
        + f" | {length} |")
  return "\n".join(lines)


def _is_group(name: str) -> bool:
  try:
    groups.get_group(name)
    return True
  except groups.GroupError:
    return False


ILLUSION_ACC = 0.9  # paper 002, Fig. 3: a depth "solves" a length above this accuracy


def _illusion_acc(summary) -> float | None:
  """A fixed-length group run's held-out sequence accuracy (every position right) at its training
  length (older summaries: per-position accuracy); None for other runs or without one."""
  c = summary["config"]
  if c["curriculum_start"] != c["train_length"] or not _is_group(c["task"]):
    return None
  if summary.get("status") == "diverged":  # tried, and solved nothing
    return 0.0
  return summary.get("seq_acc_at_train_length", summary.get("acc_at_train_length"))


def illusion_solved(summary) -> bool | None:
  """Whether the run's accuracy (_illusion_acc) exceeds ILLUSION_ACC; None when it has none."""
  acc = _illusion_acc(summary)
  return None if acc is None else acc > ILLUSION_ACC


def takes_illusion(summary) -> bool:
  return _illusion_acc(summary) is not None


def illusion_data(summaries) -> dict:
  """{group: {model: {length: {"depth": the minimal depth that solved the length
  (illusion_solved) or None, "tried": the deepest stack run, "best": the best sequence
  accuracy}}}}."""
  out = {}
  for s in summaries:
    acc = _illusion_acc(s)
    if acc is None:
      continue
    c = s["config"]
    layer = layer_label(c["model"], c.get("layer_kwargs", ""))
    cell = out.setdefault(c["task"], {}).setdefault(layer, {}).setdefault(
        str(c["train_length"]), {"depth": None, "tried": 0, "best": 0.0})
    cell["tried"] = max(cell["tried"], c["depth"])
    cell["best"] = max(cell["best"], acc)
    if illusion_solved(s):
      cell["depth"] = min(cell["depth"] or c["depth"], c["depth"])
  return out


def illusion_markdown(data: dict) -> str:
  lines = []
  for g, by_model in sorted(data.items()):
    lengths = sorted({int(L) for m in by_model.values() for L in m})
    lines += [f"**{g}**", "", "| model | " + " | ".join(map(str, lengths)) + " |",
              "|---|" + "---|" * len(lengths)]
    for m, row in sorted(by_model.items()):
      cells = []
      for L in lengths:
        cell = row.get(str(L))
        cells.append("·" if cell is None else str(cell["depth"]) if cell["depth"] else
                     f"> {cell['tried']} ({cell['best']:.2f})")
      lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines.append("")
  return "\n".join(lines)


def takes_near_solution(summary) -> bool:
  return summary["config"].get("preset") == NEAR_SOLUTION


def near_solution_data(summaries) -> dict:
  """{(task, stack, train_length): {noise or None (default init): [max_len of each run]}} for
  runs tagged NEAR_SOLUTION; diverged runs count with max_len 0."""
  out = {}
  for s in summaries:
    c = s["config"]
    if not takes_near_solution(s):
      continue
    noise = c.get("init_from_analytic", -1.0)
    key = noise if noise >= 0 else None
    out.setdefault((c["task"], stack_name(c), c["train_length"]), {}).setdefault(key, []).append(
        s["max_len"] if s["status"] == "done" else 0)
  return out


def near_solution_markdown(data: dict) -> str:
  lines = []
  for (task, stack, train_length), by_noise in sorted(data.items()):
    far = 4 * train_length
    lines += [f"**{task}, {stack}**", "",
              f"| init | runs | best max_len | median | runs >= 100 | runs >= {far} (4x train) |",
              "|---|---|---|---|---|---|"]
    for noise in sorted(by_noise, key=lambda n: (n is None, n or 0)):
      lens = by_noise[noise]
      name = "default init" if noise is None else f"construction + noise {noise:g}"
      lines.append(f"| {name} | {len(lens)} | {max(lens)} | {statistics.median(lens):g} | "
                   f"{sum(v >= 100 for v in lens)} | {sum(v >= far for v in lens)} |")
    lines.append("")
  return "\n".join(lines)


OFFSET_EVENTS = ("in_isi", "offset", "onset", "iti")


def takes_offset(summary) -> bool:
  """An offset run with event accuracies (flip-flop languages store them too), or diverged."""
  return summary["config"]["task"] == "offset" and (
      summary.get("status") == "diverged" or "event_acc" in summary)


def offset_data(summaries) -> dict:
  """{stack: {stream: {"all" or event: [accuracy of each run]}}} for runs with event accuracies."""
  out = {}
  for s in summaries:
    if not takes_offset(s):
      continue
    streams = {s.get("eval_stream", "uniform"): s, **s.get("other_streams", {})}
    if s.get("status") == "diverged":
      streams = {name: {} for name in task_registry.get_task("offset").eval_streams}
    slot = out.setdefault(stack_name(s["config"]), {})
    for name, res in streams.items():
      row = slot.setdefault(name, {})
      per_pos = res.get("acc_per_position") or []  # a diverged run: None, counted as a run
      row.setdefault("all", []).append(sum(per_pos) / len(per_pos) if per_pos else None)
      for event, acc in res.get("event_acc", {}).items():
        row.setdefault(event, []).append(acc)
  return out


def offset_markdown(data: dict) -> str:
  lines = ["| model | stream | runs | all positions | " + " | ".join(OFFSET_EVENTS) + " |",
           "|---|---|---|---|" + "---|" * len(OFFSET_EVENTS)]
  for stack, by_stream in sorted(data.items()):
    for stream, row in by_stream.items():
      cells = [_median(row.get(k, [])) for k in ("all",) + OFFSET_EVENTS]
      lines.append(f"| {stack} | {stream} | {len(row.get('all', []))} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def _median(values) -> str:
  vals = [v for v in values if v is not None]
  return f"{statistics.median(vals):.3f}" if vals else "·"
