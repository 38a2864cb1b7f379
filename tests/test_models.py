"""Each model builds, runs, trains one step, and its transitions lie where the theory says."""
import dataclasses
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import conftest
from jaxpr_walk import equations
from ssm_bench import models
from ssm_bench import registry
from ssm_bench import scan
from ssm_bench.config import ModelConfig

pytestmark = pytest.mark.heavy  # a minute or more in all: scheduled first (conftest.py)

NAMES = [s.name for s in registry.specs() if s.builtin]
FUSED = [s.name for s in registry.specs() if s.builtin and s.scan_family]


def build(layers, method="sequential", **kw):
  cfg = ModelConfig(layers=layers, vocab_size=6, num_classes=6, d_model=16, d_state=4,
                    scan_method=method, **kw)
  model = models.StateTracker(cfg)
  tokens = jax.random.randint(jax.random.PRNGKey(1), (3, 12), 0, 6)
  params = model.init(jax.random.PRNGKey(0), tokens)
  return model, params, tokens


@functools.lru_cache(maxsize=None)
def loss_and_grad_program(name):
  """(params, the lowered program of a two-layer `name` model's loss, logits and gradients,
  that program compiled at the tests' level): built once for the two tests below."""
  model, params, tokens = build((name, name))

  def loss(p):
    logits = model.apply(p, tokens)
    return optax.softmax_cross_entropy_with_integer_labels(logits, tokens).mean(), logits

  lowered = jax.jit(jax.value_and_grad(loss, has_aux=True)).lower(params)
  return params, lowered, lowered.compile()


@pytest.mark.parametrize("name", NAMES)
def test_model_forward_is_finite_and_one_step_changes_params(name):
  params, _, program = loss_and_grad_program(name)
  (_, logits), grads = program(params)  # one compiled program, as training runs it
  assert logits.shape == (3, 12, 6) and bool(jnp.isfinite(logits).all()), f"{name}: bad logits"
  opt = optax.adamw(1e-3)
  step = lambda g, p: optax.apply_updates(p, opt.update(g, opt.init(p), p)[0])
  new = jax.jit(step)(grads, params)
  changed = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), params, new)
  assert any(jax.tree.leaves(changed["params"]["layer0"])), f"{name}: no layer parameter changed"
  assert all(bool(jnp.isfinite(g).all()) for g in jax.tree.leaves(grads)), f"{name}: NaN grads"


@pytest.mark.parametrize("name", NAMES)
def test_the_tests_compile_level_computes_what_users_programs_compute(name):
  """The tests compile lighter (conftest.TESTS_COMPILE); users' programs with XLA's defaults.
  One training step's loss and gradients from both agree to float32 rounding, and XLA plans the
  same buffers for both (what the memory estimates read), but for the older emitters' one small
  scratch buffer (64-72 bytes here)."""
  params, lowered, ours_program = loss_and_grad_program(name)
  users_program = lowered.compile(compiler_options=conftest.USERS_COMPILE)
  ours, users = ours_program(params), users_program(params)
  memory = [(m.temp_size_in_bytes, m.argument_size_in_bytes, m.output_size_in_bytes)
            for m in (ours_program.memory_analysis(), users_program.memory_analysis())]
  (temp, *io), (users_temp, *users_io) = memory
  assert io == users_io and 0 <= temp - users_temp <= 256, (
      f"{name}: other buffers at the tests' compile level (temp, arguments, outputs): {memory}")
  # Rounding at the leaf's scale (BUILD_NOTES, "Tests and CI"), never tighter than before.
  for (path, a), b in zip(jax.tree_util.tree_flatten_with_path(ours)[0], jax.tree.leaves(users)):
    scale = float(np.abs(b).max())
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=max(1e-6, 1e-5 * scale), err_msg=(
        f"{name}: {jax.tree_util.keystr(path)} at the tests' compile level is not the default "
        f"level's up to rounding (the leaf's scale: {scale:.3g})"))


