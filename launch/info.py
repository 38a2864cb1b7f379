"""Describe a group (its theory, Cayley table, a sampled batch) or a layer (its theory card).

  python -m launch.info --group=A4 --json
  python -m launch.info --group=S3 --sample=2x8 --seed=0 --json
  python -m launch.info --model=negmamba                  # class, theorem, predictions, check
  python -m launch.info --plugins=examples.rotation --model=rotation --json
  python -m launch.info --model=negmamba,aussm            # a hybrid stack, bottom layer first
  python -m launch.info --model=negmamba --groups=D3,C2xC4,S5   # its predictions for any groups
  python -m launch.info --language=tomita3 --sample=2x12  # a language's theory and a batch
  python -m launch.info --theory_class=complex_diagonal   # a class's predictions, no layer
  python -m launch.info --theory_class=signed_diagonal,unit_modulus_diagonal  # a stack of classes
"""
from __future__ import annotations

import re

from absl import flags

from launch import common
from launch import info_cards as cards
from ssm_bench import reflections
from tasks import groups
from tasks import registry

_GROUP = flags.DEFINE_string("group", "C2", "Group name. " + groups.GRAMMAR)
_JSON = flags.DEFINE_bool("json", False, "Print one JSON object instead of a summary.")
_SAMPLE = flags.DEFINE_string("sample", None, "BxT: also draw B sequences of length T from the "
                              "group's or the language's training sampler.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed for --sample.", lower_bound=0)
_MODEL = flags.DEFINE_string("model", None, "Show this layer's theory card instead of a group.")
_D_STATE = flags.DEFINE_integer("d_state", None, "With --model or --theory_class: predictions for "
                                "a run of this "
                                "d_state (a householder layer's key width: d_state, or what its "
                                "record's state_width makes of it); default: wide enough.",
                                lower_bound=1)
_LAYER_KWARGS = flags.DEFINE_string(
    "layer_kwargs", "", "With --model: the layer's own kwargs as a JSON object (as a run's "
    "--config.layer_kwargs): its class, predictions and checks at init for them.")
_GROUPS = flags.DEFINE_list("groups", None, "With --model or --theory_class: the groups its "
                            "predictions cover, any "
                            "group names (default: the profile's ten).")
_LANGUAGE = flags.DEFINE_string("language", None, "Show a regular language's syntactic monoid "
                                "and predictions instead of a group (tasks/languages.py).")
_CLASS = flags.DEFINE_string("theory_class", None, "Show what the theory predicts for a class of "
                             "transitions, before any layer declares it: a class name (with its "
                             "parameter, householder:2), or a comma list for a stack of classes, "
                             "bottom first; a plugin's own class with --plugins.")
MAX_SAMPLE = 1_000_000  # tokens printed as text: more is not a sample anyone reads


def describe(name: str, sample: str | None = None, seed: int = 0, cayley: bool = True) -> dict:
  """The group's theory record; `cayley=False` leaves out its table (the text output prints no
  table, and S7's as a list of lists takes 2 s)."""
  try:
    g = groups.get_group(name)
  except groups.GroupError as e:
    raise common.UsageError(str(e)) from None
  out = g.theory()
  # the Householder products a layer needs per token (DeltaNet 1, DeltaProduct n_h)
  out["reflection_length"] = reflections.reflection_length(g)
  out["reflection_width"] = reflections.reflection_width(g)  # the keys' dimensions it needs
  if cayley:
    out["cayley"] = g.table.tolist()
  # which registered layers hold it exactly with weights set by hand (plugins' own included)
  common.load_plugins()
  from ssm_bench import analytic
  out["constructions"] = analytic.constructions(name)
  # the layer kwargs each is built at ('' for the layer's defaults; the clock's C3: m = 3)
  out["construction_kwargs"] = {m: (analytic.held_by_hand(name, m) or {}).get("layer_kwargs", "")
                                for m in out["constructions"]}
  out["construction_limits"] = analytic.construction_limits(name)  # built only up to a size
  out["diagonal_limit"] = analytic.diagonal_limit(name)  # '' where diagonal stacks can
  out["min_depth_by_layer"] = min_depth_by_layer(name)
  if sample:
    out.update(draw(name, sample, seed))
  return out


