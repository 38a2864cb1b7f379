"""Test your own layer: the registry, plugins from outside the package through every entry point,
bad plugin input, theory for unknown classes, and the declaration check on a layer that lies."""
import dataclasses
import json
import os
import re
import subprocess
import sys

import jax
import numpy as np
import pytest

from ssm_bench import declaration
from ssm_bench import failures
from ssm_bench import models
from ssm_bench import plugins
from ssm_bench import registry
from ssm_bench import runs
from ssm_bench import state_widths
from ssm_bench import tables
from ssm_bench import theory
from ssm_bench import tracking_profile
from ssm_bench.config import PRESETS, ModelConfig, TrainConfig

import launcher

pytestmark = pytest.mark.heavy  # a minute or more in all: scheduled first (conftest.py)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the example layer lives in examples/ (found from the repository root); the test plugins here
ENV = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "tests"), "SSM_BENCH_CACHE": "off"}
BUILTIN_NAMES = ("mamba", "negmamba", "aussm", "simple_aussm", "s4d", "rnn", "ids4", "lstm", "gru",
                 "deltanet", "deltaproduct", "transformer")


def run(module, *args, timeout=600):
  return launcher.run([module, *args], cwd=ROOT, env=ENV, timeout=timeout)


def test_builtins_register_through_the_public_call():
  from ssm_bench.layers import builtin
  assert {s.name for s in registry.specs() if s.builtin} == set(BUILTIN_NAMES)
  src = open(builtin.__file__).read()
  assert src.count("register_layer(") == len(BUILTIN_NAMES), "a built-in bypasses register_layer"
  # listed (cards, usage lines, --model's choices) in builtin.py's order, a plugin's after them
  order = tuple(re.findall(r'register_layer\(\s*"(\w+)"', src))
  assert registry.names()[:len(order)] == order, f"names() is not in registration order: " \
      f"{registry.names()}"
  with pytest.raises(registry.LayerError, match="already registered by ssm_bench.layers.builtin"):
    registry.register_layer("aussm", lambda cfg, **kw: None, theory_class="unknown")


def test_the_same_builder_again_is_a_no_op_only_with_the_same_record():
  """A plugin imported twice re-registers its layer: the same record is kept. The same builder
  with another class (a user re-declaring mamba as signed) was silently the first record, so
  its tables printed the class the user meant to drop."""
  spec = registry.find("mamba")
  again = dict(theory_class=spec.theory_class, scan_family=spec.scan_family,
               kwargs=dict(spec.kwargs), presets={p: dict(v) for p, v in spec.presets.items()},
               uses_scan_method=spec.uses_scan_method)
  assert registry.register_layer("mamba", spec.builder, **again) is spec
  with pytest.raises(registry.LayerError, match="with another record .class nonnegative_diagonal"):
    registry.register_layer("mamba", spec.builder, **{**again, "theory_class": "signed_diagonal"})
  assert registry.find("mamba") is spec, "a refused registration replaced the record"


FIRST_USE_FROM_THREADS = """
import threading
from ssm_bench import registry
barrier, seen = threading.Barrier(8), []

def first_use():
  barrier.wait()
  seen.append(len(registry.names()))

threads = [threading.Thread(target=first_use) for _ in range(8)]
for t in threads:
  t.start()
for t in threads:
  t.join()
print(sorted(seen))
"""


