"""The info command: JSON keys, sampling through the training sampler, one-line errors."""
import json

import pytest
import launcher


def run_info(*args):
  return launcher.run(["launch.info", *args], timeout=120)


def test_info_json_for_a4():
  out = run_info("--group=A4", "--json")
  assert out.returncode == 0, out.stderr
  info = json.loads(out.stdout)
  assert list(info)[:9] == ["name", "order", "abelian", "solvable", "derived_length",
                            "elementary2_length", "reflection_length", "reflection_width",
                            "cayley"]
  assert info["order"] == 12 and info["derived_length"] == 2 and info["solvable"]
  assert info["reflection_length"] == 2, "A4 is the tetrahedron's rotations: 2 reflections each"
  assert info["reflection_width"] == 3, "the tetrahedron's rotations act in 3 dimensions"
  assert len(info["cayley"]) == 12 and all(len(r) == 12 for r in info["cayley"])


def test_info_sample_matches_task_sampler():
  import jax
  from tasks import registry
  out = run_info("--group=S3", "--json", "--sample=3x7", "--seed=5")
  assert out.returncode == 0, out.stderr
  info = json.loads(out.stdout)
  tokens, labels = registry.get_task("S3").sample(jax.random.PRNGKey(5), 3, 7)
  assert info["inputs"] == tokens.tolist() and info["labels"] == labels.tolist()


@pytest.mark.parametrize("args", [["--group=S9"], ["--group=banana", "--json"],
                                  ["--group=S3", "--sample=3by7"],
                                  ["--group=S3", '--layer_kwargs={"m": 6}'],
                                  ["--model=mamba", '--layer_kwargs={"m": 6}'],
                                  ["--model=deltaproduct", "--layer_kwargs=[2]"]])
def test_bad_input_is_one_line_without_traceback(args):
  out = run_info(*args)
  assert out.returncode != 0
  assert "Traceback" not in out.stderr
  errors = [l for l in out.stderr.splitlines() if l.startswith("error:")]
  assert len(errors) == 1, out.stderr


def test_info_human_summary():
  out = run_info("--group=A5")
  assert out.returncode == 0 and "not solvable" in out.stdout
  assert ("reflection length 2 (one householder:n_h layer tracks it when n_h >= 2 and its keys "
          "have at least 3 dimensions)") in out.stdout, out.stdout


def test_info_lists_the_layers_that_hold_a_group_by_hand():
  d4 = json.loads(run_info("--group=D4", "--json").stdout)
  assert list(d4["constructions"]) == ["simple_aussm", "aussm", "deltanet", "deltaproduct",
                                       "negmamba", "negmamba,deltanet"], (
      "D4 is solvable, a 2-group, dihedral and has reflection length 2, and a hybrid of one "
      "negmamba and one DeltaNet layer holds it too: "
      f"{list(d4['constructions'])}")
  assert d4["diagonal_limit"] == "", d4["diagonal_limit"]
  out = run_info("--group=A5")
  assert out.returncode == 0, out.stderr
  assert "held exactly by hand: deltaproduct (" in out.stdout, out.stdout
  assert "    deltaproduct: any finite group" in out.stdout, "A5's n_h (2) is the default's"
  assert "A5 is not solvable: no stack of diagonal" in out.stdout, out.stdout
  out = run_info("--group=Q8", "--json")
  assert json.loads(out.stdout)["construction_kwargs"]["deltaproduct"] == '{"n_h":4}', out.stdout
  out = run_info("--group=Q8")
  assert '    deltaproduct {"n_h":4}: any finite group' in out.stdout, out.stdout


def test_a_layer_card_gives_its_theory_and_what_it_holds_by_hand():
  out = run_info("--model=negmamba", "--json")
  assert out.returncode == 0, out.stderr[-2000:]
  card = json.loads(out.stdout)
  assert card["theory_class"] == "signed_diagonal", card["theory_class"]
  p = card["predictions"]
  assert (p["D4"]["depth 1"], p["D4"]["depth 2"], p["D4"]["min_depth"]) == (False, True, "2"), p["D4"]
  assert p["S3"]["min_depth"] == "never", "a signed diagonal stack tracks only 2-groups"
  held = [g for g, q in p.items() if q["by_hand"]]
  assert held == ["C2", "C2xC2", "D4", "Q8"], f"negmamba's constructions are for 2-groups: {held}"
  assert card["declaration_at_init"]["ok"] is True, card["declaration_at_init"]