def min_depth_by_layer(group: str) -> dict:
  """{layer: its class's minimal depth for the group ('1', 'never', 'no theorem')} for every
  registered layer (plugins' included) at its default kwargs, keys wide enough: which layers
  can track the group at all, and how deep, by the theory alone."""
  from ssm_bench import registry, theory
  classes = {name: registry.theory_class_of(name) for name in registry.names()}
  depth = {cls: theory.min_depth_text(cls, group) for cls in set(classes.values())}  # once each
  return {name: depth[cls] for name, cls in classes.items()}


def draw(task_name: str, sample: str, seed: int = 0) -> dict:
  """{"inputs", "labels"}: a BxT batch from the task's training sampler."""
  m = re.fullmatch(r"(\d+)x(\d+)", sample)
  if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
    raise common.UsageError(f"--sample must be BxT with positive integers, got {sample!r}")
  if int(m.group(1)) * int(m.group(2)) > MAX_SAMPLE:
    raise common.UsageError(f"--sample={sample} asks for {int(m.group(1)) * int(m.group(2))} "
                            f"tokens; print at most {MAX_SAMPLE} (B x T)")
  import jax  # deferred: the plain theory query needs no JAX start-up

  task = registry.get_task(task_name)
  sample_fn = jax.jit(task.sample, static_argnums=(1, 2))
  tokens, labels = sample_fn(jax.random.PRNGKey(seed), int(m.group(1)), int(m.group(2)))
  return {"inputs": tokens.tolist(), "labels": labels.tolist()}


def language(name: str) -> dict:
  """describe_language; `<language>-member` (the task lang-<language>-member's name) is the
  language itself: its membership target has the same monoid and predictions."""
  from ssm_bench import language_theory
  from tasks import languages
  try:
    d = language_theory.describe_language(name.removesuffix("-member"))
    if name.endswith("-member"):
      registry.get_task(f"lang-{name}")  # refused where the last symbol decides membership
  except (languages.LanguageError, registry.TaskError) as e:
    raise common.UsageError(str(e)) from None
  from ssm_bench import language_table
  common.load_plugins()  # their layers are listed too
  d["by_layer"] = language_table.verdict_by_layer(d["name"])
  return d


def _print_language(d: dict):
  if not d["regular"]:
    print(f"{d['name']} ({d['description']}; alphabet {d['alphabet']!r}): not regular (a "
          "counter language): no finite syntactic monoid")
  else:
    print(f"{d['name']} ({d['description']}; alphabet {d['alphabet']!r}): minimal DFA "
          f"{d['minimal_states']} states, syntactic monoid of {d['monoid_size']} elements, "
          + ("aperiodic: star-free" if d["star_free"] else "not aperiodic: not star-free")
          + f"; maximal subgroups: {', '.join(d['maximal_subgroups']) or 'trivial only'}")
  mark = {True: "yes", False: "no", None: "?"}
  print("  by the layers' classes (`--model=NAME` for one layer's card): "
        + ", ".join(f"{n} {v}" for n, v in d["by_layer"].items()))
  for cls, p in d["predictions"].items():
    verdict = mark[p["verdict"]] + (f" (depth >= {p['min_depth']})" if "min_depth" in p else "")
    print(f"  {cls:<22} {verdict:<4} {p['source']}")
  if "inputs" in d:
    _print_language_sample(d["alphabet"], d["inputs"], d["labels"], d["target"])


def _print_language_sample(alphabet: str, inputs, labels, target: str = "next set"):
  """Each position's symbol over the set its label stands for (a bitmask, `tasks/languages.py`:
  bit i for symbol i, bit k for the word may end here, printed `$`), or for the membership
  target whether the prefix is in the language (y / n); --json keeps the ints."""
  below = "in L:  " if target == "membership" else "next:  "
  if target == "membership":
    as_set = lambda bit: "y" if bit else "n"
    print("  sample (under each symbol, whether the word up to it is in the language):")
  else:
    as_set = lambda bits: "".join(c for i, c in enumerate(alphabet + "$")
                                  if bits >> i & 1) or "-"
    print("  sample (under each symbol, the symbols that may follow it; $: the word may end "
          "there):")
  for row, lab in zip(inputs, labels):
    cols = [(alphabet[t], as_set(int(b))) for t, b in zip(row, lab)]
    width = max(len(c) for pair in cols for c in pair)
    print("  input: " + " ".join(a.ljust(width) for a, _ in cols).rstrip())
    print("  " + below + " ".join(b.ljust(width) for _, b in cols).rstrip())