def test_threads_that_first_use_the_registry_at_once_all_see_every_builtin():
  """The built-ins load on first use; a thread arriving while another loads them waits for the
  whole set (it once saw an empty registry: "unknown model 'mamba'; choose from ")."""
  out = subprocess.run([sys.executable, "-c", FIRST_USE_FROM_THREADS], capture_output=True,
                       text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  assert out.stdout.strip() == str([len(BUILTIN_NAMES)] * 8), (
      f"layers seen per thread: {out.stdout.strip()}, want {len(BUILTIN_NAMES)} in each")


@pytest.mark.parametrize("path", ["ssm_bench/theory.py", "ssm_bench/theory_builtin.py",
                                  "ssm_bench/tables.py", "ssm_bench/scan/__init__.py", "ssm_bench/scan/factors.py",
                                  "ssm_bench/scan/chunked.py", "ssm_bench/scan/pallas.py",
                                  "ssm_bench/scan/reference.py"])
def test_no_layer_names_outside_the_registry(path):
  text = open(os.path.join(ROOT, path)).read()
  found = [n for n in BUILTIN_NAMES if re.search(rf"[\"']{n}[\"']", text)]  # as a string literal
  assert not found, f"{path} names layers {found}: their facts belong in the layer records"


@pytest.mark.parametrize("args,problem", [
    (["--plugins=no_such_pkg.layers", "--model=x"], "cannot import plugin 'no_such_pkg.layers'"),
    (["--plugins=plugin_layers.badshape:nope", "--model=wide"], "has no function 'nope'"),
    (["--plugins=plugin_layers.badshape:nn", "--model=wide"],  # an attribute, not a function
     "has no function 'nn' (nn is not callable)"),
    (["--plugins=plugin_layers.clash", "--model=mamba"], "'mamba' is already registered"),
    (["--plugins=plugin_layers.badclass", "--model=mamba"],
     "plugin 'plugin_layers.badclass': theory class name 'My-Class' must be lower-case"),
    (["--plugins=plugin_layers.badinclude", "--model=mamba"],  # clock's class not loaded
     "theory class 'clock_and_more': includes 'roots_of_unity', which is no other class "
     "registered before it (a plugin's own: register it first)"),
    (["--plugins=plugin_layers.badshape:register", "--model=wide"], "returned shape"),
    (["--plugins=plugin_layers.peek:register", "--model=peek"],
     "is not causal at initialisation: the output at position"),
    (["--plugins=plugin_layers.badfactors", "--model=badfactors"],
     "decay factors: B has shape (1, 1000, 3); expected (1, 1000, 2) or (8, 2)"),  # eval length
    (["--plugins=examples.rotation", "--model=rotation", '--layer_kwargs={"r": 1}'],
     "not taken by rotation"),
    (["--plugins=examples.rotation", "--model=rotation", "--layer_kwargs=[1]"], "JSON object"),
    (["--plugins=bad/path.py", "--model=x"], "importable module names"),
    # a class function failing for the run's kwargs (trained, then the tables failed on it)
    (["--plugins=plugin_layers.classfn", "--model=classfn", '--layer_kwargs={"mode": "bad"}'],
     "its theory_class for kwargs {'mode': 'bad'} failed: ValueError: unknown theory class"),
    # a parameter on a class that takes none (was: parsed, the parameter ignored)
    (["--plugins=plugin_layers.damped", "--model=damped",
      '--layer_kwargs={"cls": "unit_modulus_diagonal:3"}'],
     "theory class 'unit_modulus_diagonal:3': unit_modulus_diagonal takes no parameter"),
    (["--plugins=plugin_layers.classfn", "--model=classfn", '--layer_kwargs={"mode": "boom"}'],
     "failed: RuntimeError: no class for boom"),
    (["--plugins=plugin_layers.classfn", "--model=classfn",
      '--layer_kwargs={"mode": "widthless"}'],
     "state_width(config, kwargs) failed for kwargs {'mode': 'widthless'}: ZeroDivisionError"),
    # a class whose rule misbehaves on the task (trained, then the tables failed on it)
    (["--plugins=plugin_layers.badstep", "--model=badstep"],
     "theory class 'identityless': its step from a subgroup of order 2 of C2"),
])
def test_bad_plugin_input_is_one_line_and_leaves_no_run_directory(tmp_path, args, problem):
  work = tmp_path / "run"
  p = run("launch.train", *args, "--task=C2", "--preset=tiny", f"--workdir={work}")
  lines = p.stderr.strip().splitlines()
  assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), p.stderr[-2000:]
  assert problem in lines[0], lines[0]
  assert not work.exists(), "a refused run left a run directory"


@pytest.mark.parametrize("command", [["launch.info", "--model=badstep"],
                                     ["launch.info", "--group=S3"],
                                     ["launch.sweep", "--sweep=tiny", "--config.model=badstep"],
                                     # a language whose monoid has a group (C2): its table
                                     # reads the rule on it
                                     ["launch.train", "--model=badstep", "--task=lang-tomita3",
                                      "--preset=tiny"]])
def test_a_plugin_class_whose_rule_misbehaves_is_one_line_where_the_theory_is_read(tmp_path,
                                                                                     command):
  """A theory class whose step returns no subgroup passes registration; the card, the group
  record and a sweep of its layer (before any run directory: its tables would read the rule)
  end in one line naming the class (not a traceback, and not "no theorem", which would read a
  broken rule as a gap in the theory). launch.train on a group: the bad-input cases above."""
  work = tmp_path / "runs"
  extra = [f"--workdir={work}"] if command[0] != "launch.info" else []
  p = run(*command, "--plugins=plugin_layers.badstep", *extra)
  lines = p.stderr.strip().splitlines()
  assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), p.stderr[-2000:]
  assert "theory class 'identityless'" in lines[0] and "not a subgroup" in lines[0], lines[0]
  assert not work.exists(), "a refused sweep left run directories"


def _register_isolated(monkeypatch, module: str):
  """Run a test plugin into a copy of the registry, undone after the test: a layer made to fail
  must not reach the registry other tests in this worker read."""
  import importlib.util
  registry.specs()  # the built-ins first: copied with the rest
  monkeypatch.setattr(registry, "_LAYERS", dict(registry._LAYERS))
  path = os.path.join(ROOT, "tests", "plugin_layers", f"{module}.py")
  spec = importlib.util.spec_from_file_location(f"_isolated_{module}", path)
  spec.loader.exec_module(importlib.util.module_from_spec(spec))


def _line_of(module: str, text: str) -> int:
  path = os.path.join(ROOT, "tests", "plugin_layers", f"{module}.py")
  return next(i for i, line in enumerate(open(path), 1) if text in line)


