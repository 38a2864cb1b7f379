"""Hand-built constructions track their tasks exactly through the training modules."""
import json

import jax
import numpy as np
import pytest

from ssm_bench import analytic
from ssm_bench import analytic_cascade
from ssm_bench import analytic_one_layer
from ssm_bench import analytic_signed
from ssm_bench import declaration
from ssm_bench import evaluation
from ssm_bench import models
from tasks import groups
from tasks import registry
import launcher

pytestmark = pytest.mark.heavy  # a minute or more in all: scheduled first (conftest.py)

TASKS = ["C2", "C6", "C60", "C2xC4", "C2xC30", "C2xC2xC2", "D2", "S3", "parity", "modcount5",
         "modcount7"]


def predict(cfg, params, tokens):
  """The model's predictions, compiled as evaluation compiles them (eager apply dispatched op by
  op and took 2.7-8.6 s per construction where this takes 0.5-1.5)."""
  return jax.jit(models.StateTracker(cfg).apply)(params, tokens).argmax(-1)


# Every construction through the default scan; the associative scan on one of each kind.
CASES = ([(n, "", "sequential") for n in TASKS] + [("S3", "aussm", "sequential")]
         + [(n, "", "associative") for n in ("C60", "S3", "parity", "modcount5")]
         + [("S3", "aussm", "associative"), ("parity", "deltanet", "sequential")]
         # one DeltaProduct layer: n_h = 2 (A5), 4 (Q8), and S4 through the associative scan
         # (D4 in the plane: keys of width 2)
         + [("A5", "deltaproduct", "sequential"), ("Q8", "deltaproduct", "sequential"),
            ("D4", "deltaproduct", "sequential"),
            ("S4", "deltaproduct", "associative")]
         # the solvable cascade: derived length 2 (D4, Q8, A4) and 3 (S4)
         + [(n, "simple_aussm", "sequential") for n in ("D4", "Q8", "S4")]
         + [("A4", "simple_aussm", "associative")]
         # the same cascade in full AUSSM layers: S4 (3 layers); D4, whose first quotient
         # (C2 x C2) turns two state coordinates beside the constant one its biases read; an
         # Abelian group in one
         + [("S4", "aussm", "sequential"), ("D4", "aussm", "sequential"),
            ("C2xC30", "aussm", "sequential")]
         # the signed (negmamba) cascade: elementary-2 length 2 (D4, Q8) and 3 (C8)
         + [(n, "negmamba", "sequential") for n in ("D4", "Q8", "C8")]
         # a generating-set stream of the group: the group's own constructions, on that stream
         + [("S3-gen", "", "sequential"), ("A5-gen", "deltaproduct", "sequential")]
         # two DeltaNet layers, one reflection per token: dihedral, cyclic, the Klein group
         + [(n, "deltanet", "sequential") for n in ("D4", "C60", "C2xC2")]
         + [("S3", "deltanet", "associative")]
         # one DeltaNet layer above a negmamba layer that counts for it (a hybrid's own)
         + [("C6", "negmamba,deltanet", "sequential")])