@pytest.mark.parametrize("name,method", [(n, "associative") for n in NAMES] + [
    (n, m) for n in FUSED for m in scan.METHODS if m not in ("auto",) + scan.REFERENCE])
def test_scan_methods_give_the_same_model_output(name, method):
  m1, params, tokens = build((name,), "sequential")
  m2 = models.StateTracker(dataclasses.replace(m1.cfg, scan_method=method))
  np.testing.assert_allclose(m1.apply(params, tokens), m2.apply(params, tokens), rtol=1e-4, atol=1e-4,
                             err_msg=f"{name}: {method} differs from the sequential scan")


@pytest.mark.parametrize("name", FUSED + ["decaying_aussm"])
def test_channels_first_layers_train_the_same_parameters_and_transpose_only_their_output(
    name, monkeypatch):
  """With the time-parallel kernel and `CHANNELS_FIRST_LAYERS`, a diagonal layer builds its
  factors as (channels, batch, time) (`scan.channels_first`): the same parameters from the same
  key, the same loss and gradients to float32 rounding, and the training step transposes no
  sequence (an array with the 12-step time axis) but the layer's output and its gradient, where
  the (batch, time, channels) layers transpose each factor in and each gradient out. So does
  examples/decaying_aussm, the complex family's template, which the chunked kernel runs."""
  from ssm_bench import plugins
  from ssm_bench.scan import pallas_parallel
  if registry.find(name) is None:
    plugins.load(f"examples.{name}")

  def step(cf):
    monkeypatch.setattr(pallas_parallel, "CHANNELS_FIRST_LAYERS", cf)
    model, params, tokens = build((name,), "pallas_parallel", conv_kernel=4)
    loss = lambda p: optax.softmax_cross_entropy_with_integer_labels(
        model.apply(p, tokens), tokens).mean()
    jaxpr = jax.make_jaxpr(jax.grad(loss))(params).jaxpr
    moved = [e.invars[0].aval.shape for e in equations(jaxpr)
             if e.primitive.name == "transpose" and 12 in e.invars[0].aval.shape]
    return params, jax.jit(jax.value_and_grad(loss))(params), moved

  params, (loss, grads), moved = step(False)
  params_cf, (loss_cf, grads_cf), moved_cf = step(True)
  assert jax.tree.structure(params) == jax.tree.structure(params_cf) and all(
      np.array_equal(a, b) for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(params_cf))
  ), f"{name}: channels-first layers initialize other parameters"
  np.testing.assert_allclose(loss_cf, loss, rtol=1e-6, err_msg=f"{name}: loss differs")
  for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(grads_cf), jax.tree.leaves(grads)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=(
        f"{name}: channels-first gradient {jax.tree_util.keystr(path)} differs"))
  assert len(moved_cf) == 2 and len(moved) > 2, (
      f"{name}: sequences transposed, channels first {moved_cf}, batch-major {moved}")
  assert not scan.channels_first("chunked", 12) and not scan.channels_first(
      "pallas_parallel", pallas_parallel.MAX_LENGTH + 1), "channels first where no kernel reads it"


@pytest.mark.parametrize("name", FUSED)
def test_auto_on_a_gpu_runs_each_family_on_its_measured_kernel_in_the_layout_it_reads(
    name, monkeypatch):
  """`auto` with the backend reported as 'gpu': AUTO['gpu'], except s4d's constant family,
  which no chunked kernel has: the step-by-step kernel (0.650 ms per run-step on an H200
  against pallas_parallel's 1.149); and the layer builds channels-first factors only for a
  kernel that reads them as they are."""
  model, params, tokens = build((name,), "chunked")
  family = registry.get(name).scan_family
  want = "pallas" if family == "constant" else scan.AUTO["gpu"]
  seen, diagonal_scan = [], scan.diagonal_scan
  monkeypatch.setattr(scan, "diagonal_scan", lambda f, m: seen.append(f) or diagonal_scan(f, m))
  monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
  auto = models.StateTracker(dataclasses.replace(model.cfg, scan_method="auto"))
  with scan.recording() as used:
    jax.eval_shape(auto.apply, params, tokens)  # traced only: the kernels' shapes, no lowering
  assert used == [want], f"{name} ({family}) on a GPU ran {used}, not {want}"
  cf = [f.channels_first for f in seen]
  assert cf == [want in scan.READS_CHANNELS_FIRST], (
      f"{name} under {want}: factors channels first {cf}")