def test_a_plugins_failure_names_the_line_of_its_own_code_that_raised(monkeypatch, capsys):
  """The one-line error hid where the researcher's code failed. It names the innermost frame of
  the plugin's own file: not jax's or flax's, and not the suite's, where a Factors check that
  the layer's call failed is raised. SSM_BENCH_TRACEBACK=1 prints the whole traceback too."""
  monkeypatch.delenv(failures.ENV, raising=False)
  with pytest.raises(plugins.PluginError) as e:
    plugins.load("plugin_layers.missing_dependency")
  where = f"missing_dependency.py:{_line_of('missing_dependency', 'import_module(')} in <module>"
  assert where in str(e.value) and "\n" not in str(e.value), str(e.value)
  _register_isolated(monkeypatch, "classfn")
  with pytest.raises(registry.LayerError) as e:
    registry.check_classes(("classfn",), '{"mode": "boom"}')
  assert f"classfn.py:{_line_of('classfn', 'no class for boom')} in _class" in str(e.value), (
      str(e.value))
  _register_isolated(monkeypatch, "badfactors")
  cfg = ModelConfig(layers=("badfactors",), vocab_size=2, num_classes=2, d_model=4, d_state=2)
  with pytest.raises(registry.LayerError) as e:
    models.check(cfg)
  where = f"badfactors.py:{_line_of('badfactors', 'diagonal_scan(')} in __call__"
  assert where in str(e.value), f"not the layer's own line: {e.value}"
  assert failures.ENV in str(e.value) and not capsys.readouterr().err
  monkeypatch.setenv(failures.ENV, "1")
  with pytest.raises(registry.LayerError):
    models.check(cfg)
  assert "Traceback" in capsys.readouterr().err, "SSM_BENCH_TRACEBACK=1 printed no traceback"


def test_a_class_function_that_fails_for_a_runs_kwargs_reads_unknown_in_tables(monkeypatch):
  """A run stored before its class function was checked (or with a plugin changed since):
  the tables' classes read `unknown` (a `?`), and a failing state_width d_state, not a
  traceback."""
  _register_isolated(monkeypatch, "classfn")
  assert registry.theory_classes("classfn", 2, '{"mode": "bad"}') == ["unknown"] * 2
  assert registry.theory_class_of("classfn", '{"mode": "boom"}') == "unknown"
  assert registry.theory_class_of("classfn") == "nonlinear_or_dense"
  assert state_widths.state_width("classfn", {"d_state": 8}, '{"mode": "widthless"}') == 8, (
      "a state_width failing for a stored run's kwargs reads as d_state")
  assert registry.theory_classes("mamba,classfn", 2, '{"mode": "ok"}') == [
      "nonnegative_diagonal", "nonlinear_or_dense"], "kwargs of one layer of a hybrid"


def test_a_plugin_construction_that_fails_is_its_layers_line_not_a_traceback(monkeypatch):
  """Its `applies` raising on S3 is listed as why it is not built there (the other layers'
  constructions still listed); its `build` raising is a NoConstruction naming the layer; kwargs
  it declares that its layer does not take hold nothing, not a traceback."""
  from ssm_bench import analytic
  _register_isolated(monkeypatch, "badconstruction")
  limits = analytic.construction_limits("S3")
  assert "applies failed on S3: KeyError" in limits.get("badcons", ""), limits
  assert "simple_aussm" in analytic.constructions("S3") and "badcons" not in (
      analytic.constructions("S3"))
  assert "badcons" in analytic.construction_models("C4")
  with pytest.raises(analytic.NoConstruction,
                     match="badcons: its construction's build failed on C4: RuntimeError"):
    analytic.build("C4", model="badcons")
  # kwargs its layer does not take: held nowhere (a card or profile shows it as not held)
  assert analytic.held_by_hand("C4", "badcons") is None


def test_a_plugins_preset_values_reach_the_runs_of_every_entry_point(tmp_path):
  """launch.train computed the preset's values before it loaded --plugins, so a plugin layer's
  own values for the preset were never applied (its runs trained at the preset's width)."""
  work = tmp_path / "run"
  p = run("launch.train", "--plugins=plugin_layers.classfn", "--model=classfn", "--task=C2",
          "--preset=tiny", f"--workdir={work}")
  assert p.returncode == 0, p.stderr[-2000:]
  assert json.load(open(work / "config.json"))["d_model"] == 12, "the plugin's tiny d_model"
  p = run("launch.sweep", "--sweep=tiny", "--plugins=plugin_layers.classfn",
          "--config.model=classfn", "--dry_run")
  assert p.returncode == 0 and "classfn depth 1 d_model 12 " in p.stdout, p.stdout + p.stderr


@pytest.mark.parametrize("record,problem", [
    (dict(presets={"cpuu": {"d_model": 8}}), "unknown preset 'cpuu' in its presets; choose from"),
    (dict(presets={"cpu": {"d_modle": 8}}), "preset 'cpu' sets 'd_modle', not config fields"),
    (dict(presets={"cpu": {"d_model": -3}}), "preset 'cpu': d_model must be a positive integer"),
    (dict(constructions=(lambda task: True,)), "constructions must be analytic.Construction"),
    (dict(description=5), "description must be a string, got 5"),
    # a list default is no config value: layer_kwargs and run names take JSON scalars only
    (dict(kwargs={"sizes": [1, 2]}), "kwargs must map names to JSON scalars, got 'sizes': [1, 2]"),
    # a family diagonal_scan does not know: its fused kernels would never apply, silently
    (dict(scan_family="decayy"), "unknown scan_family 'decayy'; choose one of decay,")])
