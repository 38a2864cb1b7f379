"""The theory cards `launch.info` prints: a layer's (its record, its class's predictions, the checks
at init), a hybrid stack's, and a class's or a stack of classes' before any layer declares them.
Each is plain data (for --json) with its printer.
"""
from __future__ import annotations

from launch import common


def card(model: str, d_state: int | None = None, group_names=None, kwargs: str = "") -> dict:
  """The layer's registry record, its class's predictions over the profile's groups (or
  `group_names`) at depths 1-3 (at state width d_state; None: wide enough), and the declaration
  and causality checks on random inputs at a random initialisation, all for the layer's kwargs
  (its defaults, then the JSON object `kwargs`). A comma list of layers is a hybrid stack
  (`stack_card`)."""
  from ssm_bench import analytic, config, plugins, registry, state_widths
  predicted = _groups(group_names)
  try:
    plugins.load(common.PLUGINS.value)
    config.canonical_model(model, model.count(",") + 1)  # an empty name is an error, as in a run
    layers = registry.parse_layers(model)
    kwargs = registry.canonical_kwargs(kwargs)
    registry.check_classes(layers, kwargs)  # kwargs a layer does not take, a failing class
    if len(set(layers)) > 1:
      return stack_card(layers, d_state, predicted, kwargs)
    model = layers[0]
    out = registry.card(model, kwargs)
  except ValueError as e:
    raise common.UsageError(str(e)) from None
  cls = out["theory_class"]
  out["predictions_d_state"] = d_state
  width = out["predictions_width"] = (None if d_state is None else state_widths.state_width(
      model, {"d_state": d_state}, kwargs))
  # by hand: weights set by hand track it (null, or the kwargs they are built at)
  out["predictions"] = {g: {**_depths(cls, g, width),
                            "by_hand": analytic.held_by_hand(g, model, kwargs)}
                        for g in predicted}
  return {**out, **_checks_at_init((model,), kwargs)}


def _groups(group_names) -> tuple:
  """The groups a card predicts for: the profile's ten, or --groups checked."""
  from ssm_bench import tracking_profile
  return (tracking_profile.GROUPS if group_names is None
          else common.group_names("--groups", group_names))


def _depths(cls: str, group: str, width) -> dict:
  """One class's row of a card: its minimal depth for the group and whether 1-3 layers track it."""
  from ssm_bench import theory, tracking_profile
  return {"min_depth": theory.min_depth_text(cls, group, width),
          **{f"depth {d}": theory.expressible([cls] * d, group, width)
             for d in tracking_profile.DEPTHS}}


def stack_card(layers: tuple, d_state: int | None = None, predicted=None,
               kwargs: str = "") -> dict:
  """A hybrid stack (bottom layer first): each layer's class, whether the stack of those classes
  can track each of the profile's groups (or `predicted`; the classes' subgroup steps in order:
  the order matters), and the checks at init of the whole network."""
  from ssm_bench import analytic, registry, state_widths, theory, tracking_profile
  predicted = predicted or tracking_profile.GROUPS
  name = ",".join(layers)
  classes = registry.theory_classes(name, len(layers), kwargs)
  width = None if d_state is None else state_widths.state_width(name, {"d_state": d_state}, kwargs)
  return {"name": name,
          "layers": [{"name": n, "theory_class": c, "theorem": theory.parse(c)[0].theorem}
                     for n, c in zip(layers, classes)],
          "predictions_d_state": d_state, "predictions_width": width,
          "predictions": {g: theory.expressible(classes, g, width) for g in predicted},
          # weights set by hand for this very stack (a hybrid's own construction), or null
          "by_hand": {g: analytic.held_by_hand(g, name, kwargs) for g in predicted},
          **_checks_at_init(layers, kwargs)}


def class_card(classes: str, width: int | None = None, group_names=None) -> dict:
  """What the theory says of a class of transitions (or a comma list of classes, a stack bottom
  first) before any layer declares it: each class's description, theorem and inclusions, the
  registered layers that declare it (at their default kwargs), and per group of the profile's
  (or `group_names`) the minimal depth and whether depths 1-3 track it (one class), or whether
  the stack does; `width`: the dimensions a householder class's keys live in (None: enough)."""
  from ssm_bench import plugins, registry, theory
  predicted = _groups(group_names)
  try:
    plugins.load(common.PLUGINS.value)
    names = [c.strip() for c in classes.split(",")]
    parsed = [theory.parse(c)[0] for c in names]
  except ValueError as e:
    raise common.UsageError(str(e)) from None
  out = {"classes": [{"name": n, "description": c.description, "theorem": c.theorem,
                      "includes": theory.included(n),
                      "layers": [s.name for s in registry.specs()
                                 if registry.theory_class_of(s.name) == n]}
                     for n, c in zip(names, parsed)],
         "predictions_width": width}
  out["predictions"] = {g: theory.expressible(names, g, width) if len(names) > 1
                        else _depths(names[0], g, width) for g in predicted}
  return out