def test_a_layer_card_names_the_stack_a_hybrids_construction_is_built_as():
  """DeltaNet's record carries negmamba,deltanet's construction (`Construction.below`): its card
  lists it as that stack's, and its own two-layer and parity weights without a stack."""
  from ssm_bench import registry
  listed = registry.card("deltanet")["constructions"]
  stacks = [c for c in listed if c.startswith("as ")]
  assert len(listed) == 3 and len(stacks) == 1 and stacks[0].startswith(
      "as negmamba,deltanet: "), f"the hybrid's construction not named by its stack: {listed}"


@pytest.mark.parametrize("kwargs,cls,c3,c4", [
    ("", "roots_of_unity:4", "never", "1"), ('{"m": 6}', "roots_of_unity:6", "1", "2")])
def test_a_plugin_brings_its_own_theory_class_and_the_card_reads_its_kwargs(kwargs, cls, c3, c4):
  """examples/clock.py registers the class roots_of_unity (H -> H^m [H, H]) and a layer that
  declares it for its m: with 4th roots no depth tracks C3 and one layer C4, with 6th roots the
  other way round; its transitions at init pass the class's own declaration check."""
  out = run_info("--plugins=examples.clock", "--model=clock", "--groups=C3,C4", "--json",
                 *([f"--layer_kwargs={kwargs}"] if kwargs else []))
  assert out.returncode == 0, out.stderr[-2000:]
  card = json.loads(out.stdout)
  assert card["theory_class"] == cls and card["kwargs"]["m"] == int(cls[-1]), card
  p = card["predictions"]
  assert (p["C3"]["min_depth"], p["C4"]["min_depth"]) == (c3, c4), p
  assert card["declaration_at_init"]["ok"] is True, card["declaration_at_init"]
  assert "roots of unity" in card["declaration_at_init"]["layers"][0]["detail"]


def test_a_card_says_where_the_weights_by_hand_are_built_at_other_kwargs():
  """The clock's cascade is built at m = 4 where 4th roots hold its group, else at the least m
  that does (C3: 3): the card at m = 4 says `yes` for D4 and `at {"m":3}` for C3, where its
  class says no depth tracks C3; at m = 6 D4's weights are the defaults', not its own."""
  out = run_info("--plugins=examples.clock", "--model=clock", "--groups=C3,D4")
  assert out.returncode == 0, out.stderr[-2000:]
  rows = {l.split()[0]: l.split(None, 5)[-1] for l in out.stdout.splitlines()
          if l.startswith("  ") and l.split()[0] in ("C3", "D4")}
  assert rows == {"C3": 'at {"m":3}', "D4": "yes"}, out.stdout
  out = run_info("--plugins=examples.clock", "--model=clock", "--groups=D4",
                 '--layer_kwargs={"m": 6}', "--json")
  held = json.loads(out.stdout)["predictions"]["D4"]["by_hand"]
  assert held == {"layer_kwargs": "", "at_these_kwargs": False}, held