@pytest.mark.parametrize("name", FUSED)
def test_a_groups_training_step_lowers_for_cuda_with_the_time_parallel_kernel(name, monkeypatch):
  """What a GPU session compiles first: a vmapped group's whole training step (model, loss,
  AdamW) with the time-parallel kernel, lowered for CUDA here with the backend reported as
  'gpu' while tracing (so the kernels are Triton's, not interpret mode), in both layer layouts:
  one forward and one backward kernel for the one layer; with the chunked kernel too, for
  the families it has kernels for."""
  from ssm_bench import train
  from ssm_bench.config import TrainConfig
  from ssm_bench.scan import pallas_chunked, pallas_parallel
  cfg = TrainConfig(task="C2", model=name, scan_method="pallas_parallel", d_model=16, d_state=4,
                    batch_size=4, train_length=12, curriculum_start=12, steps=1, log_every=1,
                    checkpoint_every=1)
  hp = train.hparams([cfg, cfg])
  cases = [("pallas_parallel", False), ("pallas_parallel", True)]
  if registry.get(name).scan_family in pallas_chunked.FAMILIES:
    cases += [("pallas_chunked", False), ("pallas_chunked", True)]
  for method, cf in cases:
    monkeypatch.setattr(pallas_parallel, "CHANNELS_FIRST_LAYERS", cf)
    init, chunk = train.Trainer(cfg.replace(scan_method=method)).compiled(donate=False)
    state = jax.eval_shape(init, hp)
    with monkeypatch.context() as gpu:
      gpu.setattr(jax, "default_backend", lambda: "gpu")
      text = chunk.trace(state, hp).lower(lowering_platforms=("cuda",)).as_text()
    kernels = text.count("__gpu$xla.gpu.triton")
    assert kernels == 2, f"{name}, {method}, channels first {cf}: {kernels} Triton kernels"


def transitions(name, **kw):
  model, params, tokens = build((name,), **kw)
  _, state = model.apply(params, tokens, mutable=["intermediates"])
  return np.asarray(state["intermediates"]["layer0"]["transition"][0])


def _reference_norm(kind, x, p):
  if kind == "layernorm":
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-6) * p["scale"] + p["bias"]
  if kind == "rmsnorm":
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * p["scale"]
  return x


def _dense(p, x):
  return x @ np.asarray(p["kernel"], np.float64) + np.asarray(p["bias"], np.float64)


@pytest.mark.parametrize("norm,decoder,activation", [
    ("layernorm", "mlp", "gelu"), ("rmsnorm", "linear", "relu"), ("none", "mlp", "tanh")])