@pytest.mark.parametrize("name,model,method", CASES)
def test_construction_tracks_exactly_at_length_2000(name, model, method):
  """Length 2000 through the sequential scan; 500 through the associative one, whose
  length-1000 accuracy the scan tests check."""
  cfg, params = analytic.build(name, model=model)
  assert not model or ",".join(dict.fromkeys(cfg.layers)) == model, (
      f"asked for {model}, built {cfg.layers}")
  cfg = cfg.__class__(**{**cfg.__dict__, "scan_method": method})
  length = 2000 if method == "sequential" else 500
  task = registry.get_task(name)
  tokens, labels = evaluation.eval_set(task, 8, length)
  if method != "sequential" or set(cfg.layers) & {"deltanet", "deltaproduct"}:
    errors = int((predict(cfg, params, tokens) != labels).sum())
  else:
    # A diagonal construction is exact, not just right at 2000: each transition is a root of
    # unity of order dividing the task's class count (|G|), to float32 rounding (measured: at
    # most 1.4e-5 at order 60). An angle 0.1% off still predicts right at 2000 (its error
    # walks with the stream's signs: about 0.003 sqrt(T) rad, by estimate past the decoder's
    # margin of pi/3 near T = 10^5, short of the 10^6 the README claims); it fails here.
    logits, sown = declaration.forward(models.StateTracker(cfg), params, tokens)
    errors = int((np.asarray(logits).argmax(-1) != labels).sum())
    n = task.num_classes
    for k, a in enumerate(declaration._find(sown)):
      dev = float(np.abs(np.asarray(a, np.complex128) ** n - 1).max())
      assert dev <= 4e-7 * n, (f"{name} {model}: transitions of layer {k} are no {n}-th roots "
                               f"of unity (max |a^{n} - 1| = {dev:.3g})")
  assert errors == 0, f"{name} {model} ({method}): {errors} wrong predictions out of {labels.size}"


def test_parity_construction_also_tracks_adversarial_stream():
  cfg, params = analytic.build("parity")
  tokens, labels = evaluation.eval_set(registry.get_task("parity"), 8, 2000, "adversarial")
  assert bool((predict(cfg, params, tokens) == labels).all())


@pytest.mark.parametrize("name", ["C6", "C2xC4", "S3", "D4", "A5"])
def test_a_generating_set_task_has_its_groups_constructions(name):
  """`<group>-gen` streams are the group's elements: whatever tracks every stream of the group
  tracks them, so its constructions are the group's, the Abelian ones and the cascades too."""
  assert analytic.construction_models(f"{name}-gen") == analytic.construction_models(name)


_PADDED = [(name, model) for name in ("C6", "S3", "D4", "parity", "modcount3", "S3-gen")
           for model in analytic.construction_models(name)]


@pytest.mark.parametrize("name,model", _PADDED, ids=[f"{n}-{m}" for n, m in _PADDED])
def test_every_construction_pads_to_a_wider_model(name, model):
  """Built inside a wider model (near_solution perturbs constructions at a sweep's width), each
  construction of each kind (Abelian, S3's, the solvable and 2-group cascades, parity's,
  modcount's, DeltaProduct's; a -gen task gets its group's) is that width and still exact."""
  least, _ = analytic.build(name, model=model)
  d_model, d_state = least.d_model + 8, least.d_state + 3
  cfg, params = analytic.build(name, d_model=d_model, d_state=d_state, model=model)
  assert (cfg.d_model, cfg.d_state) == (d_model, d_state), (
      f"{name} {model}: asked {d_model} x {d_state}, built {cfg.d_model} x {cfg.d_state}")
  tokens, labels = evaluation.eval_set(registry.get_task(name), 4, 500)
  assert bool((predict(cfg, params, tokens) == labels).all()), f"{name} {model} not exact"


@pytest.mark.parametrize("name", ["C60", "C2xC30", "C2xC2xC2", "C1", "C4xC6", "C6xC6"])
def test_characters_separate_elements(name):
  chars, e = analytic_one_layer.characters(groups.get_group(name))
  keys = {tuple(col) for col in chars.T} if chars.size else {()}
  assert len(keys) == groups.get_group(name).order
  t = groups.get_group(name).table
  for c in chars:  # homomorphism: c(x y) = c(x) + c(y) mod e
    assert np.array_equal(c[t], (c[:, None] + c[None, :]) % e)


@pytest.mark.parametrize("name,model,reason", [
    ("A5", "aussm", "choose one of deltaproduct .A5 is not solvable"),
    ("A4", "mamba", "choose one of simple_aussm, aussm, deltaproduct"),
    ("flipflop", "", "no analytic construction for task 'flipflop'; constructions exist for: "
                     "a group name, <group>-gen, modcount<m>, parity$"),
    ("lang-tomita3", "", "constructions exist for: a group name, <group>-gen, modcount<m>, "
                         "parity$")])