def test_a_hybrid_stacks_card_applies_its_layers_classes_bottom_first():
  cards = {}
  for model in ("negmamba,aussm", "aussm,negmamba"):
    out = run_info(f"--model={model}", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    cards[model] = json.loads(out.stdout)
  sign_first, rotation_first = cards["negmamba,aussm"], cards["aussm,negmamba"]
  assert [layer["theory_class"] for layer in sign_first["layers"]] == [
      "signed_diagonal", "unit_modulus_diagonal"], sign_first["layers"]
  assert [layer["theory_class"] for layer in rotation_first["layers"]] == [
      "unit_modulus_diagonal", "signed_diagonal"], rotation_first["layers"]
  # S3's top quotient is its sign (C2), which a signed layer takes first; A4's is C3, which only
  # a rotation takes, leaving C2xC2 for a signed layer above it
  got = {m: (c["predictions"]["S3"], c["predictions"]["A4"]) for m, c in cards.items()}
  assert got == {"negmamba,aussm": (True, False), "aussm,negmamba": (False, True)}, got
  assert sign_first["declaration_at_init"]["ok"] and sign_first["causal_at_init"]["ok"], sign_first


def test_a_hybrids_card_says_which_groups_its_own_weights_by_hand_hold():
  """negmamba,deltanet tracks S3 by the householder class's above rule, and weights set by hand
  for that very stack hold it (analytic_dihedral.signed_plane); negmamba,aussm tracks S3 too,
  but no construction is that stack's."""
  out = run_info("--model=negmamba,deltanet", "--groups=S3,Q8", "--json")
  assert out.returncode == 0, out.stderr[-2000:]
  card = json.loads(out.stdout)
  assert card["predictions"] == {"S3": True, "Q8": None}, card["predictions"]
  assert card["by_hand"] == {"S3": {"layer_kwargs": "", "at_these_kwargs": True}, "Q8": None}
  other = json.loads(run_info("--model=negmamba,aussm", "--groups=S3", "--json").stdout)
  assert other["predictions"] == {"S3": True} and other["by_hand"] == {"S3": None}, other


def test_a_class_card_predicts_for_a_class_or_a_stack_of_classes_before_any_layer():
  """`--theory_class` answers "what would a layer of this class track" with no layer written:
  the class's depths per group, the layers that declare it, a stack of classes in its order,
  and a plugin's own class."""
  def card(*args):
    out = run_info(*args, "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)
  signed = card("--theory_class=signed_diagonal", "--groups=C2,D4,S3")
  assert {g: p["min_depth"] for g, p in signed["predictions"].items()} == {
      "C2": "1", "D4": "2", "S3": "never"}, signed["predictions"]
  assert [(p["depth 1"], p["depth 2"]) for p in signed["predictions"].values()] == [
      (True, True), (False, True), (False, False)], signed["predictions"]
  assert "negmamba" in signed["classes"][0]["layers"], signed["classes"]
  assert "nonnegative_diagonal" in signed["classes"][0]["includes"], signed["classes"]
  stacks = {order: card(f"--theory_class={order}", "--groups=S3,A4")["predictions"]
            for order in ("signed_diagonal,unit_modulus_diagonal",
                          "unit_modulus_diagonal,signed_diagonal")}
  assert stacks == {"signed_diagonal,unit_modulus_diagonal": {"S3": True, "A4": False},
                    "unit_modulus_diagonal,signed_diagonal": {"S3": False, "A4": True}}, stacks
  clock = card("--plugins=examples.clock", "--theory_class=roots_of_unity:3", "--groups=C3,C4")
  assert {g: p["min_depth"] for g, p in clock["predictions"].items()} == {
      "C3": "1", "C4": "never"}, clock["predictions"]
  text = run_info("--theory_class=householder:2", "--d_state=2", "--groups=S3")
  assert text.returncode == 0 and "layers that declare it: deltaproduct" in text.stdout, (
      text.stdout + text.stderr[-2000:])
  assert "predictions at state width 2" in text.stdout, text.stdout


def test_a_layer_card_predicts_for_any_groups_asked():
  """--groups: the card's predictions for groups outside the profile's ten, in the order given,
  for one layer and for a hybrid stack (the theory answers for any group, not a fixed list)."""
  out = run_info("--model=negmamba", "--groups=C4,D3,C2xC4", "--json")
  assert out.returncode == 0, out.stderr[-2000:]
  p = json.loads(out.stdout)["predictions"]
  assert list(p) == ["C4", "D3", "C2xC4"], list(p)
  # C4 -> C4^2 [C4, C4] = C2 -> 1: two signed layers; D3 (order 6) is not a 2-group
  assert [p[g]["min_depth"] for g in p] == ["2", "never", "2"], p
  assert (p["C4"]["depth 1"], p["C4"]["depth 2"], p["C4"]["by_hand"]) == (False, True, {
      "layer_kwargs": "", "at_these_kwargs": True}), p
  out = run_info("--model=negmamba,aussm", "--groups=D3,D4,A5")
  assert out.returncode == 0, out.stderr[-2000:]
  rows = {l.split()[0]: l.split()[1] for l in out.stdout.splitlines()
          if l.startswith("  ") and l.split()[0] in ("D3", "D4", "A5")}
  # D3's top quotient is its sign, then C3 for the rotation layer; A5 is not solvable
  assert rows == {"D3": "yes", "D4": "yes", "A5": "no"}, out.stdout


def test_a_group_says_how_deep_each_layers_class_must_be_to_track_it():
  """--group: every registered layer's minimal depth by its class's theorem (plugins' too), so
  "which layers can track D3, and how deep?" is one command."""
  d3 = json.loads(run_info("--group=D3", "--json").stdout)["min_depth_by_layer"]
  want = {"mamba": "never", "negmamba": "never", "aussm": "2", "rnn": "1", "deltaproduct": "1",
          "deltanet": "2"}  # D3 = S3: not a 2-group, derived length 2, 2 reflections, dihedral
  assert {k: d3[k] for k in want} == want, d3
  out = run_info("--group=C4", "--plugins=examples.rotation")
  assert out.returncode == 0, out.stderr[-2000:]
  line = out.stdout.splitlines()[-1]
  for part in ("negmamba 2", "aussm 1", "mamba never", "rotation 1"):  # C4: 2 signed layers
    assert part in line.split(": ", 1)[1].split(", "), f"{part!r} not in {line!r}"


def test_group_flags_take_each_group_once_in_order_and_refuse_an_unknown_one():
  """--groups=S3,C2,S3 predicts (or trains) S3 and C2 once each, in the order given."""
  from launch import common
  assert common.group_names("--groups", ["S3", "C2", "S3"]) == ("S3", "C2")
  with pytest.raises(common.UsageError, match="--groups: unknown group 'S0'"):
    common.group_names("--groups", ["C2", "S0"])


def test_a_language_sample_prints_each_label_as_the_symbols_that_may_follow():
  """Text mode decodes the label bitmask (bit i: symbol i, bit k: may end, `$`) under each
  symbol; --json keeps the ints (tests/test_languages.py)."""
  out = run_info("--language=dyck1", "--sample=1x4", "--seed=0")
  assert out.returncode == 0, out.stderr
  lines = out.stdout.splitlines()
  inputs = [l for l in lines if l.startswith("  input: ")]
  nexts = [l for l in lines if l.startswith("  next:  ")]
  assert len(inputs) == len(nexts) == 1, out.stdout
  symbols = inputs[0][len("  input: "):].split()
  sets = nexts[0][len("  next:  "):].split()
  depth = 0
  for s, allowed in zip(symbols, sets):  # Dyck-1: ')' needs an open '(', the end needs none
    depth += 1 if s == "(" else -1
    want = "(" + (")" if depth else "$")
    assert allowed == want, f"after {''.join(symbols)}: {sets}, at depth {depth} want {want}"


def test_a_membership_tasks_language_is_described_and_sampled_with_its_own_labels():
  """`--language=parity-member` (the task lang-parity-member's name) describes parity and
  samples its membership target: under each symbol y where the word up to it has an even
  number of 1s; where the last symbol decides membership (tomita1) the task is refused, and
  so is the name here, in one line."""
  out = run_info("--language=parity-member", "--sample=1x12", "--seed=0")
  assert out.returncode == 0, out.stderr
  assert out.stdout.startswith("parity ("), out.stdout
  lines = out.stdout.splitlines()
  symbols = next(l for l in lines if l.startswith("  input: "))[len("  input: "):].split()
  member = next(l for l in lines if l.startswith("  in L:  "))[len("  in L:  "):].split()
  want = ["y" if symbols[:i + 1].count("1") % 2 == 0 else "n" for i in range(len(symbols))]
  assert member == want, f"{symbols}: {member}"
  out = run_info("--language=tomita1-member")
  assert out.returncode == 2 and out.stderr.startswith("error: task 'lang-tomita1-member'"), \
      out.stderr
  assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_a_languages_card_gives_every_registered_layers_verdict_plugins_included():
  """--language lists each layer's verdict from its class, as --group lists minimal depths:
  tomita6's monoid is C3, which aussm's class tracks with one layer and negmamba's never; the
  clock plugin (4th roots of unity) tracks parity's C2 and not tomita6's C3."""
  import json
  out = run_info("--language=tomita6", "--json")
  assert out.returncode == 0, out.stderr
  by_layer = json.loads(out.stdout)["by_layer"]
  assert (by_layer["aussm"], by_layer["negmamba"], by_layer["transformer"]) == (
      "yes", "no", "?"), by_layer
  out = run_info("--plugins=examples.clock", "--language=parity")
  assert "clock yes" in out.stdout.splitlines()[1], out.stdout
  out = run_info("--plugins=examples.clock", "--language=tomita6", "--json")
  assert json.loads(out.stdout)["by_layer"]["clock"] == "no", out.stdout
