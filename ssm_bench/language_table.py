"""The formal-language table: measured length generalisation on lang-<name> tasks beside the
star-free verdict and each model's predicted verdict (from its class, language_theory.describe).
Built from run summaries only; a diverged run counts as a run that did not reach 100."""
from __future__ import annotations

import functools

from ssm_bench import evaluation
from ssm_bench import language_theory
from ssm_bench import neighbours
from ssm_bench import registry
from ssm_bench import state_widths
from ssm_bench.tables import CROSS, EXTRAPOLATES, THEORY_MARK as MARK, untrained_cell
from tasks import languages



def _language(task: str):
  """(language, target) of a lang- task name, or None."""
  if not task.startswith("lang-"):
    return None
  name = task[len("lang-"):]
  member = name.endswith("-member")
  return (name[:-len("-member")] if member else name), ("membership" if member else "next set")


READ_EVENT = "after_read"


def is_read_task(task: str) -> bool:
  """Flip-flop streams: scored at the positions after a read (Liu et al. 2023), since every
  other position is easy and in the sparse variant reads are 1% of them."""
  key = _language(task)
  return key is not None and languages.base_name(key[0]) == "flipflop_language"


def score(summary) -> tuple[float, bool]:
  """(value, success) of one run: on a flip-flop stream the accuracy at read positions (success
  above the max_len threshold, 0.9); elsewhere max_len over whole strings (`Task.whole_strings`:
  from seq_acc_curve, which every summary stores, so runs scored per position before are read
  the same way), success at >= 100. A run that did not finish (diverged) scores 0."""
  done = summary.get("status") == "done"
  if is_read_task(summary["config"]["task"]):
    acc = (summary.get("event_acc") or {}).get(READ_EVENT) if done else None
    acc = acc or 0.0
    return acc, acc > evaluation.THRESHOLD
  value = evaluation.max_len(summary["seq_acc_curve"]) if done else 0
  return value, value >= EXTRAPOLATES


def takes(summary) -> bool:
  """A lang- run of a language this version has (a stored run of one it lacks, from another
  version, is listed with the runs no table reads, not dropped)."""
  key = _language(summary["config"]["task"])
  return key is not None and _described(key[0]) is not None


@functools.lru_cache(maxsize=None)
def _described(language: str) -> dict | None:
  """language_theory.describe_language, or None for a language this version lacks."""
  try:
    return language_theory.describe_language(language)
  except languages.LanguageError:
    return None


def language_data(summaries) -> dict:
  """{(language, target): {"star_free", "subgroups", "cells": {(model, depth, layer_kwargs):
  entry}}}: runs of one layer at other kwargs are cells of their own (their class may differ)."""
  out = {}
  for s in summaries:
    key = _language(s["config"]["task"])
    d = _described(key[0]) if key else None
    if d is None:
      continue
    if key not in out:
      out[key] = {"language": key[0], "star_free": d["star_free"],
                  "subgroups": d["maximal_subgroups"], "cells": {}}
    c = s["config"]
    cell = out[key]["cells"].setdefault((c["model"], c["depth"], c.get("layer_kwargs", "")),
                                        {"scores": [], "width": 0})
    cell["scores"].append(score(s))
    # the widest state of the cell's runs, as Table 2's cells (`tables.cell_width`)
    cell["width"] = max(cell["width"], state_widths.state_width(c["model"], c,
                                                            c.get("layer_kwargs", "")))
    out[key]["reads"] = is_read_task(c["task"])
  for e in out.values():  # the theory's verdict for each cell's class, depth and width
    for (model, depth, kwargs), cell in e["cells"].items():
      cell["prediction"] = _prediction(e["language"], model, kwargs, depth, cell["width"])
  return dict(sorted(out.items()))


def _prediction(language: str, model: str, kwargs: str, depth: int,
                width: int | None) -> bool | None:
  classes = tuple(registry.theory_classes(model, depth, kwargs))
  p = (_class_prediction(language, classes[0], width) if len(set(classes)) == 1
       else _stack_prediction(language, classes, width))  # a hybrid: its classes together
  return language_theory.verdict_at(p, depth)


@functools.lru_cache(maxsize=None)
def _stack_prediction(language: str, classes: tuple, width: int | None) -> dict | None:
  return language_theory.stack_prediction(language, classes, width)