def test_a_bad_record_is_refused_when_it_registers(monkeypatch, record, problem):
  """A typo in a preset's name or field was never applied, silently, and a bad value trained;
  a construction that is not a record failed every group's listing in launch.info."""
  registry.specs()
  monkeypatch.setattr(registry, "_LAYERS", dict(registry._LAYERS))
  with pytest.raises(registry.LayerError, match=re.escape(problem)):
    registry.register_layer("sized", lambda cfg, **kw: None, theory_class="unknown", **record)


@pytest.mark.parametrize("name,builder,problem", [
    ("my-layer", lambda cfg, **kw: None, "layer name 'my-layer' must be lower-case letters"),
    ("MyLayer", lambda cfg, **kw: None, "layer name 'MyLayer' must be lower-case letters"),
    ("wide", 5, "layer 'wide': the builder must be callable, got 5")])
def test_a_bad_name_or_builder_is_refused_when_it_registers(monkeypatch, name, builder, problem):
  """A name is a --model value (a comma list is a hybrid stack) and part of every run
  directory's name and every --only regex over them: lower-case letters, digits and '_' only.
  A builder that cannot be called would fail at the first run's network, not at its import."""
  registry.specs()
  monkeypatch.setattr(registry, "_LAYERS", dict(registry._LAYERS))
  with pytest.raises(registry.LayerError, match=re.escape(problem)):
    registry.register_layer(name, builder, theory_class="unknown")
  assert registry.find(name) is None, "a refused layer was registered"


@pytest.mark.parametrize("given,problem", [
    ('{"heads": true}', "'heads' of transformer must be int (default 4), got True"),
    ('{"heads": 2.0}', "'heads' of transformer must be int (default 4), got 2.0"),
    ('{"sink": 1}', "'sink' of transformer must be bool"),
    ('{"heads": [4]}', "layer_kwargs must be a JSON object of scalars"),
])
def test_a_layer_kwarg_of_another_type_than_its_default_is_refused(given, problem):
  """JSON's true is not an int here (Python's bool is one), nor 2.0; an int is taken for a
  float default only."""
  with pytest.raises(registry.LayerError, match=re.escape(problem)):
    registry.layer_kwargs(("transformer",), registry.canonical_kwargs(given))
  assert registry.layer_kwargs(("deltaproduct",), '{"beta_max":1}')[0]["beta_max"] == 1.0


def test_a_plugin_whose_own_import_fails_is_told_from_one_not_on_the_path():
  with pytest.raises(plugins.PluginError, match="failed on import: ModuleNotFoundError: No "
                     "module named 'ssm_bench_no_such_dependency'"):
    plugins.load("plugin_layers.missing_dependency")
  with pytest.raises(plugins.PluginError, match="no such module on the path"):
    plugins.load("plugin_layers.not_there")


def test_a_plugins_register_function_runs_once_per_process():
  """Every run of a sweep loads its plugins again (`train.model_config`): `module:register` is
  called on the first load only (plugins.load: once per process), so work it does is done once."""
  from plugin_layers import counted
  for _ in range(3):
    plugins.load("plugin_layers.counted:register")
  assert counted.CALLS == 1, f"register() ran {counted.CALLS} times in one process"


EXAMPLES = sorted(f"examples.{f[:-3]}" for f in os.listdir(os.path.join(ROOT, "examples"))
                  if f.endswith(".py") and not f.startswith("_"))


@pytest.mark.parametrize("module", EXAMPLES)
def test_each_example_layer_keeps_its_declared_class_and_reads_no_token_ahead(module):
  """The examples are what a researcher copies: each layer they register sows transitions in
  the class it declares and is causal, at init on random inputs (as `launch.info --model`)."""
  from ssm_bench import causality
  plugins.load(module)
  layers = [s.name for s in registry.specs() if s.source == module]
  assert layers, f"{module} registers no layer"
  for name in layers:
    checks = causality.checks_at_init((name,))
    decl = checks["declaration_at_init"]
    assert decl["checked"] and decl["ok"], f"{module}'s {name} leaves its class: {decl}"
    assert checks["causal_at_init"]["ok"], f"{module}'s {name} reads ahead"


