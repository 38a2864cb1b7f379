"""A layer's state-tracking profile, from stored run summaries only.

Per group and depth: the best measured max_len with how many runs reach 100, beside what the
theory predicts for the layer's declared transition class, and the cells where the two disagree
("beats theory": a measurement the class's theorem says is impossible; "below theory": the
class can express the group at that depth, but no run learned it). A depth is not trained once a
shallower stack of the same group extrapolated (the profile sweep's stages); such a cell reads
`= dK`, solved at depth K. The declaration check of every run (its summary's `declaration`) is
reported too: a layer whose transitions leave its declared set is flagged.

A hybrid stack (`negmamba,deltanet`) has a profile too, at its one depth (the length of its
list): the groups it tracks beside what the theory says of that stack, as its card does.
"""
from __future__ import annotations

from ssm_bench import analytic
from ssm_bench import neighbours
from ssm_bench import registry
from ssm_bench.tables import (CROSS, EXTRAPOLATES, MIN_RUNS_AGAINST_THEORY, THEORY_MARK as MARK,
                              cell_width, protocol, untrained_cell)
from ssm_bench import theory
from ssm_bench.config import NUMERICS_FIELDS, PROFILE_LABELS
from tasks import groups as groups_lib

# Groups that separate the transition classes (SPEC 7): a sign (C2) from a rotation (C3), the
# Abelian products, the non-Abelian 2-groups D4 and Q8 (two signed layers suffice), derived
# length 2 (S3, A4) and 3 (S4), and a non-solvable group (A5).
GROUPS = ("C2", "C3", "C2xC2", "C6", "D4", "Q8", "S3", "A4", "S4", "A5")
DEPTHS = (1, 2, 3)


def depths_of(model: str) -> tuple:
  """The depths a profile of `model` trains: a layer's, DEPTHS; a hybrid stack's, its own."""
  return (model.count(",") + 1,) if "," in model else DEPTHS


def is_profile_run(config: dict) -> bool:
  return config.get("preset", "") in PROFILE_LABELS


# A profile's axes; any other field that differs from the preset (a width, a step budget) makes
# another profile, so runs at two widths never pool into one verdict. `plugins` only says where
# the model's code comes from: a plugged-in layer's profile is its preset's, like a built-in's.
AXES = ("task", "depth", "model", "layer_kwargs", "plugins", "lr", "schedule",
        "seed") + NUMERICS_FIELDS


def _key(c: dict) -> tuple:
  return (c["model"], c.get("layer_kwargs", ""), protocol(c, AXES))


def takes(summary) -> bool:
  """A profile run (of a layer, or of a hybrid stack at its own depth)."""
  return is_profile_run(summary["config"])


def profile_data(summaries) -> dict:
  """{(model, layer_kwargs, protocol): profile} from finished runs (done or diverged: a
  diverged run counts as a run that did not extrapolate)."""
  by_model = {}
  for s in summaries:
    if takes(s):
      by_model.setdefault(_key(s["config"]), []).append(s)
  return {k: _one(k, runs) for k, runs in sorted(by_model.items())}


def _one(key, runs) -> dict:
  model = key[0]
  hybrid = "," in model
  # a hybrid's classes bottom first, each with the kwargs of the stack's its layer takes
  classes = registry.theory_classes(model, len(depths_of(model)), key[1]) if hybrid else None
  cls = ", ".join(classes) if hybrid else registry.theory_class_of(model, key[1])
  present = {s["config"]["task"] for s in runs}
  names = [g for g in GROUPS if g in present] + sorted(present - set(GROUPS))
  depths = sorted({s["config"]["depth"] for s in runs})
  width = cell_width(runs)  # for a cell without runs, and the min-depth column
  cells = {}
  for g in names:
    cells[g] = {}
    solved_at = None
    for depth in depths:
      cell = [s for s in runs if s["config"]["task"] == g and s["config"]["depth"] == depth]
      lens = sorted((s["max_len"] for s in cell), reverse=True)
      pred = theory.prediction(classes or [cls] * depth, g, cell_width(cell) or width)
      entry = {"max_len": lens[0] if lens else None, "runs": len(lens),
               "successes": sum(v >= EXTRAPOLATES for v in lens), "max_lens": lens,
               "diverged": sum(s["status"] == "diverged" for s in cell),
               "theory": pred["expressible"], "solved_at": None}
      if not lens and solved_at is not None:
        entry["solved_at"] = solved_at
      if entry["successes"] and solved_at is None:
        solved_at = depth
      cells[g][depth] = entry
  checks = [(s["run"], s.get("declaration")) for s in runs]
  checked = [(r, d) for r, d in checks if isinstance(d, dict) and d.get("checked")]
  return {"model": model, "layer_kwargs": key[1], "protocol": key[2], "class": cls,
          "classes": classes,  # a hybrid's, bottom first; None for a layer
          "registered": all(registry.find(n) for n in model.split(",")),
          "theorem": HYBRID_THEOREM if hybrid else theory.parse(cls)[0].theorem,
          "groups": names, "depths": depths, "cells": cells, "runs": len(runs),
          "state_width": width,
          # groups this layer type holds exactly with weights set by hand at the profile's kwargs
          # (at the construction's own width and depth): a "below theory" cell there is a
          # training failure
          "by_hand": [g for g in names if (analytic.held_by_hand(g, model, key[1]) or {}).get(
              "at_these_kwargs")],
          "declaration": {"checked": len(checked),
                          "violations": [(r, _violation(d)) for r, d in checked if d["ok"] is False]}}