@functools.lru_cache(maxsize=None)
def _class_prediction(language: str, cls: str, width: int | None) -> dict | None:
  return language_theory.class_prediction(language, cls, width)


def predicted(task: str, model: str, kwargs: str = "", depth: int = 1,
              width: int | None = None) -> bool | None:
  """The table's prediction for a stack of `depth` layers of a model on a lang- task (✓ True,
  ✗ False, ? None; width: its state's, as `tables.cell_width`, None wide enough); None for a
  task that is not a language."""
  key = _language(task)
  return None if key is None else _prediction(key[0], model, kwargs, depth, width)


def verdict_by_layer(language: str) -> dict:
  """{layer: its class's verdict on the language ('yes', 'yes from depth 2', 'no', '?')} for
  every registered layer at its default kwargs, keys wide enough (`launch.info --language`:
  the counterpart of a group's minimal depth by layer)."""
  out = {}
  for name in registry.names():
    p = _class_prediction(language, registry.theory_class_of(name), None)
    verdict = {True: "yes", False: "no", None: "?"}[p["verdict"] if p else None]
    depth = (p or {}).get("min_depth", 1)
    out[name] = verdict + (f" from depth {depth}" if verdict == "yes" and depth > 1 else "")
  return out


def column(model: str, depth: int, kwargs: str = "") -> str:
  """A cell's column: `model xDEPTH`, with the layer's kwargs when the runs gave any."""
  return f"{neighbours.layer_label(model, kwargs)} x{depth}"


def _solved_at(entry, model: str, kwargs: str, depth: int) -> int | None:
  """The shallowest depth below `depth` at which a run of the model succeeded, if any."""
  scores = lambda d: entry["cells"].get((model, d, kwargs), {"scores": []})["scores"]
  return next((d for d in range(1, depth) if any(good for _, good in scores(d))), None)


def markdown(data: dict) -> str:
  columns = sorted({mc for e in data.values() for mc in e["cells"]})
  lines = ["| language | target | star-free | subgroups | "
           + " | ".join(column(*mc) for mc in columns) + " |",
           "|---|---|---|---|" + "---|" * len(columns)]
  for (name, target), e in data.items():
    cells = []
    for m, depth, kwargs in columns:
      c = e["cells"].get((m, depth, kwargs))
      if not c:  # skipped, a shallower stack succeeded (as in the profile), or not trained
        cells.append(untrained_cell(_solved_at(e, m, kwargs, depth)))
        continue
      best = max(v for v, _ in c["scores"])
      ok = sum(good for _, good in c["scores"])
      shown = f"{best:.2f}" if e["reads"] else (CROSS if best < EXTRAPOLATES else best)
      mark = MARK[c["prediction"]]
      cells.append(f"{shown} ({ok}/{len(c['scores'])}) {mark}")
    star_free = {True: "yes", False: "no", None: "not regular"}[e["star_free"]]
    lines.append(f"| {name} | {target} | {star_free} | "
                 f"{', '.join(e['subgroups']) or '-'} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


INTRO = ("A cell: the best max_len over whole strings (the longest L at which over 90% of the "
         "evaluation strings are right at every position up to L, Bhattamishra et al. 2020; "
         "`✘` below 100), (runs that reach 100 / runs); on the "
         "flip-flop rows the best accuracy at the positions after a read, (runs above 0.9 / "
         "runs); then the "
         "prediction for the model's class: ✓ predicted to be modelled, ✗ not, ? no theorem "
         "(non-negative diagonal: iff star-free, Sarrof et al. 2024; a class that cannot track a "
         "maximal subgroup of the syntactic monoid: ✗; a language whose monoid is a group: ✓ from the "
         "depth at which the class tracks that group; non-linear RNNs: ✓ on regular languages; "
         "counter languages (not regular): non-negative and signed diagonal ✓ with unbounded "
         "integer state values, Sarrof et al. 2024). Depth 2 is trained only where no depth-1 "
         "run reached 100 (`= d1`: not trained, depth 1 succeeded; `·`: not trained). A cell "
         "trains both rates at seed 0, and again at seed 1 where its verdict could rest on luck "
         "(one of the two succeeds, or they go against the prediction). "
         "`python -m launch.info --language=NAME` gives each language's sources.")