def test_no_construction_says_why(name, model, reason):
  with pytest.raises(analytic.NoConstruction, match=reason):
    analytic.build(name, model=model)


def test_unknown_construction_model_names_the_choices():
  with pytest.raises(analytic.NoConstruction, match="simple_aussm, aussm"):
    analytic.build("S3", model="mamba")
  with pytest.raises(analytic.NoConstruction, match="choose one of negmamba"):
    analytic.build("parity", model="aussm")


def test_perturb_adds_noise_of_the_given_scale():
  _, params = analytic.build("S3")
  noisy = analytic.perturb(params, 0.01, jax.random.PRNGKey(0))
  diffs = np.concatenate([np.ravel(a - b) for a, b in zip(jax.tree.leaves(noisy), jax.tree.leaves(params))])
  assert 0.008 < diffs.std() < 0.012


@pytest.mark.parametrize("model", ["aussm"])  # simple_aussm's: the construction tests above
def test_analytic_cli_s3_at_10000_and_a5_refused(model):
  out = launcher.run(["launch.analytic", "--task=S3", "--length=10000",
                      f"--model={model}", "--num_seqs=16", "--chunk=6", "--json"], timeout=300)
  assert out.returncode == 0, out.stderr
  res = json.loads(out.stdout)
  assert res["accuracy"] == 1.0 and res["depth"] == 2 and res["length"] == 10000
  assert res["num_seqs"] == 12, f"16 sequences in chunks of 6 are 2 whole chunks: {res}"
  assert res["layer_kwargs"] == "", f"S3's {model} layers are built at their defaults: {res}"
  assert res["model"] == model, res
  bad = launcher.run(["launch.analytic", "--task=A5", "--model=aussm",
                      "--json"], timeout=300)
  assert bad.returncode != 0 and "not solvable" in bad.stderr and "Traceback" not in bad.stderr


def test_deltanet_parity_construction_exact_at_10000():
  """One DeltaNet layer with beta = 2 on the bit 1 (a reflection) computes parity exactly."""
  out = launcher.run(["launch.analytic", "--task=parity",
                      "--model=deltanet", "--length=10000", "--num_seqs=16", "--json"], timeout=600)
  assert out.returncode == 0, out.stderr[-2000:]
  res = json.loads(out.stdout)
  assert res["accuracy"] == 1.0 and res["model"] == "deltanet" and res["length"] == 10000, res