def print_class_card(c: dict):
  stack = len(c["classes"]) > 1
  if stack:
    print(f"a stack of {len(c['classes'])} layers of these classes, bottom first")
  for i, k in enumerate(c["classes"]):
    print(f"{f'layer {i}: ' if stack else ''}{k['name']}: {k['description']}")
    print(f"  theorem: {k['theorem']}")
    if k["includes"]:
      print("  includes: " + "; ".join(f"{n} ({why})" for n, why in k["includes"].items()))
    print("  layers that declare it: " + (", ".join(k["layers"]) or "none registered"))
  if c["predictions_width"]:
    print(f"  predictions at state width {c['predictions_width']}:")
  _print_stack(c["predictions"]) if stack else _print_depths(c["predictions"], by_hand=False)


def _print_depths(predictions: dict, by_hand: bool):
  """A card's table: per group the minimal depth, whether depths 1-3 track it, and (a layer's)
  whether weights set by hand hold it."""
  mark = {True: "yes", False: "no", None: "?"}
  col = max(7, *(len(g) + 2 for g in predictions))
  print("  " + "group".ljust(col) + "min depth".ljust(12)
        + "  ".join(f"depth {d}" for d in (1, 2, 3)) + ("  by hand" if by_hand else ""))
  for g, p in predictions.items():
    print(("  " + g.ljust(col) + p["min_depth"].ljust(12)
           + "  ".join(mark[p[f"depth {d}"]].ljust(7) for d in (1, 2, 3))
           + ("  " + _by_hand(p["by_hand"]) if by_hand else "")).rstrip())


def _print_stack(predictions: dict, by_hand: dict | None = None):
  """A stack's table: per group whether it tracks it, and (a layers' stack) whether weights set
  by hand for this stack hold it."""
  mark = {True: "yes", False: "no", None: "? (no theorem for this stack)"}
  col = max(7, *(len(g) + 2 for g in predictions))
  wide = max(len(m) for m in mark.values())
  print(("  " + "group".ljust(col) + "the stack tracks it".ljust(wide)
         + ("  by hand" if by_hand else "")).rstrip())
  for g, p in predictions.items():
    print(("  " + g.ljust(col) + mark[p].ljust(wide)
           + ("  " + _by_hand(by_hand[g]) if by_hand else "")).rstrip())


def _checks_at_init(layers: tuple, kwargs: str = "") -> dict:
  """`causality.checks_at_init`; a layer that does not build is one UsageError."""
  from ssm_bench import causality
  try:
    return causality.checks_at_init(layers, kwargs)
  except ValueError as e:
    raise common.UsageError(str(e)) from None


def print_card(c: dict):
  about = f": {c['description']}" if c["description"] else ""
  print(f"{c['name']} ({'built-in' if c['builtin'] else c['source']}){about}")
  print(f"  class {c['theory_class']}: {c['class_description']}")
  print(f"  theorem: {c['theorem']}")
  if c["class_includes"]:
    print("  includes: " + "; ".join(f"{k} ({why})" for k, why in c["class_includes"].items()))
  print(f"  scan family: {c['scan_family']}; kwargs: {c['kwargs'] or 'none'}; constructions: "
        + ("; ".join(c["constructions"]) or "none"))
  if c["predictions_d_state"]:
    width = c["predictions_width"]
    print(f"  predictions at d_state {c['predictions_d_state']}"
          + (f" (state width {width})" if width != c["predictions_d_state"] else "") + ":")
  _print_depths(c["predictions"], by_hand=True)
  _print_checks(c)


def _by_hand(held) -> str:
  """The card's column: yes at the card's kwargs, else the kwargs the weights are built at."""
  if not held:
    return "-"
  return "yes" if held["at_these_kwargs"] else f"at {held['layer_kwargs'] or 'the defaults'}"


def print_stack_card(c: dict):
  print(f"{c['name']}: a hybrid stack of {len(c['layers'])} layers, bottom first")
  for i, layer in enumerate(c["layers"]):
    print(f"  layer {i}: {layer['name']}, class {layer['theory_class']} ({layer['theorem']})")
  if c["predictions_d_state"]:
    print(f"  predictions at d_state {c['predictions_d_state']}:")
  _print_stack(c["predictions"], c["by_hand"])
  _print_checks(c)


def _print_checks(c: dict):
  dec = c["declaration_at_init"]
  rows = "; ".join(f"{r['layer']}: {r['detail']}" for r in dec["layers"])
  verdict = {True: "within the class", False: "OUTSIDE the class", None: "not checked"}[dec["ok"]]
  print(f"  declaration at init on random inputs: {verdict} ({rows})")
  causal = c["causal_at_init"]
  answer = {True: "yes", False: "NO", None: "not checked"}[causal["ok"]]
  print(f"  causal at init on random inputs: {answer} ({causal['detail']})")
