"""Every scan method agrees with a float64 NumPy loop, forward and backward."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ssm_bench import scan

METHODS = ["sequential", "associative"]


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
  got = scan.linear_scan(jnp.asarray(a, dt), jnp.asarray(b, dt), jnp.asarray(h0, dt), method)
  want = numpy_scan(a, b, h0)
  np.testing.assert_allclose(np.asarray(got), want if kind == "complex" else want.real,
                             rtol=1e-5, atol=1e-5, err_msg=f"{method} forward differs")

  def loss(a_, b_, h0_):
    h = scan.linear_scan(a_, b_, h0_, method)
    return jnp.sum(jnp.real(jnp.conj(jnp.asarray(w, dt)) * h))

  grads = jax.grad(loss, argnums=(0, 1, 2))(jnp.asarray(a, dt), jnp.asarray(b, dt), jnp.asarray(h0, dt))
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


def test_auto_picks_sequential_on_cpu_and_unknown_method_fails():
  assert scan.resolve("auto") == ("sequential" if jax.default_backend() == "cpu" else "associative")
  with pytest.raises(ValueError, match="associative, sequential"):
    scan.resolve("banana")