def _violation(d: dict) -> str:
  bad = [r for r in d.get("layers", []) if r.get("ok") is False]
  return "; ".join(f"{r['layer']} ({r['class']}): {r['detail']}" for r in bad)


def verdict(e: dict) -> str | None:
  """'beats theory', 'below theory' or None (agreement, no theorem, or not measured)."""
  if e["runs"] == 0 or e["theory"] is None:
    return None
  ok = e["successes"] > 0
  if ok and e["theory"] is False:
    return "beats theory"
  if not ok and e["theory"] is True:
    return "below theory"
  return None


def tentative(e: dict) -> bool:
  """A verdict against the theory that rests on too few runs to be settled (a lucky or unlucky
  seed could decide it; at CPU scale the profile's second stage trains more seeds there)."""
  return verdict(e) is not None and e["runs"] < MIN_RUNS_AGAINST_THEORY


def _cell(e: dict) -> str:
  if e["runs"] == 0:
    return untrained_cell(e["solved_at"])
  best = e["max_len"]
  shown = CROSS if best < EXTRAPOLATES else str(best)
  flag = verdict(e)
  if flag:
    flag = f"*{flag}, tentative*" if tentative(e) else f"**{flag}**"
  counts = f"{e['successes']}/{e['runs']}" + (
      f", {e['diverged']} diverged" if e["diverged"] else "")
  return f"{shown} ({counts}) {MARK[e['theory']]}" + (f" {flag}" if flag else "")


def min_depth_entry(p: dict, g: str) -> dict | None:
  """One profile's entry in the overview, None where the group was not trained: `text`, the
  smallest depth at which a run extrapolated (`✘`: no trained depth did) / the theory's minimal
  depth for its class (`?`: no theorem); `kind`: 'tracked' or 'untracked' where the two agree,
  'no theorem', 'too shallow' (no run extrapolated, and the theory's depth was not trained),
  or 'below' / 'beats' where they disagree on a trained depth; `tentative`: a disagreement that
  rests on too few runs. A smallest depth that one run reached carries `ONCE` in the text."""
  cells = p["cells"].get(g)
  if not cells or not any(e["runs"] for e in cells.values()):
    return None
  solved = next((d for d in p["depths"] if cells[d]["successes"]), None)
  # a depth the layer reached once: its weights exist there, how often training finds them is
  # not yet known (on the CPU profile 11 of 33 such cells did not repeat with the next seed)
  once = solved is not None and cells[solved]["successes"] == 1
  theory_depth = theory_depth_text(p, g)
  known = theory_depth != "no theorem"
  # '≤ k': a class without a theorem tracks the group at depth k by a class it includes, and
  # no theorem says what it cannot do (never "beats")
  bound = theory_depth.startswith("≤")
  text = (f"{CROSS if solved is None else solved}{ONCE if once else ''} / "
          f"{theory_depth if known else '?'}")
  rules_out = theory_depth == "never" or theory_depth.startswith("not at")
  allowed = int(theory_depth.removeprefix("≤ ")) if known and not rules_out else None
  evidence = []
  if solved is not None and known and not bound and (allowed is None or solved < allowed):
    kind, evidence = "beats", [cells[solved]]
  elif allowed is not None and (solved is None or solved > allowed):
    # the depths the theory allows where no run extrapolated, up to the first that did; none
    # where the theory's depth was not trained (a profile of depth 1 only)
    kind = "below"
    evidence = [cells[d] for d in p["depths"] if allowed <= d and (solved is None or d < solved)
                and cells[d]["runs"]]
  if not evidence:
    kind = ("no theorem" if not known else "tracked" if solved is not None else
            "too shallow" if allowed is not None else "untracked")
  return {"text": text, "kind": kind,
          "tentative": bool(evidence) and all(tentative(e) for e in evidence)}


