"""Every layer against an independent float64 NumPy transcription of its SPEC §3 formula.

The layer's parameters are perturbed first, so no term hides behind an initial value of 0 or 1.
"""
import jax
import numpy as np
import pytest

from ssm_bench import registry
from ssm_bench.config import ModelConfig

B_, T, D, N = 2, 6, 4, 3


def softplus(x):
  return np.log1p(np.exp(x))


def silu(x):
  return x / (1 + np.exp(-x))


def dense(p, x):
  return x @ p["kernel"] + p.get("bias", 0.0)


def run(h0, steps, update):
  """Stack h_t for t = 1..T of h_t = update(h_{t-1}, t)."""
  h, out = h0, []
  for t in range(steps):
    h = update(h, t)
    out.append(h)
  return np.stack(out, 1)


def low_rank_dt(p, u):
  return softplus(dense(p["dt_up"], dense(p["dt_down"], u)))


def causal_conv(p, u):
  """u_t <- sum_j w_j u_{t-k+1+j} + b, with zeros before the first step."""
  k = p["kernel"].shape[0]
  return np.stack([sum(p["kernel"][j, 0] * u[:, t - k + 1 + j] for j in range(k)
                       if t - k + 1 + j >= 0) + p["bias"] for t in range(u.shape[1])], 1)


def mamba(p, v, negative):
  u, z = dense(p["in_u"], v), dense(p["in_z"], v)
  if "conv" in p:
    u = silu(causal_conv(p["conv"], u))
  dt = low_rank_dt(p, u)
  Bt, Ct = dense(p["B"], u), dense(p["C"], u)
  a = np.exp(dt[..., None] * -np.exp(p["A_log"]))  # (b, t, d, n)
  a = 2 * a - 1 if negative else a
  b = (dt * u)[..., None] * Bt[:, :, None, :]  # b_t = Delta_t B_t u_t
  h = run(np.full((B_, D, N), 1 / np.sqrt(N)), T, lambda h, t: a[:, t] * h + b[:, t])
  y = np.einsum("btdn,btn->btd", h, Ct) + p["D"] * u
  return y * silu(z)


def aussm(p, v):
  u, z = dense(p["in_u"], v), dense(p["in_z"], v)
  theta = u @ p["theta_w"] / np.sqrt(D) + p["theta_b"]  # (b, t, n)
  dt = low_rank_dt(p, u)
  Bc = softplus(p["B_re"]) * np.exp(1j * p["B_im"])
  Cc = softplus(p["C_re"]) * np.exp(1j * p["C_im"])
  su = silu(u)
  h = run(np.full((B_, D, N), 1 / np.sqrt(N), complex), T,
          lambda h, t: np.exp(1j * theta[:, t])[:, None, :] * h + (dt[:, t] * su[:, t])[..., None] * Bc)
  y = np.einsum("btdn,dn->btd", h, Cc).real + p["D"] * su  # the real part is read out
  return y * silu(z)


def simple_aussm(p, v):
  theta = dense(p["theta"], v)
  h = run(np.full((B_, N), 1 / np.sqrt(N), complex), T, lambda h, t: np.exp(1j * theta[:, t]) * h)
  return dense(p["readout"], np.concatenate([h.real, h.imag], -1)) + p["D"] * v


def s4d(p, v):
  u = dense(p["in_u"], v)
  lam = -np.exp(p["lambda_log_neg_re"]) + 1j * p["lambda_im"]
  a = np.exp(np.exp(p["log_dt"])[:, None] * lam)
  Bc, Cc = p["B_re"] + 1j * p["B_im"], p["C_re"] + 1j * p["C_im"]
  zoh = (a - 1) / lam * Bc  # zero-order hold of B
  h = run(np.full((B_, D, N), 1 / np.sqrt(N), complex), T, lambda h, t: a * h + zoh * u[:, t][..., None])
  return 2 * np.einsum("btdn,dn->btd", h, Cc).real + p["D"] * u