def _print_sample(d: dict):
  for key in ("inputs", "labels"):
    for row in d.get(key, ()):
      print(f"  {key[:-1]}: {' '.join(map(str, row))}")


def check_flags():
  """One subject per call, and no flag that the subject would ignore (a --sample beside
  --model printed no sample and said nothing)."""
  given = [f"--{n}" for n, on in (("group", flags.FLAGS["group"].present),
                                   ("language", _LANGUAGE.value is not None),
                                   ("model", _MODEL.value is not None),
                                   ("theory_class", _CLASS.value is not None)) if on]
  if len(given) > 1:
    raise common.UsageError(f"{' and '.join(given)}: describe one of a group, a language, a "
                            "layer or a theory class per call")
  predicting = _MODEL.value is not None or _CLASS.value is not None
  if predicting and (_SAMPLE.value or flags.FLAGS["seed"].present):
    raise common.UsageError("--sample and --seed draw from a group's or a language's sampler; "
                            "a layer's or a class's card (--model, --theory_class) has none")
  if _GROUPS.value is not None and not predicting:
    raise common.UsageError("--groups lists the groups of a layer's or a class's predictions: it "
                            "needs --model or --theory_class (--group describes one group)")
  if _LAYER_KWARGS.value and _MODEL.value is None:
    raise common.UsageError("--layer_kwargs sets a layer's own kwargs for its card: it needs "
                            "--model")
  if _D_STATE.value is not None and not predicting:
    raise common.UsageError("--d_state sets the state width of a layer's or a class's "
                            "predictions: it needs --model or --theory_class")


def main(argv):
  del argv
  check_flags()
  if _LANGUAGE.value:
    d = language(_LANGUAGE.value)
    d["target"] = "membership" if _LANGUAGE.value.endswith("-member") else "next set"
    if _SAMPLE.value:
      d.update(draw(f"lang-{_LANGUAGE.value}", _SAMPLE.value, _SEED.value))
    common.print_json(d) if _JSON.value else _print_language(d)
    return
  if _CLASS.value:
    c = cards.class_card(_CLASS.value, _D_STATE.value, _GROUPS.value)
    common.print_json(c) if _JSON.value else cards.print_class_card(c)
    return
  if _MODEL.value:
    c = cards.card(_MODEL.value, _D_STATE.value, _GROUPS.value, _LAYER_KWARGS.value)
    if _JSON.value:
      common.print_json(c)
    else:
      cards.print_stack_card(c) if "layers" in c else cards.print_card(c)
    return
  info = describe(_GROUP.value, _SAMPLE.value, _SEED.value, cayley=_JSON.value)
  if _JSON.value:
    common.print_json(info)
    return
  dl = info["derived_length"]
  e2 = info["elementary2_length"]
  print(f"{info['name']}: order {info['order']}, "
        f"{'abelian' if info['abelian'] else 'non-abelian'}, "
        f"{'solvable, derived length ' + str(dl) if info['solvable'] else 'not solvable'}, "
        f"elementary-2 series length {e2 if e2 is not None else 'none (not a 2-group)'}, "
        + (f"reflection length {info['reflection_length']} (one householder:n_h layer tracks "
           f"it when n_h >= {info['reflection_length']} and its keys have at least "
           f"{info['reflection_width']} dimensions)" if info["reflection_length"] is not None
           else f"reflection length not computed above order {reflections.MAX_ORDER}"))
  print("  held exactly by hand: " + (", ".join(info["constructions"]) or "no layer here")
        + (f" (python -m launch.analytic --task={info['name']} --model=LAYER)"
           if info["constructions"] else ""))
  for layer, how in info["constructions"].items():
    kwargs = info["construction_kwargs"][layer]
    print(f"    {layer}{' ' + kwargs if kwargs else ''}: {how}")
  for layer, why in info["construction_limits"].items():
    print(f"    not built: {layer}: {why}")
  if info["diagonal_limit"]:
    print(f"  {info['diagonal_limit']}")
  print("  minimal depth by the layers' classes (their theorems; `--model=NAME` for one layer's "
        "card): " + ", ".join(f"{n} {d}" for n, d in info["min_depth_by_layer"].items()))
  _print_sample(info)


if __name__ == "__main__":
  common.run_main(main)