HYBRID_THEOREM = ("a stack tracks a group when its layers' classes, bottom first, take the "
                  "group's subgroup series down to the identity, or when a layer's own rule says "
                  "so (`launch.info --model=<the stack>`: each layer's theorem)")


def theory_depth_text(p: dict, g: str) -> str:
  """The theory's minimal depth as reports show it (`theory.min_depth_text` of the layer's
  class); a hybrid stack's: its depth where the stack tracks the group, `not at n` where the
  theory rules that out, `no theorem` where none decides it."""
  if p["classes"] is None:
    return theory.min_depth_text(p["class"], g, p["state_width"])
  n = len(p["classes"])
  verdict = theory.expressible(p["classes"], g, p["state_width"])
  return "no theorem" if verdict is None else str(n) if verdict else f"not at {n}"


def _min_depth_cell(p: dict, g: str) -> str:
  e = min_depth_entry(p, g)
  if e is None:
    return "·"
  if e["kind"] not in ("below", "beats"):
    return e["text"]
  return e["text"] + (f" *{e['kind']}?*" if e["tentative"] else f" **{e['kind']}**")


def overview_groups(profiles) -> list[str]:
  """The overview's rows: the profile's groups in their order, then any others by name."""
  names = [g for g in GROUPS if any(g in p["groups"] for p in profiles)]
  return names + sorted({g for p in profiles for g in p["groups"]} - set(GROUPS))


def diverged_runs(p: dict) -> int:
  return sum(e["diverged"] for cells in p["cells"].values() for e in cells.values())


def overview_heading(p: dict, several_protocols: bool) -> str:
  """A profile's column: its model (and kwargs), its protocol where the overview has several,
  its depths where they are not 1-3 (a hybrid's: its own), and how many of its runs diverged,
  if any."""
  diverged = diverged_runs(p)
  notes = ([p["protocol"]] if several_protocols else []) + (
      [] if tuple(p["depths"]) == depths_of(p["model"]) else
      ["depth" + ("s " if len(p["depths"]) > 1 else " ") + ", ".join(map(str, p["depths"]))]) + (
      [f"{diverged} of {p['runs']} runs diverged"] if diverged else [])
  return (neighbours.layer_label(p["model"], p["layer_kwargs"])
          + (f" ({'; '.join(notes)})" if notes else ""))


def overview(data: dict) -> str:
  """Every profile side by side, a column each: per group, where a run first extrapolated beside
  where the theory says the layer's class first can (`min_depth_entry`)."""
  profiles = list(data.values())
  several = len({p["protocol"] for p in profiles}) > 1
  heads = [overview_heading(p, several) for p in profiles]
  out = ["## All profiles: the smallest depth that extrapolated / the theory's", "",
         OVERVIEW_INTRO, "",
         "| group | order | " + " | ".join(heads) + " |", "|---|---|" + "---|" * len(heads)]
  for g in overview_groups(profiles):
    row = [_min_depth_cell(p, g) for p in profiles]
    out.append(f"| {g} | {groups_lib.get_group(g).order} | " + " | ".join(row) + " |")
  return "\n".join(out + [""])


ONCE = "†"  # the overview's mark of a smallest depth that one run reached
OVERVIEW_INTRO = (
    "A cell is the smallest depth at which a run reached 100 (`✘`: no trained depth did; `·`: "
    "not trained) / the smallest depth the theory allows for the layer's declared class "
    "(`never`: none of the depths it decides; for a hybrid stack, its own depth where the "
    "stack tracks the group, `not at n` where the theory rules that out; `?`: no theorem; "
    "`≤ k`: a class without a "
    "theorem of its own that includes one tracking the group at depth k, a bound that rules "
    "nothing out); a column trained at other "
    "depths than 1-3 names them. **below**: no run extrapolated at the theory's depth (nor at "
    "the trained depths after it, up to the first that did); **beats**: a run extrapolated at "
    "a depth the theory rules out; in italics with `?` where that rests on fewer than "
    f"{MIN_RUNS_AGAINST_THEORY} runs a cell; `{ONCE}` after a depth: one run reached 100 there "
    "(the layer can, how often training finds it is open). Each layer's own table below has the "
    "lengths and counts.")