def rnn(p, v):
  x = dense(p["U"], v)
  h = run(np.full((B_, N), 1 / np.sqrt(N)), T, lambda h, t: np.tanh(h @ p["W"] + x[:, t]))
  return dense(p["readout"], h) + p["D"] * v


def ids4(p, v, row_norm=False):
  A = dense(p["A"], v).reshape(B_, T, N, N)
  if row_norm:  # A_t / max(1, its largest row sum of absolute values)
    A = A / np.maximum(1.0, np.abs(A).sum(-1).max(-1))[..., None, None]
  b = dense(p["B"], v)
  h = run(np.full((B_, N), 1 / np.sqrt(N)), T, lambda h, t: np.einsum("bij,bj->bi", A[:, t], h) + b[:, t])
  return dense(p["readout"], h) + p["D"] * v


FORMULAS = {"mamba": lambda p, v: mamba(p, v, False), "negmamba": lambda p, v: mamba(p, v, True),
            "aussm": aussm, "simple_aussm": simple_aussm, "s4d": s4d, "rnn": rnn, "ids4": ids4}


BUILTINS = [s.name for s in registry.specs() if s.builtin]


def perturbed(params):
  """Every parameter moved off its initial value, so that no term hides behind a 0 or a 1."""
  leaves, tree = jax.tree.flatten(params)
  keys = jax.random.split(jax.random.PRNGKey(2), len(leaves))
  return jax.tree.unflatten(tree, [x + 0.3 * jax.random.normal(k, x.shape)
                                   for x, k in zip(leaves, keys)])


def test_every_layer_has_a_formula():
  assert set(FORMULAS) == set(BUILTINS)


@pytest.mark.parametrize("name,conv_kernel", [(n, 0) for n in BUILTINS] +
                         [("mamba", 3), ("negmamba", 3)])
def test_layer_matches_its_formula(name, conv_kernel):
  cfg = ModelConfig(layers=(name,), d_model=D, d_state=N, conv_kernel=conv_kernel,
                    scan_method="sequential")
  spec = registry.get(name)
  layer = spec.builder(cfg, **spec.kwargs)  # the record's defaults, as the stack builds it
  v = jax.random.normal(jax.random.PRNGKey(1), (B_, T, D))
  params = jax.jit(layer.init)(jax.random.PRNGKey(0), v)  # compiled once, not op by op
  params = perturbed(params)
  got = np.asarray(jax.jit(layer.apply)(params, v), np.float64)
  p64 = jax.tree.map(lambda x: np.asarray(x, np.float64), params["params"])
  want = FORMULAS[name](p64, np.asarray(v, np.float64))
  np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5,
                             err_msg=f"{name} does not compute its SPEC formula")


@pytest.mark.parametrize("name", ["deltanet", "deltaproduct"])
def test_delta_rule_heads_match_their_formula(name):
  """`heads` (a kwarg, 1 by default) splits the values into independent delta rules, each with
  its own keys, betas and query."""
  cfg = ModelConfig(layers=(name,), d_model=D, d_state=N, scan_method="sequential")
  spec = registry.get(name)
  layer = spec.builder(cfg, **{**spec.kwargs, "heads": 2})
  v = jax.random.normal(jax.random.PRNGKey(1), (B_, T, D))
  params = perturbed(jax.jit(layer.init)(jax.random.PRNGKey(0), v))
  got = np.asarray(jax.jit(layer.apply)(params, v), np.float64)
  p64 = jax.tree.map(lambda x: np.asarray(x, np.float64), params["params"])
  want = delta(p64, np.asarray(v, np.float64), spec.kwargs.get("n_h", 1), heads=2)
  np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5,
                             err_msg=f"{name} with 2 heads does not compute its formula")


