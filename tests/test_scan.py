"""linear_scan and matrix_scan (the materialized references) against a float64 loop and its
adjoint; the delta rule's householder_scan; what `auto` picks. diagonal_scan: test_diagonal_scan.py.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpr_walk import equations
from ssm_bench import scan

pytestmark = pytest.mark.heavy  # a minute or more in all: scheduled first (conftest.py)

METHODS = list(scan.REFERENCE)


def numpy_scan(a, b, h0):
  h, out = h0.astype(np.complex128), []
  for t in range(a.shape[1]):
    h = a[:, t] * h + b[:, t]
    out.append(h)
  return np.stack(out, 1)


def numpy_grads(a, b, h0, w):
  """Gradients of L = sum Re(conj(w) h) w.r.t. (a, b, h0) as re + i im parts (adjoint loop)."""
  hs = numpy_scan(a, b, h0)
  prev = np.concatenate([h0[:, None], hs[:, :-1]], 1)
  g, ga, gb = np.zeros_like(hs[:, 0]), np.zeros_like(hs), np.zeros_like(hs)
  for t in reversed(range(a.shape[1])):
    g = w[:, t] + (np.conj(a[:, t + 1]) * g if t + 1 < a.shape[1] else 0)
    gb[:, t] = g
    ga[:, t] = g * np.conj(prev[:, t])
  return ga, gb, np.conj(a[:, 0]) * g


def make_inputs(kind, length, seed=0):
  rng = np.random.default_rng(seed)
  shape = (2, length, 3)
  if kind == "real":
    a = rng.uniform(0.0, 0.999, shape)
  elif kind == "negative":
    a = rng.uniform(-0.999, 0.999, shape)
  else:  # complex, some on the unit circle
    a = rng.uniform(0.9, 1.0, shape) * np.exp(1j * rng.uniform(-np.pi, np.pi, shape))
    a[:, :, 0] /= np.abs(a[:, :, 0])
  b = rng.normal(size=shape) + (1j * rng.normal(size=shape) if kind == "complex" else 0)
  h0 = rng.normal(size=(2, 3)) + (1j * rng.normal(size=(2, 3)) if kind == "complex" else 0)
  w = rng.normal(size=shape) + (1j * rng.normal(size=shape) if kind == "complex" else 0)
  return a, b, h0, w


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kind", ["real", "negative", "complex"])
@pytest.mark.parametrize("length", [1, 7, 1000])
def test_scan_matches_float64_loop(method, kind, length):
  a, b, h0, w = make_inputs(kind, length)
  dt = np.complex64 if kind == "complex" else np.float32

  def loss(a_, b_, h0_):
    h = scan.linear_scan(a_, b_, h0_, method)
    return jnp.sum(jnp.real(jnp.conj(jnp.asarray(w, dt)) * h)), h

  # the scan and its gradient in one program: eager, they cost ~1.5x longer
  grads_and_scan = jax.jit(jax.grad(loss, argnums=(0, 1, 2), has_aux=True))
  grads, got = grads_and_scan(jnp.asarray(a, dt), jnp.asarray(b, dt), jnp.asarray(h0, dt))
  want = numpy_scan(a, b, h0)
  np.testing.assert_allclose(np.asarray(got), want if kind == "complex" else want.real,
                             rtol=1e-5, atol=1e-5, err_msg=f"{method} forward differs")
  for name, g, ref in zip(("a", "b", "h0"), grads, numpy_grads(a, b, h0, w)):
    # JAX returns the conjugate cogradient for complex inputs (df/dre - i df/dim)
    g = np.conj(np.asarray(g)) if kind == "complex" else np.asarray(g)
    ref = ref if kind == "complex" else ref.real
    scale = np.abs(ref).max()
    np.testing.assert_allclose(g, ref, rtol=1e-5, atol=1e-5 * scale,
                               err_msg=f"{method}: gradient w.r.t. {name} differs")


def test_nonzero_h0_is_folded_into_first_input():
  a = jnp.full((1, 3, 1), 0.5)
  b = jnp.zeros((1, 3, 1))
  for method in METHODS:
    h = scan.linear_scan(a, b, jnp.ones((1, 1)), method)
    np.testing.assert_allclose(h[0, :, 0], [0.5, 0.25, 0.125])


@pytest.mark.parametrize("method", METHODS)
def test_matrix_scan_matches_loop(method):
  rng = np.random.default_rng(1)
  A = rng.normal(size=(2, 50, 4, 4)) * 0.4
  b = rng.normal(size=(2, 50, 4))
  h0 = rng.normal(size=(2, 4))
  h, want = h0, []
  for t in range(50):
    h = np.einsum("bij,bj->bi", A[:, t], h) + b[:, t]
    want.append(h)
  got = scan.matrix_scan(jnp.asarray(A, jnp.float32), jnp.asarray(b, jnp.float32),
                         jnp.asarray(h0, jnp.float32), method)
  np.testing.assert_allclose(np.asarray(got), np.stack(want, 1), rtol=1e-4, atol=1e-4)


def delta_rule_inputs(n_h, batch=2, time=30, N=5, m=3):
  rng = np.random.default_rng(n_h)
  k = rng.normal(size=(batch, time, n_h, N))
  k /= np.linalg.norm(k, axis=-1, keepdims=True)
  beta = 2 / (1 + np.exp(-rng.normal(size=(batch, time, n_h))))  # in (0, 2): eigenvalues to -1
  return k, beta, rng.normal(size=(batch, time, n_h, m)), rng.normal(size=(batch, N, m))


@pytest.mark.parametrize("n_h", [1, 3])
@pytest.mark.parametrize("method", METHODS + ["auto"])
def test_householder_scan_is_the_delta_rule(method, n_h):
  """States against a float64 loop of S <- (I - beta k k^T) S + beta k v^T (n_h steps a token),
  and gradients against the dense sequential scan of the materialized factors."""
  from ssm_bench.scan import householder, reference
  k, beta, v, h0 = delta_rule_inputs(n_h)
  S, want = h0, []
  for t in range(k.shape[1]):
    for j in range(n_h):
      kj, bj = k[:, t, j], beta[:, t, j, None, None]
      S = S - bj * kj[:, :, None] * np.einsum("bn,bnm->bm", kj, S)[:, None] + (
          bj * kj[:, :, None] * v[:, t, j, None, :])
    want.append(S)
  args = [jnp.asarray(x, jnp.float32) for x in (k, beta, v, h0)]
  dense = lambda k, beta, v, h0: reference.matrix_scan(*householder.factors(k, beta, v), h0)
  for name, fn in ((method, lambda *a: scan.householder_scan(*a, method)), ("dense", dense)):
    got = jax.jit(fn)(*args)
    np.testing.assert_allclose(np.asarray(got), np.stack(want, 1), rtol=1e-4, atol=1e-4,
                               err_msg=f"{name}: not the delta rule's states")
  w = jnp.asarray(np.random.default_rng(9).normal(size=got.shape), jnp.float32)
  grad = lambda fn: jax.jit(jax.grad(lambda *a: jnp.sum(w * fn(*a)), argnums=(0, 1, 2, 3)))(*args)
  for g, g_ref, name in zip(grad(lambda *a: scan.householder_scan(*a, method)), grad(dense),
                            ("k", "beta", "v", "h0")):
    np.testing.assert_allclose(g, g_ref, rtol=2e-4, atol=2e-4, err_msg=f"{method}: d{name}")


def n_by_n_arrays_of_the_delta_rule(method):
  """Primitives of the delta rule's forward and backward that build an N x N array."""
  k, beta, v, h0 = (jnp.asarray(x, jnp.float32) for x in delta_rule_inputs(2))
  N = k.shape[-1]
  loss = lambda *a: jnp.sum(scan.householder_scan(*a, method))
  jaxpr = jax.make_jaxpr(jax.grad(loss, argnums=(0, 1, 2, 3)))(k, beta, v, h0).jaxpr
  return [e.primitive.name for e in equations(jaxpr) for x in e.outvars
          if getattr(x.aval, "shape", ())[-2:] == (N, N)]