def test_layer_kwargs_are_part_of_the_run_identity_and_reach_the_layer():
  plugins.load("examples.rotation")
  a = TrainConfig(model="rotation", plugins="examples.rotation")
  b = a.replace(layer_kwargs='{ "angle_scale": 2 }')
  assert b.layer_kwargs == '{"angle_scale":2}', "layer_kwargs not stored canonically"
  assert runs.run_name(a) != runs.run_name(b) and a.shape_key() != b.shape_key()
  cfg = ModelConfig(layers=("rotation",), layer_kwargs=b.layer_kwargs, d_model=4, d_state=2)
  params = models.StateTracker(cfg).init(jax.random.PRNGKey(0), jax.numpy.zeros((1, 3), int))
  tokens = declaration.random_tokens(2, 1, 3)
  _, s1 = models.StateTracker(cfg).apply(params, tokens, mutable=["intermediates"])
  _, s2 = models.StateTracker(cfg.__class__(**{**cfg.__dict__, "layer_kwargs": ""})).apply(
      params, tokens, mutable=["intermediates"])
  t1, t2 = (jax.numpy.angle(s["intermediates"]["layer0"]["transition"][0]) for s in (s1, s2))
  assert not jax.numpy.allclose(t1, t2), "angle_scale did not reach the layer"
  # a boolean kwarg too: input_term false builds no input projection
  off = ModelConfig(layers=("rotation",), layer_kwargs='{"input_term":false}', d_model=4,
                    d_state=2)
  layer = models.StateTracker(off).init(jax.random.PRNGKey(0), jax.numpy.zeros((1, 3), int))
  assert "B" not in layer["params"]["layer0"] and "B" in params["params"]["layer0"], (
      f"input_term false should drop the input term B: {sorted(layer['params']['layer0'])}")


def test_a_decaying_complex_diagonal_layer_has_the_derived_length_and_passes_its_check():
  """plugin_layers/damped.py: transitions r exp(i theta) with r < 1. The paper's theorems hold
  at any modulus, so complex_diagonal predicts the derived length as unit-modulus does, and
  the layer's transitions pass that class's check where the unit-modulus one flags them."""
  plugins.load("plugin_layers.damped")
  tokens = declaration.random_tokens(2)
  verdicts = {}
  for cls in ("complex_diagonal", "unit_modulus_diagonal"):
    kwargs = json.dumps({"cls": cls})
    card = registry.card("damped", kwargs)
    assert card["theory_class"] == cls, card["theory_class"]
    depths = {g: theory.min_depth(card["theory_class"], g) for g in ("C6", "S3", "S4", "A5")}
    assert depths == {"C6": 1, "S3": 2, "S4": 3, "A5": None}, (cls, depths)
    model = models.StateTracker(ModelConfig(layers=("damped",), layer_kwargs=kwargs, d_model=8,
                                            d_state=4))
    out = declaration.check(model, model.init(jax.random.PRNGKey(0), tokens), tokens)
    verdicts[cls] = (out["checked"], out["ok"])
    detail = out["layers"][0]["detail"]
  assert verdicts == {"complex_diagonal": (True, True),
                      "unit_modulus_diagonal": (True, False)}, verdicts
  assert detail.endswith("; complex_diagonal takes any modulus"), (
      f"the unit-modulus check does not point to the class that fits: {detail}")


def test_a_layer_that_leaves_its_declared_class_is_flagged(tmp_path):
  plugins.load("plugin_layers.liar")
  cfg = ModelConfig(layers=("liar",), d_model=8, d_state=2)
  model = models.StateTracker(cfg)
  tokens = declaration.random_tokens(2)
  out = declaration.check(model, model.init(jax.random.PRNGKey(0), tokens), tokens)
  assert out["checked"] and out["ok"] is False, out
  honest = ModelConfig(layers=("negmamba",), d_model=8, d_state=2, conv_kernel=0)
  m = models.StateTracker(honest)
  assert declaration.check(m, m.init(jax.random.PRNGKey(0), tokens), tokens)["ok"] is True
  # an honest layer under it does not clear the stack: one violation is the stack's verdict
  mixed = models.StateTracker(ModelConfig(layers=("negmamba", "liar"), d_model=8, d_state=2,
                                          conv_kernel=0))
  out = declaration.check(mixed, mixed.init(jax.random.PRNGKey(0), tokens), tokens)
  assert [r["ok"] for r in out["layers"]] == [True, False] and out["ok"] is False, out
  # a layer whose inner cell sows them: found in the submodule, not "sows no transitions"
  nested = models.StateTracker(ModelConfig(layers=("nested_liar",), d_model=8, d_state=2))
  out = declaration.check(nested, nested.init(jax.random.PRNGKey(0), tokens), tokens)
  assert out["checked"] and out["ok"] is False, out
  # a stack that sows nothing is unchecked (None), not within its class
  quiet = models.StateTracker(ModelConfig(layers=("lstm",), d_model=8, d_state=2))
  out = declaration.check(quiet, quiet.init(jax.random.PRNGKey(0), tokens), tokens)
  assert (out["checked"], out["ok"]) == (False, None), out
  # through a run: the summary and the profile report say so
  c = TrainConfig(task="C2", model="liar", plugins="plugin_layers.liar",
                  **{**PRESETS["profile_tiny"], "steps": 10})
  d = str(tmp_path / runs.run_name(c))
  s = runs.train_group([c], [d])[0]
  assert s["declaration"]["ok"] is False, s["declaration"]
  report = tracking_profile.markdown(tracking_profile.profile_data([s]))
  assert "Declaration violated" in report and "outside [0, 1]" in report, report