def test_ids4_with_row_norm_matches_its_formula_and_keeps_every_transition_bounded():
  """`row_norm` (an IDS4 kwarg, off by default) divides A(v_t) by max(1, ||A(v_t)||_inf); the
  inputs grow along the sequence from near 0 and A's bias is scaled down, so that transitions
  start both below 1 (left as they are) and above (divided), or the check would be void."""
  cfg = ModelConfig(layers=("ids4",), d_model=D, d_state=N, scan_method="sequential")
  spec = registry.get("ids4")
  layer = spec.builder(cfg, **{**spec.kwargs, "row_norm": True})
  v = jax.random.normal(jax.random.PRNGKey(1), (B_, T, D)) * np.geomspace(0.01, 5, T)[:, None]
  params = jax.jit(layer.init)(jax.random.PRNGKey(0), v)
  params = perturbed(params)
  params["params"]["A"]["bias"] = 0.3 * params["params"]["A"]["bias"]
  got, sown = jax.jit(lambda p, v: layer.apply(p, v, mutable="intermediates"))(params, v)
  p64 = jax.tree.map(lambda x: np.asarray(x, np.float64), params["params"])
  raw = np.abs(dense(p64["A"], np.asarray(v, np.float64)).reshape(B_, T, N, N)).sum(-1).max(-1)
  assert 0.25 < (raw > 1).mean() < 0.75, f"transitions not on both sides of norm 1: {raw}"
  want = ids4(p64, np.asarray(v, np.float64), row_norm=True)
  np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=2e-4, atol=2e-5,
                             err_msg="ids4 row_norm does not compute its formula")
  A = np.asarray(sown["intermediates"]["transition"][0])
  assert np.abs(A).sum(-1).max() <= 1 + 1e-6, "a sown transition's infinity norm exceeds 1"


def sigmoid(x):
  return 1 / (1 + np.exp(-x))


def lstm(p, v):
  x = dense(p["W"], v)

  def step(hc, t):
    h, c = hc
    i, f, g, o = np.split(x[:, t] + h @ p["U"], 4, axis=-1)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    return sigmoid(o) * np.tanh(c), c
  hc, hs = (np.full((B_, N), 1 / np.sqrt(N)), np.zeros((B_, N))), []
  for t in range(T):
    hc = step(hc, t)
    hs.append(hc[0])
  return dense(p["readout"], np.stack(hs, 1)) + p["D"] * v


def gru(p, v):
  x = dense(p["W"], v)

  def step(h, t):
    hu = h @ p["U"] + p["c"]
    r = sigmoid(x[:, t, :N] + hu[:, :N])
    z = sigmoid(x[:, t, N:2 * N] + hu[:, N:2 * N])
    n = np.tanh(x[:, t, 2 * N:] + r * hu[:, 2 * N:])
    return (1 - z) * n + z * h
  return dense(p["readout"], run(np.full((B_, N), 1 / np.sqrt(N)), T, step)) + p["D"] * v


def delta(p, v, n_h, heads=1):
  """The delta rule step by step: S <- S - beta k (k^T S) + beta k v^T, n_h times a token, in
  each head (keys of width N, values of width D / heads), the heads' readouts side by side."""
  m = D // heads
  k = dense(p["k"], v).reshape(B_, T, n_h, heads, N)
  k = k / np.linalg.norm(k, axis=-1, keepdims=True)
  val = dense(p["v"], v).reshape(B_, T, n_h, heads, m)
  beta = 2 * sigmoid(dense(p["beta"], v)).reshape(B_, T, n_h, heads)
  q = dense(p["q"], v).reshape(B_, T, heads, N)

  def head(h):
    def step(S, t):
      for j in range(n_h):
        kj, bj = k[:, t, j, h], beta[:, t, j, h, None, None]
        S = S - bj * kj[:, :, None] * np.einsum("bn,bnm->bm", kj, S)[:, None, :] \
            + bj * kj[:, :, None] * val[:, t, j, h, None, :]
      return S
    S = run(np.full((B_, N, m), 1 / np.sqrt(m)), T, step)
    return np.einsum("btnm,btn->btm", S, q[:, :, h])
  return dense(p["o"], np.concatenate([head(h) for h in range(heads)], -1)) + p["D"] * v