def test_the_stack_is_embedding_residual_blocks_final_norm_and_decoder(norm, decoder, activation):
  """SPEC: x <- x + out(act(layer(norm(x)))) per layer after the embedding, then a final norm
  and the decoder head (an MLP with a ReLU at decoder_hidden's width, or linear), recomputed
  here in float64 from each layer's own output."""
  model, params, tokens = build(("s4d", "negmamba"), norm=norm, decoder=decoder,
                                activation=activation, conv_kernel=0, decoder_hidden=24)
  p = jax.tree.map(lambda a: np.asarray(a, np.float64), params["params"])
  act = {"gelu": lambda v: np.asarray(jax.nn.gelu(v)), "relu": lambda v: np.maximum(v, 0),
         "tanh": np.tanh}[activation]
  x = p["embed"]["embedding"][np.asarray(tokens)]
  for i in range(2):
    h = _reference_norm(norm, x, p.get(f"norm{i}"))
    y = models.build_layer(model.cfg, i).apply({"params": params["params"][f"layer{i}"]},
                                               jnp.asarray(h, jnp.float32))
    x = x + _dense(p[f"out{i}"], act(np.asarray(y, np.float64)))
  x = _reference_norm(norm, x, p.get("norm_f"))
  if decoder == "mlp":
    assert p["head_hidden"]["kernel"].shape == (model.cfg.d_model, 24), (
        f"decoder_hidden=24 built a hidden layer of {p['head_hidden']['kernel'].shape}")
    x = np.maximum(_dense(p["head_hidden"], x), 0)
  want = _dense(p["head_out"], x)
  np.testing.assert_allclose(np.asarray(model.apply(params, tokens)), want, rtol=1e-4, atol=1e-5,
                             err_msg=f"the stack ({norm}, {decoder}, {activation}) is not the "
                                     "SPEC's formula")


def test_mamba_transitions_in_open_unit_interval():
  a = transitions("mamba")
  assert a.min() > 0 and a.max() < 1, (a.min(), a.max())


def test_negmamba_transitions_in_minus_one_one_and_can_be_negative():
  a = transitions("negmamba", dt_min=0.1, dt_max=1.0)
  assert a.min() > -1 and a.max() < 1 and a.min() < 0, (a.min(), a.max())


@pytest.mark.parametrize("name", ["aussm", "simple_aussm"])
def test_aussm_transitions_on_unit_circle(name):
  a = transitions(name)
  assert np.iscomplexobj(a)
  np.testing.assert_allclose(np.abs(a), 1.0, atol=1e-6)


def test_s4d_transition_is_identical_at_every_step():
  a = transitions("s4d")
  assert a.ndim == 2, "s4d transition should not depend on batch or time"
  assert np.all(np.abs(a) < 1)


def test_hybrid_stack_and_layer_parsing():
  assert models.parse_layers("mamba", 2) == ("mamba", "mamba")
  assert models.parse_layers("s4d,mamba") == ("s4d", "mamba")
  # a hybrid run's depth is its list's length (config.py): its stack is the list, once
  from ssm_bench import train
  from ssm_bench.config import TrainConfig
  hybrid = TrainConfig(model="s4d,mamba", depth=2)
  assert train.model_config(hybrid).layers == ("s4d", "mamba"), train.model_config(hybrid).layers
  with pytest.raises(ValueError, match="choose from mamba"):
    models.parse_layers("mambo")
  for empty in ("", ",", " , "):  # no layer at all: a stack of nothing, embedding to head
    with pytest.raises(ValueError, match=f"unknown model {re.escape(repr(empty))}; choose from"):
      models.parse_layers(empty, 2)
  model, params, tokens = build(("s4d", "mamba"))
  assert set(params["params"]) >= {"layer0", "layer1"}


def test_complex_parameters_are_stored_as_real_arrays():
  for name in ("aussm", "s4d", "simple_aussm"):
    _, params, _ = build((name,))
    assert all(not np.iscomplexobj(x) for x in jax.tree.leaves(params)), name


def test_bad_config_field_names_the_choices():
  with pytest.raises(ValueError, match="layernorm, rmsnorm, none"):
    ModelConfig(norm="batchnorm")


def _precisions(jaxpr, lookups=False):
  """(primitive, precision) of every dot and conv in a jaxpr, nested jaxprs included: those of
  the network's arithmetic, or (lookups=True) those of the embedding's one-hot lookup."""
  return [(e.primitive.name, e.params["precision"]) for e in equations(jaxpr)
          if e.primitive.name in ("dot_general", "conv_general_dilated")
          and (models.LOOKUP_SCOPE in str(e.source_info.name_stack)) == lookups]