def test_the_declaration_records_each_layers_kwargs_with_registry_defaults():
  """A run's name hashes only the layer_kwargs it was given, so the summary must say which
  defaults it ran with (the transformer's sink default changed under stored runs once)."""
  cfg = ModelConfig(layers=("transformer", "negmamba"), d_model=8, d_state=2,
                    layer_kwargs='{"heads":2}')
  model = models.StateTracker(cfg)
  tokens = declaration.random_tokens(2)
  rows = declaration.check(model, model.init(jax.random.PRNGKey(0), tokens), tokens)["layers"]
  want = registry.layer_kwargs(cfg.layers, cfg.layer_kwargs)
  assert want[0]["heads"] == 2 and want[0]["sink"] is True, want
  assert [r.get("kwargs") for r in rows] == want, f"declaration rows {rows} lack kwargs {want}"


def test_the_declaration_checks_a_layer_against_its_class_at_the_runs_kwargs():
  """DeltaProduct with n_h = 3 declares householder:3: its transitions (three reflections a
  token) are checked against that set, not the default n_h's (householder:2, which they leave)."""
  cfg = ModelConfig(layers=("deltaproduct",), d_model=8, d_state=4, layer_kwargs='{"n_h": 3}')
  model = models.StateTracker(cfg)
  tokens = declaration.random_tokens(2)
  out = declaration.check(model, model.init(jax.random.PRNGKey(0), tokens), tokens)
  assert out["layers"][0]["class"] == "householder:3" and out["ok"] is True, out


def test_a_layers_description_defaults_to_its_own_docstrings_first_line(monkeypatch):
  """A plugin that passes no description gets its class docstring's first line on its card;
  a Flax module without one gets none (not the signature its dataclass writes, nor
  nn.Module's docstring)."""
  import flax.linen as nn

  class Documented(nn.Module):
    """A documented layer.

    More detail."""

  class Bare(nn.Module):
    width: int = 2

  monkeypatch.setattr(registry, "_LAYERS", dict(registry._LAYERS))
  doc = registry.register_layer("documented", Documented, theory_class="unknown")
  bare = registry.register_layer("bare", Bare, theory_class="unknown")
  given = registry.register_layer("given", Bare, theory_class="unknown", description="mine")
  assert (doc.description, bare.description, given.description) == (
      "A documented layer.", "", "mine"), (doc.description, bare.description, given.description)


def test_a_field_of_a_plugins_module_that_its_record_does_not_declare_is_named_with_the_fix(
    monkeypatch):
  """A plugin registered without `kwargs` takes none, even where its module has fields: setting
  one is refused with the call that declares it; a key that is no field, or a field the
  builder's partial fixes (negmamba's `negative`), is refused without."""
  import flax.linen as nn

  class Gated(nn.Module):
    cfg: object
    c: float = 8.0

  monkeypatch.setattr(registry, "_LAYERS", dict(registry._LAYERS))
  registry.register_layer("gated", Gated, theory_class="unknown")
  with pytest.raises(registry.LayerError) as e:
    registry.layer_kwargs(["gated"], '{"c": 4.0}')
  assert str(e.value).endswith("Gated has the field 'c': declare it in " + Gated.__module__ +
                               " with register_layer('gated', ..., kwargs=module_kwargs(Gated))"), e
  with pytest.raises(registry.LayerError) as e:
    registry.layer_kwargs(["gated"], '{"d": 4.0}')
  assert "module_kwargs" not in str(e.value), f"a key that is no field got the hint: {e.value}"
  with pytest.raises(registry.LayerError) as e:
    registry.layer_kwargs(["negmamba"], '{"negative": false}')
  assert "module_kwargs" not in str(e.value), f"a field a partial fixes got the hint: {e.value}"


def test_module_kwargs_reads_a_modules_field_defaults():
  """The built-ins and the example take their kwargs from their modules' field defaults, so the
  two cannot drift apart; fields a partial fixes are not the user's to set."""
  import functools
  import flax.linen as nn

  class Toy(nn.Module):
    cfg: object
    scale: float = 1.5
    mode: str = "a"

  assert registry.module_kwargs(Toy) == {"scale": 1.5, "mode": "a"}
  assert registry.module_kwargs(functools.partial(Toy, mode="b")) == {"scale": 1.5}, \
      "a field fixed by functools.partial is offered as a kwarg"
  assert registry.module_kwargs(Toy, scale=2.0) == {"scale": 2.0, "mode": "a"}
  with pytest.raises(registry.LayerError, match="Toy has no field 'sclae'.*scale, mode"):
    registry.module_kwargs(Toy, sclae=2.0)
  with pytest.raises(registry.LayerError, match="needs a Flax module"):
    registry.module_kwargs(lambda cfg: None)
  # the built-ins' documented defaults (BUILD_NOTES, "Baselines", "transformer")
  assert dict(registry.get("transformer").kwargs) == {
      "heads": 4, "position": "nope", "causal": True, "max_positions": 16384, "sink": True}
  assert dict(registry.get("deltanet").kwargs) == {"beta_max": 2.0, "key_norm": True, "heads": 1}
  assert dict(registry.get("deltaproduct").kwargs) == {
      "n_h": 2, "beta_max": 2.0, "key_norm": True, "heads": 1}