def attention(p, v, heads=2, rotary=False, sink=False):
  """Causal softmax attention, head by head and query by query; with sink, one more key and
  value per head ahead of the sequence."""
  dh = D // heads
  q, k, val = (dense(p[n], v).reshape(B_, T, heads, dh) for n in ("q", "k", "v"))
  if rotary:
    half = dh // 2
    ang = np.arange(T)[:, None] * 10000.0 ** (-np.arange(half) / half)
    def rot(x):
      x1, x2 = x[..., :half], x[..., half:]
      c, s = np.cos(ang)[None, :, None], np.sin(ang)[None, :, None]
      return np.concatenate([x1 * c - x2 * s, x1 * s + x2 * c], -1)
    q, k = rot(q), rot(k)
  y = np.zeros((B_, T, heads, dh))
  for t in range(T):
    keys, vals = k[:, :t + 1], val[:, :t + 1]
    if sink:
      keys = np.concatenate([np.broadcast_to(p["sink_k"], (B_, 1, heads, dh)), keys], 1)
      vals = np.concatenate([np.broadcast_to(p["sink_v"], (B_, 1, heads, dh)), vals], 1)
    logits = np.einsum("bhd,bshd->bhs", q[:, t], keys) / np.sqrt(dh)
    w = np.exp(logits - logits.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    y[:, t] = np.einsum("bhs,bshd->bhd", w, vals)
  return dense(p["o"], y.reshape(B_, T, D)) + p["D"] * v


FORMULAS.update({"lstm": lstm, "gru": gru, "deltanet": lambda p, v: delta(p, v, 1),
                 "deltaproduct": lambda p, v: delta(p, v, 2),
                 "transformer": lambda p, v: attention(p, v, 4 if D % 4 == 0 else 1, sink=True)})


# the sink is on by default; each option against its formula, with the sink's parameters random
# rope at one head (head width 4): with width 2 its one frequency is 1 and the base goes unread
@pytest.mark.parametrize("option,formula,heads", [
    ({"position": "rope"}, {"rotary": True, "sink": True}, 1), ({}, {"sink": True}, 2),
    ({"sink": False}, {}, 2)])
def test_transformer_options_match_their_formula(option, formula, heads):
  cfg = ModelConfig(layers=("transformer",), d_model=D, d_state=N)
  layer = registry.get("transformer").builder(cfg, heads=heads, **option)
  v = jax.random.normal(jax.random.PRNGKey(1), (B_, T, D))
  params = jax.jit(layer.init)(jax.random.PRNGKey(0), v)  # compiled once, not op by op
  # the sink starts at zero: give it values so the test sees its key and its value
  params = jax.tree_util.tree_map_with_path(
      lambda path, x: jax.random.normal(jax.random.PRNGKey(len(jax.tree_util.keystr(path))),
                                        x.shape) if "sink" in jax.tree_util.keystr(path) else x,
      params)
  p64 = jax.tree.map(lambda x: np.asarray(x, np.float64), params["params"])
  np.testing.assert_allclose(
      np.asarray(layer.apply(params, v), np.float64),
      attention(p64, np.asarray(v, np.float64), heads, **formula), rtol=2e-4, atol=2e-5,
      err_msg=f"attention with {option} does not compute its formula")


@pytest.mark.parametrize("sink", [False, True])
def test_nope_attention_tells_a_repeated_token_from_one_only_with_a_sink(sink):
  """Causal NoPE attention over `1 1` returns at position 2 what `1` returns at position 1 (the
  same mean), so parity's second label is unlearnable; a sink's weight dilutes with the prefix
  length and separates them."""
  cfg = ModelConfig(layers=("transformer",), d_model=D, d_state=N)
  layer = registry.get("transformer").builder(cfg, heads=2, sink=sink)
  v = jax.numpy.broadcast_to(jax.random.normal(jax.random.PRNGKey(1), (1, 1, D)), (1, 2, D))
  y = np.asarray(layer.apply(layer.init(jax.random.PRNGKey(0), v), v))
  gap = np.abs(y[0, 1] - y[0, 0]).max()
  if sink:
    assert gap > 1e-3, f"with a sink, `1 1` and `1` still look alike (gap {gap})"
  else:
    assert gap < 1e-6, f"without a sink NoPE attention is duplication-invariant (gap {gap})"


def test_long_sequences_attend_in_query_blocks_exactly():
  from ssm_bench.layers import transformer
  k = jax.random.split(jax.random.PRNGKey(0), 3)
  q, kk, v = (jax.random.normal(x, (1, 2, 1300, 4)) for x in k)
  old = transformer.BLOCK
  transformer.BLOCK = 4096
  try:
    whole = transformer.attend(q, kk, v, True)
  finally:
    transformer.BLOCK = old
  np.testing.assert_allclose(transformer.attend(q, kk, v, True), whole, rtol=1e-5, atol=1e-5,
                             err_msg="blocked attention differs from attention in one block")


@pytest.mark.parametrize("name", ["deltanet", "deltaproduct"])
def test_delta_rule_transitions_have_eigenvalues_in_unit_range_and_reach_below_zero(name):
  """With unit keys and beta in [0, 2], each token's transition has spectral norm <= 1 (its
  eigenvalues lie in the closed unit disk; for DeltaNet they are real, in [-1, 1]), and some go
  below 0: the negative eigenvalues that track parity."""
  from ssm_bench import models
  cfg = ModelConfig(layers=(name,), vocab_size=4, num_classes=4, d_model=8, d_state=4)
  model = models.StateTracker(cfg)
  tokens = jax.random.randint(jax.random.PRNGKey(0), (8, 32), 0, 4)
  params = model.init(jax.random.PRNGKey(1), tokens)
  # push beta towards 2 on some tokens: a large bias on its logit
  params = jax.tree_util.tree_map_with_path(
      lambda path, x: x + 4.0 if "beta" in jax.tree_util.keystr(path) and "bias" in
      jax.tree_util.keystr(path) else x, params)
  _, state = model.apply(params, tokens, mutable=["intermediates"])
  A = np.asarray(state["intermediates"]["layer0"]["transition"][0], np.float64)
  eig = np.linalg.eigvals(A.reshape((-1,) + A.shape[-2:]))
  assert np.abs(eig).max() <= 1 + 1e-5, f"{name}: an eigenvalue of modulus {np.abs(eig).max()}"
  if name == "deltanet":
    assert np.abs(eig.imag).max() < 1e-6 and eig.real.min() >= -1 - 1e-5
  assert eig.real.min() < 0, f"{name}: no negative eigenvalue with beta up to 2"
  if name == "deltanet":  # beta_max 1: beta in [0, 1], so no eigenvalue below 0
    one = ModelConfig(**{**cfg.__dict__, "layer_kwargs": '{"beta_max":1.0}'})
    _, state = models.StateTracker(one).apply(params, tokens, mutable=["intermediates"])
    A = np.asarray(state["intermediates"]["layer0"]["transition"][0], np.float64)
    low = np.linalg.eigvals(A.reshape((-1,) + A.shape[-2:])).real.min()
    assert low >= -1e-5, f"beta_max 1 reached an eigenvalue of {low}"


def test_mamba_conv_keeps_flax_conv_parameters_so_stored_runs_load():
  """The shifted-sum conv must draw the same parameters as the nn.Conv it replaced, under the
  same names, and compute the same function of them."""
  import flax.linen as nn
  from ssm_bench.layers.common import CausalConv

  class FlaxConv(nn.Module):
    @nn.compact
    def __call__(self, u):
      return nn.Conv(D, (4,), padding=[(3, 0)], feature_group_count=D, name="conv")(u)

  class Ours(nn.Module):
    @nn.compact
    def __call__(self, u):
      return CausalConv(4, name="conv")(u)

  u = jax.random.normal(jax.random.PRNGKey(1), (B_, T, D))
  theirs, ours = FlaxConv().init(jax.random.PRNGKey(0), u), Ours().init(jax.random.PRNGKey(0), u)
  assert jax.tree.structure(theirs) == jax.tree.structure(ours), (
      "parameter names differ from nn.Conv's")
  for a, b in zip(jax.tree.leaves(theirs), jax.tree.leaves(ours)):
    np.testing.assert_array_equal(a, b, err_msg="initial conv parameters differ from nn.Conv's")
  params = jax.tree.map(lambda x: x + 0.3, theirs)
  np.testing.assert_allclose(Ours().apply(params, u), FlaxConv().apply(params, u), rtol=1e-5,
                             atol=1e-6, err_msg="the conv computes another function than nn.Conv")


def test_the_layers_initialise_as_spec_says():
  """SPEC's table: mamba's A_log = log(1..N) on every channel; s4d's S4D-Lin Lambda = -1/2 + i
  pi n; aussm's b_theta ~ U(-pi, pi)."""
  from ssm_bench import models
  n = 8
  got = {}
  for name in ("mamba", "s4d", "aussm"):
    cfg = ModelConfig(layers=(name,), vocab_size=4, num_classes=4, d_model=16, d_state=n)
    tokens = np.zeros((1, 4), np.int32)
    got[name] = models.StateTracker(cfg).init(jax.random.PRNGKey(0), tokens)["params"]["layer0"]
  np.testing.assert_allclose(got["mamba"]["A_log"], np.log(np.arange(1, n + 1))[None].repeat(16, 0),
                             rtol=1e-6, err_msg="mamba's A_log is not log(1..N)")
  lam = -np.exp(np.asarray(got["s4d"]["lambda_log_neg_re"])) + 1j * np.asarray(
      got["s4d"]["lambda_im"])
  np.testing.assert_allclose(lam, (-0.5 + 1j * np.pi * np.arange(n))[None].repeat(16, 0),
                             rtol=1e-6, err_msg="s4d's Lambda is not S4D-Lin's -1/2 + i pi n")
  b = np.asarray(got["aussm"]["theta_b"])
  assert b.min() >= -np.pi and b.max() < np.pi and b.max() - b.min() > np.pi, (
      f"aussm's b_theta does not look U(-pi, pi): [{b.min():.3f}, {b.max():.3f}]")


def test_the_baselines_initialise_as_build_notes_says():
  """ids4's A(v) starts near 0.9 I (its bias; stable at init); the lstm's forget-gate bias starts
  at 1 and its other gates' at 0 (the [i, f, g, o] layout its formula splits)."""
  from ssm_bench import models
  n = 3
  got = {}
  for name in ("ids4", "lstm"):
    cfg = ModelConfig(layers=(name,), vocab_size=4, num_classes=4, d_model=8, d_state=n)
    got[name] = models.StateTracker(cfg).init(jax.random.PRNGKey(0), np.zeros((1, 4), np.int32))[
        "params"]["layer0"]
  np.testing.assert_allclose(got["ids4"]["A"]["bias"], 0.9 * np.eye(n).ravel(),
                             err_msg="ids4's A bias is not 0.9 I")
  np.testing.assert_array_equal(got["lstm"]["W"]["bias"], np.repeat([0.0, 1.0, 0.0, 0.0], n),
                                err_msg="the lstm's gate biases are not [i 0, f 1, g 0, o 0]")


def test_mambas_step_size_projection_has_rank_d_over_16_rounded_up():
  """Delta_t = softplus(W_up W_down u_t + b) with W_down of rank ceil(d / 16) (Mamba's dt_rank)."""
  from ssm_bench import models
  for d, rank in ((16, 1), (40, 3)):
    cfg = ModelConfig(layers=("mamba",), vocab_size=4, num_classes=4, d_model=d, d_state=8)
    p = jax.eval_shape(models.StateTracker(cfg).init, jax.random.PRNGKey(0),
                       np.zeros((1, 4), np.int32))["params"]["layer0"]
    assert p["dt_down"]["kernel"].shape == (d, rank), (
        f"d = {d}: dt_down {p['dt_down']['kernel'].shape}, not rank {rank}")


def test_mambas_step_size_starts_log_uniform_between_dt_min_and_dt_max():
  """The dt bias is softplus^-1 of Delta drawn log-uniformly in [dt_min, dt_max] (Mamba's init):
  softplus(bias) covers the range, its log's mean the range's log-midpoint."""
  from ssm_bench.layers import common
  bias = common.dt_bias_init(1e-3, 1e-1)(jax.random.PRNGKey(0), (20000,))
  dt = np.asarray(jax.nn.softplus(bias), np.float64)
  assert dt.min() >= 1e-3 * (1 - 1e-4) and dt.max() <= 1e-1 * (1 + 1e-4), (dt.min(), dt.max())
  assert dt.min() < 1.1e-3 and dt.max() > 0.09, f"Delta covers [{dt.min():.2e}, {dt.max():.2e}]"
  assert abs(np.mean(np.log10(dt)) + 2) < 0.02, (
      f"mean log10 Delta {np.mean(np.log10(dt)):.3f}, not -2: not log-uniform")


def test_a_learned_initial_state_starts_and_stays_at_unit_norm():
  """initial_state="learned": h0 starts at 1 / sqrt(n) per coordinate and, wherever training
  moves it, enters the recurrence as h0 / |h0| (the paper's unit-norm start, Sec. 6)."""
  import flax.linen as nn
  from ssm_bench.layers import common

  class H0(nn.Module):
    @nn.compact
    def __call__(self):
      return common.initial_state(self, "learned", (3, 4))

  params = H0().init(jax.random.PRNGKey(0))
  np.testing.assert_allclose(H0().apply(params), np.full((3, 4), 0.5), rtol=1e-6)
  moved = np.asarray(jax.random.normal(jax.random.PRNGKey(1), (3, 4))) * np.array([[0.1], [2], [7]])
  got = np.asarray(H0().apply({"params": {"h0": moved}}))
  np.testing.assert_allclose(got, moved / np.linalg.norm(moved, axis=-1, keepdims=True),
                             rtol=1e-5, err_msg="a learned h0 is not used at unit norm")


@pytest.mark.parametrize("kind,value", [("ones", 0.5), ("zeros", 0.0)])
def test_a_fixed_initial_state_is_the_unit_norm_constant_or_zero(kind, value):
  """initial_state="ones" (the default: the paper's unit-norm start) is 1 / sqrt(n) per
  coordinate; "zeros" (the ablation) starts the recurrence from h0 = 0."""
  from ssm_bench.layers import common
  np.testing.assert_allclose(np.asarray(common.initial_state(None, kind, (3, 4))),
                             np.full((3, 4), value), err_msg=f"h0 {kind!r}")


def test_learned_positions_refuse_a_sequence_longer_than_their_table():
  """Rows past `max_positions` do not exist: jax's gather would clamp to the last row and
  score a long evaluation with wrong positions, so the layer refuses by name."""
  cfg = ModelConfig(layers=("transformer",), d_model=D, d_state=N)
  layer = registry.get("transformer").builder(cfg, heads=2, position="learned", max_positions=6)
  params = layer.init(jax.random.PRNGKey(0), jax.numpy.zeros((1, 6, D)))
  with pytest.raises(ValueError, match="length 7 exceeds max_positions 6"):
    layer.apply(params, jax.numpy.zeros((1, 7, D)))