HIGHEST, DEFAULT = (jax.lax.Precision.HIGHEST,) * 2, (jax.lax.Precision.DEFAULT,) * 2


@pytest.mark.parametrize("precision,jax_setting,want,channels_first", [
    ("default", None, None, False), ("float32", None, HIGHEST, False),
    ("default", "float32", HIGHEST, False),  # "default" defers to JAX_DEFAULT_MATMUL_PRECISION
    ("bfloat16", "float32", DEFAULT, False),  # an explicit field wins over it
    ("float32", None, HIGHEST, True), ("bfloat16", "float32", DEFAULT, True)])
def test_matmul_precision_reaches_every_matmul_of_the_training_step(precision, jax_setting, want,
                                                                    channels_first, monkeypatch):
  """The config's matmul_precision is traced into every dot of a vmapped training chunk, so a
  GPU run computes what its config records; the jax setting that "default" defers to is
  recorded in each summary's environment. Mamba's conv is elementwise (layers.common.CausalConv),
  so it is float32 at any precision and no conv may be left to round in TF32. Channels-first
  layers (their matmuls' gradients are their own, `common.project`) too."""
  from ssm_bench import rundir
  from ssm_bench import train
  from ssm_bench.config import PRESETS, TrainConfig
  from ssm_bench.scan import pallas_parallel
  monkeypatch.setattr(pallas_parallel, "CHANNELS_FIRST_LAYERS", channels_first)
  cfg = TrainConfig(task="C2", model="mamba", **{**PRESETS["tiny"], "conv_kernel": 4}).replace(
      matmul_precision=precision, scan_method="pallas_parallel" if channels_first else "auto")
  before = jax.config.jax_default_matmul_precision
  jax.config.update("jax_default_matmul_precision", jax_setting)
  try:
    trainer = train.Trainer(cfg)
    init, chunk = trainer.compiled(donate=False)
    hp = train.hparams([cfg, cfg.replace(seed=1)])
    jaxpr = jax.make_jaxpr(chunk)(init(hp), hp).jaxpr
    found, lookups = _precisions(jaxpr), _precisions(jaxpr, lookups=True)
    recorded = rundir.environment()["jax_matmul_precision"]
  finally:
    jax.config.update("jax_default_matmul_precision", before)
  names = {name for name, _ in found}
  assert len(found) >= 8 and names == {"dot_general"}, found
  assert {p for _, p in found} == {want}, f"{precision}: traced with {set(found)}"
  assert recorded == jax_setting, f"summary records jax's setting as {recorded!r}"
  assert lookups and {p for _, p in lookups} == {HIGHEST}, (
      f"the embedding lookup (forward and gradient) must be exact at any precision: {lookups}")


def test_tf32x3_is_three_tf32_passes_on_a_gpu_and_float32_elsewhere(monkeypatch):
  """`matmul_precision=tf32x3`: every dot of the step (the exact embedding lookup aside) asks
  for jax's TF32_TF32_F32_X3 algorithm where a GPU compiles it, and lowers for CUDA with it;
  off a GPU it is float32 (HIGHEST), which a CPU can compile."""
  from ssm_bench import train
  from ssm_bench.config import PRESETS, TrainConfig
  cfg = TrainConfig(task="C2", model="mamba", **PRESETS["tiny"]).replace(
      matmul_precision="tf32x3", scan_method="chunked")
  for backend, want in (("cpu", HIGHEST), ("gpu", jax.lax.DotAlgorithmPreset.TF32_TF32_F32_X3)):
    monkeypatch.setattr(jax, "default_backend", lambda: backend)
    trainer = train.Trainer(cfg)
    init, chunk = trainer.compiled(donate=False)
    hp = train.hparams([cfg])
    state = init(hp)
    found = _precisions(jax.make_jaxpr(chunk)(state, hp).jaxpr)
    assert len(found) >= 8 and {p for _, p in found} == {want}, f"{backend}: {set(found)}"
    assert {p for _, p in _precisions(jax.make_jaxpr(chunk)(state, hp).jaxpr, lookups=True)} == {
        HIGHEST}, "the embedding lookup must stay exact"
  text = chunk.trace(state, hp).lower(lowering_platforms=("cuda",)).as_text()
  assert text.count("num_primitive_operations = 3") >= len(found), (
      "the CUDA lowering lost the three-pass algorithm")