def test_profile_passes_its_time_limit_to_the_sweep_and_reports_what_finished(tmp_path):
  """--time_limit_s with its end already past (as a restart inherits it): the first group (C2)
  trains, S3 does not start, nor does the sweep of D3 (a group outside the profile's, trained
  after them), and the report covers C2. Unpadded, so that C2 and S3 are two groups (the tiny
  preset pads every group to order 60 and trains them in one)."""
  p = launcher.run(["launch.profile", "--model=mamba", "--preset=tiny",
                    "--groups=C2,S3,D3", "--depths=1", f"--workdir={tmp_path}", "--quiet",
                    "--time_limit_s=600", "--config.pad_order=0"], cwd=ROOT,
                    env={**ENV, "SSM_BENCH_SWEEP_DEADLINE": "0"}, timeout=600)
  assert p.returncode == 0, p.stderr[-2000:]
  assert "stopped at the time limit" in p.stdout, p.stdout[-1000:]
  report = open(tmp_path / "profile_profile_tiny_mamba.md").read()
  assert "| C2 | 2 |" in report and "| S3 |" not in report, report
  assert "| D3 |" not in report and not list(tmp_path.glob("D3-*")), "D3 trained past the limit"


def test_unknown_class_shows_a_question_mark_in_tables(tmp_path):
  plugins.load("plugin_layers.liar")
  c = TrainConfig(task="C2", model="mystery", plugins="plugin_layers.liar",
                  **{**PRESETS["tiny"], "steps": 10})
  runs.train_group([c], [str(tmp_path / runs.run_name(c))])
  data = tables.table2_data(tables.load(str(tmp_path)))
  (entry,) = [e for t in data.values() for d in t.values() for e in d["rows"]["C2"].values()]
  assert entry["theory"] is None
  assert "/ ? " in tables.markdown_table2(data, compare=True)


def test_example_layer_through_every_entry_point(tmp_path):
  """examples/rotation.py, nothing in the package edited: train, a sweep under the watchdog
  (the re-exec) with worker processes, tables, TensorBoard and the profile report, all from --plugins (Ray workers:
  test_sweep.py's Ray test runs the same layer). The profile takes a group outside its ten
  (D3) and reports it beside them with the class's prediction."""
  work = tmp_path / "runs"
  p = run("launch.train", "--plugins=examples.rotation", "--model=rotation", "--task=C3",
          "--preset=tiny", f"--workdir={work}/one")
  assert p.returncode == 0, p.stderr[-2000:]
  assert json.load(open(work / "one" / "config.json"))["plugins"] == "examples.rotation"
  assert any(n.startswith("events.out.tfevents") for n in os.listdir(work / "one"))
  p = run("launch.profile", "--plugins=examples.rotation", "--model=rotation", "--preset=tiny",
          "--groups=C2,S3,D3", "--depths=1", f"--workdir={work}", f"--out={tmp_path}", "--quiet",
          "--workers=2")  # each group in a worker process: the plugin must load there too
  assert p.returncode == 0, p.stderr[-2000:]
  # the sweep checked the plugin's layer (jax started) before its watchdog spawned the child
  assert "os.fork()" not in p.stderr, f"jax's fork warning reached the user:\n{p.stderr[-2000:]}"
  report = open(tmp_path / "profile_profile_tiny_rotation.md").read()
  assert "unit_modulus_diagonal" in report and "| S3 | 6 |" in report, report
  d3 = [l for l in report.splitlines() if l.startswith("| D3 | 6 |")]
  assert len(d3) == 1 and d3[0].rstrip(" |").endswith("| 2"), (  # min depth: derived length 2
      f"D3 not reported as one more group with its prediction:\n{report}")
  assert "note:" not in p.stderr, f"the extra group's sweep said it merged:\n{p.stderr[-2000:]}"
  assert os.path.exists(tmp_path / "profile_profile_tiny_rotation.png")
  p = run("launch.tables", f"--runs={work}", f"--out={tmp_path}/tables")
  assert p.returncode == 0, p.stderr[-2000:]
  assert "rotation" in open(tmp_path / "tables" / "profile.md").read()