def markdown(data: dict, compare: dict | None = None) -> str:
  """A section per profile of `data`, after the overview of those and `compare`'s (other
  layers' profiles, shown beside them only) where there are two or more."""
  both = {**data, **(compare or {})}
  out = [overview(both)] if len(both) > 1 else []
  for p in data.values():
    kw = f", layer_kwargs {p['layer_kwargs']}" if p["layer_kwargs"] else ""
    declared = (f"Declared classes, bottom first: `{'`, `'.join(p['classes'])}`"
                if p["classes"] else f"Declared class: `{p['class']}`")
    out += [f"## {p['model']}{kw} (protocol {p['protocol']}, {p['runs']} runs)", "",
            declared
            + ("" if p["registered"] else " (the layer is not registered here: load its plugin)")
            + f". Theory: {p['theorem']}.", ""]
    out.append("| group | order | " + " | ".join(f"depth {d}" for d in p["depths"])
               + (" | theory: the stack |" if p["classes"] else " | theory: min depth |"))
    out.append("|---|---|" + "---|" * len(p["depths"]) + "---|")
    for g in p["groups"]:
      order = groups_lib.get_group(g).order
      row = [_cell(p["cells"][g][d]) for d in p["depths"]]
      out.append(f"| {g} | {order} | " + " | ".join(row) + f" | {theory_depth_text(p, g)} |")
    out.append("")
    disagree = [(g, d, verdict(e), e) for g in p["groups"] for d, e in p["cells"][g].items()
                if verdict(e)]
    beats = [x for x in disagree if x[2] == "beats theory"]
    included = {} if p["classes"] else theory.included(p["class"])
    if p["classes"]:
      undecided = [g for g in p["groups"] if theory_depth_text(p, g) == "no theorem"]
      if undecided:
        out.append(f"No theorem decides this stack for {', '.join(undecided)}: "
                   "those rows are measurement only.")
      if not beats:
        out.append("No measurement beats the theory.")
    elif not theory.has_theorem(p["class"]) and included:
      out.append("No theorem of its own for this class: its ✓ come from the classes it "
                 f"includes ({', '.join(included)}), and nothing is ruled out.")
    elif not theory.has_theorem(p["class"]):
      out.append("No theorem for this class: the table is measurement only.")
    elif not beats:
      out.append("No measurement beats the theory.")
    for g, d, v, e in disagree:
      out.append(f"- {g} at depth {d}: {v} (best max_len {e['max_len']}, "
                 f"{e['successes']}/{e['runs']} runs reach {EXTRAPOLATES}; theory "
                 f"{MARK[e['theory']]})" + (f"; tentative: fewer than {MIN_RUNS_AGAINST_THEORY} "
                                            "runs" if tentative(e) else ""))
    diverged = diverged_runs(p)
    if diverged:
      out.append(f"- **Diverged**: {diverged} of {p['runs']} runs (a non-finite training loss: "
                 "each counts as a run that did not extrapolate).")
    dec = p["declaration"]
    if dec["violations"]:
      out.append(f"- **Declaration violated** in {len(dec['violations'])} of {dec['checked']} "
                 f"checked runs: the transitions leave the {_declared_set(p)}.")
      out += [f"  - `{r}`: {why}" for r, why in dec["violations"]]
    elif dec["checked"]:
      out.append(f"- Declaration check: the trained transitions of all {dec['checked']} checked "
                 f"runs lie in the {_declared_set(p)}.")
    else:
      out.append("- Declaration check: not checked (the layer sows no transitions, or its class "
                 "has no set to check).")
    if p["by_hand"]:
      out.append(f"- Held exactly by hand-built `{p['model']}` weights at these kwargs (at the "
                 "construction's own width and depth: `python -m launch.info --group=G`): "
                 f"{', '.join(p['by_hand'])}.")
    out.append("")
  return "\n".join(out)


def _declared_set(p: dict) -> str:
  return (f"sets of their layers' classes (`{'`, `'.join(p['classes'])}`)" if p["classes"]
          else f"`{p['class']}` set")


INTRO = ("Per group and depth: the best max_len over the runs (`✘` below 100), (runs that reach "
         "100 / runs), then the theory's verdict for the declared transition class (✓ "
         "expressible at that depth, ✗ not, ? no theorem); `k diverged`: runs whose training "
         "loss went non-finite, counted as runs that did not extrapolate. `= dK`: not trained, "
         "a shallower stack (depth K) already extrapolated. `beats theory`: a measurement the class's "
         "theorem rules out; `below theory`: expressible, but no run learned it. Either is "
         f"*tentative* on fewer than {MIN_RUNS_AGAINST_THEORY} runs: at CPU scale (profile_cpu) "
         "the second stage of `launch.profile` (resumable: the same command) trains seeds 1-3 "
         "there, 8 runs in all (also where a shallower stack extrapolated after the cell's first "
         "runs trained), and seed 1 where a cell's verdict rests on one success, 4 runs.")