@pytest.mark.parametrize("vocab,lookup", [(models.ONE_HOT_MAX_VOCAB, "one-hot matmul"),
                                          (models.ONE_HOT_MAX_VOCAB + 1, "gather")])
def test_a_large_vocabulary_is_looked_up_by_a_gather_not_a_one_hot_matmul(vocab, lookup):
  """Up to ONE_HOT_MAX_VOCAB tokens the embedding is a one-hot matmul (a reproducible gradient);
  past it (S6, order 720) a gather, where the one-hot matrix (batch x time x vocab) would cost
  more memory than the lookup saves."""
  cfg = ModelConfig(layers=("s4d",), vocab_size=vocab, num_classes=4, d_model=8, d_state=2)
  model = models.StateTracker(cfg)
  tokens = jnp.zeros((2, 5), jnp.int32)
  params = jax.eval_shape(model.init, jax.random.PRNGKey(0), tokens)
  jaxpr = jax.make_jaxpr(model.apply)(params, tokens).jaxpr
  prims = {e.primitive.name for e in equations(jaxpr)
           if models.LOOKUP_SCOPE in str(e.source_info.name_stack)
           or e.primitive.name == "gather"}
  got = "gather" if "gather" in prims else "one-hot matmul" if "dot_general" in prims else prims
  assert got == lookup, f"a vocabulary of {vocab} is looked up by {got}, not a {lookup}"


@pytest.mark.parametrize("name", NAMES)
def test_the_training_step_has_no_scatter_add_whose_updates_collide(name):
  """A scatter-add with more updates than operand elements adds several into one element; XLA's
  GPU backend does that with atomics in no fixed order, so the step would not be
  bit-reproducible there. nn.Embed's gradient was one (every token adds into its row)."""
  from ssm_bench import train
  from ssm_bench.config import PRESETS, TrainConfig
  cfg = TrainConfig(task="C2", model=name, **PRESETS["tiny"])
  trainer = train.Trainer(cfg)
  hp = jax.tree.map(lambda x: x[0], train.hparams([cfg]))  # one run's step, traced abstractly
  step = jax.make_jaxpr(trainer.step)(jax.eval_shape(trainer.init, hp), hp)
  colliding = [(str(e.source_info.name_stack), e.invars[0].aval.shape, e.invars[2].aval.shape)
               for e in equations(step.jaxpr)
               if e.primitive.name == "scatter-add"
               and e.invars[2].aval.size > e.invars[0].aval.size]
  assert not colliding, f"{name}: scatter-adds whose updates must collide (where, operand, updates): {colliding}"


@pytest.mark.parametrize("activation", ["gelu", "tanh"])
def test_the_activation_is_recomputed_in_the_backward_not_stored(activation, capsys):
  """What the backward keeps of the activation between a layer and its out projection: its
  input only (`jax.checkpoint`), not GELU's tanh and products (nor tanh's output), each a
  sequence-sized array that a GPU step writes and reads again (1.49 GB per 27-run mamba step
  on the H200)."""
  model, params, tokens = build(("negmamba",), activation=activation)
  from jax import ad_checkpoint
  ad_checkpoint.print_saved_residuals(lambda p: model.apply(p, tokens).sum(), params)
  line = next(i for i, text in enumerate(open(models.__file__), 1) if "act(y)" in text)
  stored = [r for r in capsys.readouterr().out.splitlines() if f"models.py:{line}:" in r]
  assert not stored, f"the backward stores the activation's intermediates: {stored}"