def test_a_hybrids_own_construction_is_built_and_named_bottom_first():
  """`--model=negmamba,deltanet` builds the hybrid stack's construction (`Construction.below`)
  and names it as the stack reads, bottom first, not sorted."""
  out = launcher.run(["launch.analytic", "--task=S3", "--model=negmamba,deltanet",
                      "--length=2000", "--num_seqs=4", "--json"], timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  res = json.loads(out.stdout)
  assert res["accuracy"] == 1.0 and res["model"] == "negmamba,deltanet" and res["depth"] == 2, res


def test_one_deltaproduct_layer_tracks_a5_exactly_at_10000():
  """The householder class's claim, built: two reflections per token (the icosahedron's
  rotations) track the non-solvable A5 in one layer, the default construction for A5."""
  out = launcher.run(["launch.analytic", "--task=A5", "--length=10000",
                      "--num_seqs=16", "--json"], timeout=600)
  assert out.returncode == 0, out.stderr[-2000:]
  res = json.loads(out.stdout)
  assert res["accuracy"] == 1.0 and res["model"] == "deltaproduct" and res["depth"] == 1, res


@pytest.mark.parametrize("name", ["C1", "C2", "C6", "D4", "S3", "A5", "parity", "modcount3",
                                  "flipflop", "lang-tomita3"])
def test_no_constructions_applies_or_limit_fails_on_a_task(name):
  """A construction's `applies` and `limit` answer every task, the trivial group and tasks
  without a group included: one that raises shows in `launch.info` as "its construction's
  limit failed" (e.g. a cascade with no level for C1)."""
  assert analytic.construction_limits(name) == {}, analytic.construction_limits(name)


@pytest.mark.parametrize("name", ["C1", "C6", "C2xC30", "C4", "Q8", "S3", "D4", "S4", "A5", "parity"])
def test_every_construction_is_a_case_its_layers_theory_claims(name):
  """A construction tracks its task exactly, so the declared class of its layers must say the
  stack can (never 'cannot', and a layer whose theorem is a construction must claim it); a
  unit-modulus stack is built at the theory's minimal depth (the derived length)."""
  from ssm_bench import registry as layer_registry, theory
  group = registry.get_task(name).group.name
  for model in analytic.construction_models(name):
    cfg, _ = analytic.build(name, model=model)
    classes = [layer_registry.theory_class_of(layer, cfg.layer_kwargs) for layer in cfg.layers]
    said = theory.prediction(classes, group, cfg.d_state)["expressible"]
    assert said is not False, f"{model} tracks {name} by hand, but {classes} says it cannot"
    if model == "deltaproduct":
      assert said is True, f"one DeltaProduct layer tracks {name}; {classes} claims nothing"
      from ssm_bench import reflections
      width = reflections.reflection_width(registry.get_task(name).group)
      assert cfg.d_state == width, (f"{name}: keys of width {cfg.d_state} built, the card's "
                                    f"claim needs only {width}")
    if model == "deltanet" and name != "parity":
      assert said is True and theory.min_depth(classes[0], group, width=cfg.d_state) == len(
          cfg.layers), f"{len(cfg.layers)} DeltaNet layers track {name}; {classes} claims other"
    if model in ("simple_aussm", "aussm", "negmamba"):
      least = theory.min_depth(classes[0], group)
      assert len(cfg.layers) == max(least, 1), (  # C1 needs none; a network has one
          f"{name}: {len(cfg.layers)} {model} layers built, the theory's minimum is {least}")


@pytest.mark.parametrize("name", ["S3", "D6", "Q8xC3"])
def test_solvable_cascade_tracks_groups_beyond_the_registered_defaults(name):
  """The cascade itself (S3 is built by the S3 cascade by default), on products whose quotient
  has several characters or whose derived subgroup is not cyclic."""
  from ssm_bench import analytic_cascade
  g = registry.get_task(name).group
  cfg, params = analytic_cascade.solvable(name)
  assert len(cfg.layers) == g.derived_length, (name, cfg.layers)
  tokens, labels = evaluation.eval_set(registry.get_task(name), 8, 1000)
  errors = int((predict(cfg, params, tokens) != labels).sum())
  assert errors == 0, f"{name}: {errors} wrong predictions out of {labels.size}"


def test_the_aussm_cascade_hands_each_level_exactly_one_hot_inputs():
  """A level's pairs give the next level's one-hots as relu(a) - relu(a - 1): exactly 0 or 1,
  or the next level's angle drifts with the error (S4 in three AUSSM layers first erred at step
  949,612 of 10^6 when these read 0.99999976)."""
  from ssm_bench import analytic_cascade
  cfg, params = analytic_cascade.solvable("S4", layer="aussm")
  tokens, _ = evaluation.eval_set(registry.get_task("S4"), 4, 300)
  _, state = jax.jit(lambda p, t: models.StateTracker(cfg).apply(
      p, t, capture_intermediates=True))(params, tokens)
  for i in range(len(cfg.layers) - 1):
    kernel = np.asarray(params["params"][f"out{i}"]["kernel"])  # pairs write +-1/32 to a target
    targets = [c for c in range(kernel.shape[1]) if (kernel[:, c] > 0).any() and
               (kernel[:, c] < 0).any()]
    values = np.unique(np.asarray(state["intermediates"][f"out{i}"]["__call__"][0])[..., targets])
    assert targets and set(values.tolist()) <= {0.0, 1.0}, f"level {i + 1} reads {values[:6]}"


def test_cascades_refuse_groups_outside_their_class():
  with pytest.raises(analytic.NoConstruction, match="A5 is not a solvable group"):
    analytic_cascade.solvable("A5")
  with pytest.raises(analytic.NoConstruction, match="S3 is not a 2-group"):
    analytic_signed.signed("S3")


def test_a_fallback_construction_is_never_a_tasks_default():
  """negmamba's 2-group cascade is a fallback: Abelian and 2-groups keep the rotation layer."""
  for name in ("C2", "C4", "D4", "Q8"):
    models_ = analytic.construction_models(name)
    assert models_[0] == "simple_aussm" and "negmamba" in models_, (name, models_)
  assert analytic.construction_models("parity")[0] == "negmamba"


def test_a_construction_too_large_to_allocate_is_refused_before_allocating():
  """S4xC30's cascade asks for 87,228 channels (a 28 GiB kernel; D2520's was killed at 24 GiB):
  refused from the abstract shapes, with the count, instead of a MemoryError or the OOM killer;
  and not listed as held by hand (`launch.info`), the limit saying why, while its
  DeltaProduct layer (order 720) becomes the group's default."""
  too_large = r"30,562,947,366 parameters \(width 87228\)"
  with pytest.raises(analytic.NoConstruction, match=too_large):
    analytic_cascade.solvable("S4xC30")  # the build itself refuses too
  with pytest.raises(analytic.NoConstruction, match="no simple_aussm construction .*" + too_large):
    analytic.build("S4xC30", model="simple_aussm")
  from ssm_bench import registry as layer_registry
  # the built-in layers' (plugins that other tests in this process loaded have cascades too)
  builtin = lambda names: sorted(m for m in names if layer_registry.get(m).builtin)
  assert builtin(analytic.construction_models("S4xC30")) == ["deltaproduct"], (
      "a cascade too large to build is listed as held by hand: "
      f"{analytic.construction_models('S4xC30')}")
  limits = analytic.construction_limits("S4xC30")
  assert builtin(limits) == ["aussm", "simple_aussm"] and "87228" in limits["simple_aussm"], limits
  assert analytic.construction_limits("S4") == {} and "simple_aussm" in analytic.constructions(
      "S4"), "S4's cascade is small and built"


def test_deltaproduct_is_not_offered_above_the_order_its_representation_is_searched_to():
  """Above reflections.MAX_ORDER the witness is never searched for (S7's eigenproblem ran for
  minutes): the construction is not listed, and the refusal says why."""
  from ssm_bench import reflections
  assert groups.get_group("A7").order > reflections.MAX_ORDER
  assert "deltaproduct" not in analytic.constructions("A7"), analytic.constructions("A7")
  assert "720" in analytic.construction_limits("A7").get("deltaproduct", ""), (
      analytic.construction_limits("A7"))
  with pytest.raises(analytic.NoConstruction, match="deltaproduct: .*above order 720"):
    analytic.build("A7")
  assert analytic.construction_limits("A5") == {}, "A5's DeltaProduct layer is built"
  with pytest.raises(analytic.NoConstruction,
                     match="no deltaproduct construction for C2xC400; choose one of simple_aussm"
                           ".* above order 720, and C2xC400 has order 800"):
    analytic.build("C2xC400", model="deltaproduct")  # other layers' constructions exist


@pytest.mark.parametrize("name,kwargs", [("C4", ""), ("D4", ""), ("Q8", ""), ("S3", '{"m":6}'),
                                         ("A4", '{"m":6}'), ("S4", '{"m":6}'), ("C3", '{"m":3}')])
def test_a_plugins_clock_cascade_tracks_exactly_at_the_depth_its_class_claims(name, kwargs):
  """examples/clock.py builds the unit-modulus cascade from clocks (every transition an m-th root
  of unity), at the default m = 4 where its roots hold the derived quotients' characters, else at
  the least m that does: exact at 2000 steps, every transition one of the m roots, at the
  depth the class roots_of_unity:m claims, the kwargs it declares the ones it builds at."""
  from ssm_bench import plugins, registry as layer_registry, theory
  plugins.load("examples.clock")
  cfg, params = analytic.build(name, model="clock")
  assert cfg.layer_kwargs == kwargs, f"{name}: built at {cfg.layer_kwargs!r}, want {kwargs!r}"
  assert analytic.held_by_hand(name, "clock", kwargs) == {"layer_kwargs": kwargs,
                                                          "at_these_kwargs": True}
  cls = layer_registry.theory_class_of("clock", kwargs)
  assert len(cfg.layers) == theory.min_depth(cls, registry.get_task(name).group.name), (
      f"{name}: {len(cfg.layers)} clocks built, {cls} claims {theory.min_depth(cls, name)}")
  tokens, labels = evaluation.eval_set(registry.get_task(name), 8, 2000)
  logits, sown = declaration.forward(models.StateTracker(cfg), params, tokens)
  errors = int((np.asarray(logits).argmax(-1) != labels).sum())
  assert errors == 0, f"{name}: {errors} wrong predictions out of {labels.size}"
  m = layer_registry.layer_kwargs(("clock",), kwargs)[0]["m"]
  for k, a in enumerate(declaration._find(sown)):
    dev = float(np.abs(np.asarray(a, np.complex128) ** m - 1).max())
    assert dev <= 1e-5, f"{name}: layer {k}'s transitions are no {m}-th roots (off by {dev:.3g})"


@pytest.mark.parametrize("name", ["C6", "S3", "S4"])
def test_a_decaying_plugin_holds_aussms_cascade_with_its_decay_off(name):
  """examples/decaying_aussm.py writes AUSSM's cascade into its own parameters through the public
  writer (`analytic_cascade.AussmLayers`: C cartesian, the decay's bias at -30): exact at 2000
  steps, at the derived length its class claims, every transition of modulus 1 (to cos and
  sin's float32 rounding)."""
  from ssm_bench import plugins, registry as layer_registry, theory
  plugins.load("examples.decaying_aussm")
  cfg, params = analytic.build(name, model="decaying_aussm")
  cls = layer_registry.theory_class_of("decaying_aussm")
  assert len(cfg.layers) == theory.min_depth(cls, name), (
      f"{name}: {len(cfg.layers)} layers built, {cls} claims {theory.min_depth(cls, name)}")
  tokens, labels = evaluation.eval_set(registry.get_task(name), 8, 2000)
  logits, sown = declaration.forward(models.StateTracker(cfg), params, tokens)
  errors = int((np.asarray(logits).argmax(-1) != labels).sum())
  assert errors == 0, f"{name}: {errors} wrong predictions out of {labels.size}"
  for k, a in enumerate(declaration._find(sown)):
    dev = float(np.abs(np.abs(np.asarray(a, np.complex128)) - 1).max())
    assert dev <= 1e-6, f"{name}: layer {k}'s transitions decay (|a| off 1 by {dev:.3g})"


def test_a_plugins_cascade_is_sized_at_the_kwargs_it_is_built_at(monkeypatch):
  """The clock's D5 cascade takes m = 10 (C2 over C5): its size limit must be the config built
  at m = 10, not at the default m = 4 (a cascade over analytic.MAX_PARAMS at its own kwargs
  would be offered, or one within refused)."""
  from ssm_bench import plugins, registry as layer_registry
  plugins.load("examples.clock")
  [cascade] = layer_registry.get("clock").constructions
  sized = []
  monkeypatch.setattr(analytic, "oversize", lambda cfg, *a: sized.append(cfg.layer_kwargs) or "")
  assert cascade.applies("D5") and sized == ['{"m":10}'], sized


def test_every_construction_declares_the_kwargs_it_builds_at():
  """A construction's `kwargs(task)` is what its build writes into the config (DeltaProduct's
  n_h, the clock's m): a card or profile at other kwargs then does not count the task as held."""
  from ssm_bench import plugins, registry as layer_registry
  plugins.load("examples.clock")
  checked = 0
  for name in ("C2", "C3", "C2xC2", "C6", "D4", "Q8", "S3", "A4", "S4", "A5", "parity",
               "modcount5"):
    for model in analytic.construction_models(name):
      cfg, _ = analytic.build(name, model=model)
      held = analytic.held_by_hand(name, model, cfg.layer_kwargs)
      assert held["at_these_kwargs"], f"{name} {model}: declares {held}, builds at {cfg.layer_kwargs!r}"
      layers = tuple(model.split(","))  # a layer, or a hybrid stack's own construction
      full = layer_registry.layer_kwargs(layers, held["layer_kwargs"])
      assert full == layer_registry.layer_kwargs(layers, cfg.layer_kwargs), (name, model)
      checked += 1
  assert checked > 30, f"only {checked} constructions checked"
  assert analytic.held_by_hand("Q8", "deltaproduct") == {"layer_kwargs": '{"n_h":4}',
                                                         "at_these_kwargs": False}
  assert analytic.held_by_hand("S3", "mamba") is None
  # built at the registered default n_h (2) where the reflection length fits in it: C2's is 1
  assert analytic.held_by_hand("C2", "deltaproduct") == {"layer_kwargs": "", "at_these_kwargs": True}, \
      "DeltaProduct's C2 is not built at the default n_h"


@pytest.mark.parametrize("name", ["D4", "S3", "C6", "C2"])
def test_two_deltanet_layers_apply_one_reflection_per_token(name):
  """The dihedral construction stays inside DeltaNet's class as its theorem says: every token's
  transition in both layers is the identity or one reflection I - 2 k k^T (beta = 2, a unit key),
  and the first layer hands the second one-hots of (token, rotations mod 2), exactly 0 or 1."""
  from ssm_bench import analytic_dihedral, declaration
  cfg, params = analytic.build(name, model="deltanet")
  assert cfg.layers == ("deltanet", "deltanet"), cfg.layers
  tokens, labels = evaluation.eval_set(registry.get_task(name), 4, 200)
  logits, sown = declaration.forward(models.StateTracker(cfg), params, tokens)
  assert bool((np.asarray(logits).argmax(-1) == labels).all()), f"{name}: not exact"
  for k, a in enumerate(declaration._find(sown)):
    a = np.asarray(a, np.float64).reshape((-1,) + np.shape(a)[-2:])
    eye = np.eye(a.shape[-1])
    ranks = np.linalg.matrix_rank(eye - a, tol=1e-5)
    assert ranks.max() <= 1, f"{name} layer {k}: a transition moves {ranks.max()} directions"
    assert np.abs(a @ a - eye).max() < 1e-5, f"{name} layer {k}: a transition is no reflection"
  x = models.StateTracker(cfg).apply(params, tokens, capture_intermediates=True,
                                     mutable=["intermediates"])[1]["intermediates"]
  hot = np.asarray(x["out0"]["__call__"][0])[..., 2:2 + 2 * cfg.vocab_size]
  assert set(np.unique(hot)) <= {0.0, 1.0} and (hot.sum(-1) == 1).all(), (
      f"{name}: the second layer's inputs are not one-hot: {np.unique(hot)[:8]}")
  assert analytic_dihedral.plane_representation(registry.get_task("Q8").group) is None


@pytest.mark.parametrize("name", ["D4", "S3", "C6", "C2xC2"])
def test_a_negmamba_layer_counts_the_rotations_for_a_deltanet_layer_above_it(name):
  """The householder class's `above` rule, built (analytic_dihedral.signed_plane): negmamba's
  transitions are the signs +-1 (its class), DeltaNet's the identity or one reflection, and
  the residual between them holds the one-hot of (token, rotations mod 2), exactly 0 or 1;
  exact at 2000 here (at 10^6 in BUILD_NOTES)."""
  from ssm_bench import analytic_dihedral, declaration
  cfg, params = analytic_dihedral.signed_plane(name)
  assert cfg.layers == ("negmamba", "deltanet"), cfg.layers
  tokens, labels = evaluation.eval_set(registry.get_task(name), 8, 2000)
  logits, sown = declaration.forward(models.StateTracker(cfg), params, tokens)
  wrong = int((np.asarray(logits).argmax(-1) != labels).sum())
  assert wrong == 0, f"{name}: {wrong} wrong predictions out of {labels.size}"
  signs, reflections = declaration._find(sown)
  assert set(np.unique(np.asarray(signs))) <= {-1.0, 1.0}, np.unique(np.asarray(signs))[:8]
  a = np.asarray(reflections, np.float64).reshape((-1,) + np.shape(reflections)[-2:])
  eye = np.eye(a.shape[-1])
  assert np.linalg.matrix_rank(eye - a, tol=1e-5).max() <= 1, f"{name}: two reflections a token"
  x = models.StateTracker(cfg).apply(params, tokens[:, :200], capture_intermediates=True,
                                     mutable=["intermediates"])[1]["intermediates"]
  order = cfg.vocab_size
  hot = np.asarray(x["out0"]["__call__"][0])[..., 2 + order:2 + 3 * order]
  assert set(np.unique(hot)) <= {0.0, 1.0} and (hot.sum(-1) == 1).all(), (
      f"{name}: the DeltaNet layer's inputs are not one-hot: {np.unique(hot)[:8]}")


def test_a_negmamba_layer_under_a_deltanet_layer_tracks_d4_exactly_for_a_million_steps():
  """What BUILD_NOTES claims of signed_plane at 10^6 (D4, S3, C6 on 16 sequences, C60 on 4),
  checked here on 2 sequences of D4 as `launch.analytic` evaluates a construction."""
  from ssm_bench import analytic_dihedral
  cfg, params = analytic_dihedral.signed_plane("D4")
  tokens, labels = evaluation.eval_set(registry.get_task("D4"), 2, 1_000_000)
  correct = evaluation.make_correctness_fn(models.StateTracker(cfg).apply, 2)(
      params, tokens, labels)
  got = evaluation.at_length(correct)
  assert got["accuracy"] == 1.0 and got["first_error"] is None, got


_GRADS = [(name, model) for name in ("C6", "S3", "D4", "Q8", "A5", "parity", "modcount5")
          for model in analytic.construction_models(name)]


@pytest.mark.parametrize("name,model", _GRADS, ids=[f"{n}-{m}" for n, m in _GRADS])
def test_every_construction_has_finite_gradients_at_its_weights(name, model):
  """near_solution trains from a construction (plus noise 0 and up): a weight where the loss
  has no gradient (a zero key or a zero state row, whose normalization's gradient is NaN) made
  every run from it diverge at step 1."""
  import jax.numpy as jnp
  least, _ = analytic.build(name, model=model)  # and padded, as near_solution builds it
  cfg, params = analytic.build(name, least.d_model + 4, least.d_state + 2, model=model)
  tokens, labels = evaluation.eval_set(registry.get_task(name), 2, 20)

  def loss(p):
    logp = jax.nn.log_softmax(models.StateTracker(cfg).apply(p, tokens))
    return -jnp.take_along_axis(logp, jnp.asarray(labels)[..., None], -1).mean()

  grads = jax.tree_util.tree_leaves_with_path(jax.jit(jax.grad(loss))(params))
  bad = [jax.tree_util.keystr(path) for path, g in grads if not bool(jnp.isfinite(g).all())]
  assert not bad, f"{name} {model}: non-finite gradients in {bad}"
