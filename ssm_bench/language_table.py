"""The formal-language table: measured length generalisation on lang-<name> tasks beside the
star-free verdict and each model's predicted verdict (from its class, language_theory.describe).
Built from run summaries only; a diverged run counts as a run that did not reach 100."""
from __future__ import annotations

from ssm_bench import language_theory
from ssm_bench import registry
from ssm_bench.tables import CROSS, EXTRAPOLATES, THEORY_MARK as MARK
from tasks import languages



def _language(task: str):
  """(language, target) of a lang- task name, or None."""
  if not task.startswith("lang-"):
    return None
  name = task[len("lang-"):]
  member = name.endswith("-member")
  return (name[:-len("-member")] if member else name), ("membership" if member else "next set")


def language_data(summaries) -> dict:
  """{(language, target): {"star_free", "subgroups", "cells": {(model, depth): entry}}}."""
  out = {}
  for s in summaries:
    key = _language(s["config"]["task"])
    if key is None:
      continue
    if key not in out:
      try:
        d = language_theory.describe_language(key[0])
      except languages.LanguageError:
        continue
      out[key] = {"star_free": d["star_free"], "subgroups": d["maximal_subgroups"],
                  "predictions": d["predictions"], "cells": {}}
    c = s["config"]
    cell = out[key]["cells"].setdefault((c["model"], c["depth"]), {"max_lens": []})
    cell["max_lens"].append(s["max_len"] if s.get("status") == "done" else 0)
  return dict(sorted(out.items()))


def _prediction(entry, model: str, kwargs: str = "") -> bool | None:
  cls = registry.theory_class_of(model, kwargs).partition(":")[0]
  p = entry["predictions"].get(cls)
  return p["verdict"] if p else None


def markdown(data: dict) -> str:
  columns = sorted({mc for e in data.values() for mc in e["cells"]})
  lines = ["| language | target | star-free | subgroups | "
           + " | ".join(f"{m} x{d}" for m, d in columns) + " |",
           "|---|---|---|---|" + "---|" * len(columns)]
  for (name, target), e in data.items():
    cells = []
    for m, depth in columns:
      c = e["cells"].get((m, depth))
      if not c:
        cells.append("·")
        continue
      best = max(c["max_lens"])
      ok = sum(v >= EXTRAPOLATES for v in c["max_lens"])
      cells.append(f"{CROSS if best < EXTRAPOLATES else best} ({ok}/{len(c['max_lens'])}) "
                   f"{MARK[_prediction(e, m)]}")
    star_free = {True: "yes", False: "no", None: "not regular"}[e["star_free"]]
    lines.append(f"| {name} | {target} | {star_free} | "
                 f"{', '.join(e['subgroups']) or '-'} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


INTRO = ("A cell: the best max_len (`✘` below 100), (runs that reach 100 / runs), then the "
         "prediction for the model's class: ✓ predicted to be modelled, ✗ not, ? no theorem "
         "(non-negative diagonal: iff star-free, Sarrof et al. 2024; a class that cannot track a "
         "maximal subgroup of the syntactic monoid: ✗; non-linear RNNs: ✓ on regular languages; "
         "counter languages (not regular): non-negative and signed diagonal ✓ with unbounded "
         "integer state values, Sarrof et al. 2024). Depth 2 is trained only where no depth-1 "
         "run reached 100 (`·` otherwise). "
         "`python -m launch.info --language=NAME` gives each language's sources.")