def test_sequential_householder_scan_builds_no_n_by_n_matrix():
  """The rank-1 form holds S (N x m) and vectors: no N x N transition, forward or backward."""
  square = n_by_n_arrays_of_the_delta_rule("sequential")
  assert not square, f"N x N arrays built by {square}"
  assert n_by_n_arrays_of_the_delta_rule("associative"), "the check cannot see the dense form"


@pytest.mark.parametrize("backend", sorted(scan.AUTO))
def test_the_delta_rules_auto_is_its_rank_one_form_on_every_backend(monkeypatch, backend):
  """Measured fastest on CPU and on an H100 (BUILD_NOTES, "Scan core"), whatever the
  diagonal scan's `auto` is there."""
  monkeypatch.setattr(jax, "default_backend", lambda: backend)
  for method in ("auto",) + scan.FUSED:  # a fused method maps to the delta rule's auto
    square = n_by_n_arrays_of_the_delta_rule(method)
    assert not square, f"on {backend} the delta rule's {method} builds N x N arrays ({square})"


def test_auto_picks_the_measured_method_and_unknown_method_fails():
  assert scan.resolve("auto") == scan.AUTO[jax.default_backend()]
  with pytest.raises(ValueError, match="sequential, associative, chunked, pallas"):
    scan.resolve("banana")
