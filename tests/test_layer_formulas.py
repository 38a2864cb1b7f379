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


def mamba(p, v, negative):
  u, z = dense(p["in_u"], v), dense(p["in_z"], v)
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


def ids4(p, v):
  A = dense(p["A"], v).reshape(B_, T, N, N)
  b = dense(p["B"], v)
  h = run(np.full((B_, N), 1 / np.sqrt(N)), T, lambda h, t: np.einsum("bij,bj->bi", A[:, t], h) + b[:, t])
  return dense(p["readout"], h) + p["D"] * v


FORMULAS = {"mamba": lambda p, v: mamba(p, v, False), "negmamba": lambda p, v: mamba(p, v, True),
            "aussm": aussm, "simple_aussm": simple_aussm, "s4d": s4d, "rnn": rnn, "ids4": ids4}


BUILTINS = [s.name for s in registry.specs() if s.builtin]


def test_every_layer_has_a_formula():
  assert set(FORMULAS) == set(BUILTINS)


@pytest.mark.parametrize("name", BUILTINS)
def test_layer_matches_its_formula(name):
  cfg = ModelConfig(layers=(name,), d_model=D, d_state=N, conv_kernel=0, scan_method="sequential")
  layer = registry.get(name).builder(cfg)
  v = jax.random.normal(jax.random.PRNGKey(1), (B_, T, D))
  params = layer.init(jax.random.PRNGKey(0), v)
  leaves, tree = jax.tree.flatten(params)
  keys = jax.random.split(jax.random.PRNGKey(2), len(leaves))
  params = jax.tree.unflatten(tree, [x + 0.3 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys)])
  got = np.asarray(layer.apply(params, v), np.float64)
  p64 = jax.tree.map(lambda x: np.asarray(x, np.float64), params["params"])
  want = FORMULAS[name](p64, np.asarray(v, np.float64))
  np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5,
                             err_msg=f"{name} does not compute its SPEC formula")