@pytest.mark.parametrize("auto", ["chunked", "pallas_parallel"])  # the CPU's, the GPU's
def test_a_plugin_diagonal_layer_with_per_step_b_and_c_runs_the_suites_scan(monkeypatch, auto):
  """examples/selective_aussm.py hands diagonal_scan rotation factors with per-step B and C:
  `auto` runs them on the chunked scan (the GPU's kernel hands them over) with the sequential
  scan's values and gradients, and that is what a run's summary records (`scan_auto`)."""
  from ssm_bench import scan
  plugins.load("examples.selective_aussm")
  monkeypatch.setitem(scan.AUTO, jax.default_backend(), auto)
  cfg = ModelConfig(layers=("selective_aussm",), d_model=8, d_state=4, vocab_size=3)
  assert models.scan_auto(cfg) == "chunked", models.scan_auto(cfg)
  tokens = declaration.random_tokens(3, 2, 11)
  params = models.StateTracker(cfg).init(jax.random.PRNGKey(0), tokens)
  def value_and_grad(method):
    net = models.StateTracker(dataclasses.replace(cfg, scan_method=method))
    return jax.jit(jax.value_and_grad(
        lambda p: jax.numpy.sum(jax.numpy.sin(net.apply(p, tokens)))))(params)
  (got, got_g), (want, want_g) = value_and_grad("auto"), value_and_grad("sequential")
  np.testing.assert_allclose(got, want, rtol=1e-5)
  for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(got_g), jax.tree.leaves(want_g)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6,
                               err_msg=f"gradient {jax.tree_util.keystr(path)} differs")


def test_a_plugins_state_width_sets_the_width_its_card_predicts_at():
  """A4 needs keys of 3 dimensions: the plugin's keys are d_state // 4 = 2 wide at d_state 8,
  so no theorem, where DeltaProduct's own (d_state wide) get the claim."""
  out = run("launch.info", "--plugins=plugin_layers.narrow_keys", "--model=narrow_keys",
            "--d_state=8", "--json", timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  card = json.loads(out.stdout)
  assert card["predictions_width"] == 2, card["predictions_width"]
  assert card["predictions"]["A4"]["depth 1"] is None, card["predictions"]["A4"]
  assert card["predictions"]["A4"]["min_depth"] == "no theorem", card["predictions"]["A4"]
  assert card["predictions"]["S3"]["depth 1"] is True, "S3 fits 2-wide keys"
  out = run("launch.info", "--model=deltaproduct", "--d_state=8", "--json", timeout=300)
  card = json.loads(out.stdout)
  assert (card["predictions_width"], card["predictions"]["A4"]["depth 1"],
          card["predictions"]["A4"]["min_depth"]) == (8, True, "1"), card


def test_the_example_clock_turns_by_roots_forward_and_trains_its_choices_backward():
  """examples/clock.py's straight-through estimator: every transition is one of the m roots,
  and the gradient reaches the logits that choose them (the argmax alone has none, so the
  clock would never learn which root a token turns by)."""
  plugins.load("examples.clock")
  cfg = ModelConfig(layers=("clock",), d_model=4, d_state=3)
  layer = registry.get("clock").builder(cfg, m=4)
  v = jax.random.normal(jax.random.PRNGKey(1), (2, 5, 4))
  params = layer.init(jax.random.PRNGKey(0), v)
  _, sown = layer.apply(params, v, mutable="intermediates")
  a = np.asarray(sown["intermediates"]["transition"][0])
  assert np.abs(a ** 4 - 1).max() < 1e-5, f"transitions off the 4th roots: {a.ravel()[:6]}"
  grad = jax.grad(lambda p: layer.apply(p, v).sum())(params)["params"]["logits"]["kernel"]
  assert np.abs(np.asarray(grad)).max() > 1e-4, "no gradient reaches the clock's logits"


def test_an_unknown_model_names_the_loaded_plugins_and_the_layers_they_registered(monkeypatch):
  """A plugin that registered nothing (a forgotten register call, or `module` where
  `module:register` was meant) is said in the unknown-model line, not left to look like a
  missing --plugins."""
  monkeypatch.setattr(plugins, "_loaded", set())
  with pytest.raises(registry.LayerError, match=r"\(a plugin's layers need --plugins=module\)"):
    registry.get("my_layer")
  plugins.load("plugin_layers._mix")  # a helper module: it registers no layer
  with pytest.raises(registry.LayerError) as e:
    registry.get("my_layer")
  theirs = ", ".join(n for n in registry.names() if not registry.get(n).builtin) or "none"
  assert f"(plugins loaded: plugin_layers._mix; their layers: {theirs})" in str(e.value), e.value


def test_a_card_credits_a_class_without_a_theorem_with_what_it_includes():
  """The damped plugin layer declared as a class with no theorem that includes complex_diagonal:
  its card lists the included classes and gives `≤ k` with "yes" at the depths they track,
  `?` below them and where none tracks the group (A5)."""
  out = run("launch.info", "--plugins=plugin_layers.wider,plugin_layers.damped", "--model=damped",
            '--layer_kwargs={"cls": "decay_and_phase_plus"}', timeout=300)
  assert out.returncode == 0, out.stderr
  lines = {line.split()[0]: line.split()[1:] for line in out.stdout.splitlines() if line.strip()}
  assert out.stdout.count("  includes: complex_diagonal (its diagonal part is any complex "
                          "diagonal); signed_diagonal (") == 1, out.stdout
  assert lines["C3"] == ["≤", "1", "yes", "yes", "yes", "-"], lines["C3"]
  assert lines["S3"] == ["≤", "2", "?", "yes", "yes", "-"], lines["S3"]
  assert lines["A5"] == ["no", "theorem", "?", "?", "?", "-"], lines["A5"]
