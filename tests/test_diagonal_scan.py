"""diagonal_scan, every method and family, against the factored recurrence in float64 and its
finite-difference derivatives; chunked's chunks and backward; the factors' layouts and checks."""

import dataclasses
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import conftest
from jaxpr_walk import equations, outside_kernels
from ssm_bench import scan

pytestmark = pytest.mark.heavy  # a minute or more in all: scheduled first (conftest.py)

FACTORED = [m for m in scan.METHODS if m != "auto"]

def factored_inputs(family, length, seed=0, b=2, d=3, n=2, layouts=None):
  """float64 NumPy factors; negmamba gets transitions through 0 and near -1. `layouts`: B's
  and C's ("step" (b, t, n) or "const" (d, n)) where not the built-in layers' pairing."""
  rng = np.random.default_rng(seed)
  cplx = lambda *s: rng.normal(size=s) + 1j * rng.normal(size=s)
  real = family in ("decay", "signed_decay")
  layouts = layouts or (("step", "step") if real else ("const", "const"))
  bc = lambda layout: (rng.normal if real else lambda size: cplx(*size))(
      size=(b, length, n) if layout == "step" else (d, n))
  out = {"x": rng.normal(size=(b, length, d)), "B": bc(layouts[0]), "C": bc(layouts[1])}
  if real:
    out.update(h0=rng.normal(size=(b, d, n)), dt=rng.uniform(0.01, 3.0, (b, length, d)),
               lam=-rng.uniform(0.2, 2.0, (d, n)))
  else:
    out["h0"] = cplx(b, d, n)
    if family == "rotation":
      out["theta"] = rng.uniform(-np.pi, np.pi, (b, length, n))
    elif family == "complex":  # a decay and a turn per step, some steps growing past 1
      out["a"] = rng.uniform(0.5, 1.05, (b, length, n)) * np.exp(
          1j * rng.uniform(-np.pi, np.pi, (b, length, n)))
    else:
      out["a"] = rng.uniform(0.8, 0.999, (d, n)) * np.exp(1j * rng.uniform(-np.pi, np.pi, (d, n)))
  return out


def numpy_factored(family, p):
  """y_t[d] = Re sum_n C h_t of the factored recurrence, float64 loop over time."""
  x, h = p["x"], p["h0"].astype(complex)
  at = lambda v, t: v[:, t, None, :] if v.ndim == 3 else v
  ys = []
  for t in range(x.shape[1]):
    if family in ("decay", "signed_decay"):
      a = np.exp(p["dt"][:, t, :, None] * p["lam"])
      a = 2 * a - 1 if family == "signed_decay" else a
    else:
      a = (np.exp(1j * p["theta"][:, t])[:, None, :] if family == "rotation"
           else at(p["a"], t))
    h = a * h + x[:, t, :, None] * at(p["B"], t)
    ys.append(np.real(np.sum(at(p["C"], t) * h, -1)))
  return np.stack(ys, 1)


def output_and_grad(fn, cotangent, compiler_options=None):
  """f -> (y, the gradient of a loss whose dL/dy is cotangent(y)), y = fn(f), compiled as one
  program: an eager forward plus a separate gradient took 1.5-2x longer. Two programs compared
  bit for bit compile with `conftest.USERS_COMPILE`: the tests' lighter compile rounds two equal
  programs differently."""
  def both(f):
    y, pull = jax.vjp(fn, f)
    return y, pull(cotangent(y))[0]
  return jax.jit(both, compiler_options=compiler_options)


def to_factors(family, p):
  dt = lambda k: jnp.asarray(p[k], jnp.complex64 if np.iscomplexobj(p[k]) else jnp.float32)
  return scan.Factors(family, **{k: dt(k) for k in p})


def channels_first(f):
  return f.to_channels_first()


def assert_channels_first_gives_the_same_bits(fn, runs, family):
  """Two runs vmapped through `fn` as batch-major and as channels-first factors: y (as (d, b,
  t)) and every gradient bit for bit."""
  stack = lambda fs: jax.tree.map(lambda *x: jnp.stack(x), *fs)
  both = jax.vmap(output_and_grad(fn, jnp.cos, conftest.USERS_COMPILE))
  y, g = both(stack(runs))
  y_cf, g_cf = both(stack([channels_first(f) for f in runs]))
  np.testing.assert_array_equal(jnp.moveaxis(y_cf, 1, -1), y, err_msg=f"{family}: y differs")
  for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(jax.vmap(
      lambda g: g.batch_major())(g_cf)), jax.tree.leaves(g)):
    np.testing.assert_array_equal(a, b, err_msg=f"{family}: gradient {jax.tree_util.keystr(path)}"
                                  " of channels-first factors differs")


@pytest.mark.parametrize("family", ["decay", "constant"])
def test_an_h0_shared_by_every_batch_row_gives_what_its_broadcast_gives(family):
  """The layers hand over h0 as (d, n), shared by the batch: every method gives the values and
  gradients of its broadcast (h0's gradient summed over the rows), and the time-parallel kernel
  reads it as it is: no per-row copy of h0 is transposed outside the kernels."""
  f = to_factors(family, factored_inputs(family, 7, seed=4, b=2, d=5, n=3))
  f = dataclasses.replace(f, h0=f.h0[0])
  per_row = dataclasses.replace(f, h0=f.batched_h0())
  assert per_row.h0.shape == (2, 5, 3)
  for method in ("sequential", "chunked", "pallas", "pallas_parallel"):
    fn = lambda f: scan.diagonal_scan(f, method)
    y, g = output_and_grad(fn, jnp.cos)(f)
    y_rows, g_rows = output_and_grad(fn, jnp.cos)(per_row)
    g_rows = dataclasses.replace(g_rows, h0=g_rows.h0.sum(0))
    np.testing.assert_allclose(y, y_rows, rtol=1e-6, atol=1e-6, err_msg=f"{method}: y differs")
    for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(g), jax.tree.leaves(g_rows)):
      # atol scales with the leaf: a small entry summed from large terms keeps their rounding.
      np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(b).max())),
                                 err_msg=f"{method}: gradient {jax.tree_util.keystr(path)}"
                                 " with a shared h0 differs")
  for factors, want in ((f, 0), (per_row, 1 if family == "decay" else 2)):
    jaxpr = jax.make_jaxpr(jax.grad(lambda f: jnp.sum(scan.diagonal_scan(f, "pallas_parallel"))))(
        factors).jaxpr
    copies = [e for e in outside_kernels(jaxpr) if e.primitive.name == "transpose"
              and e.invars[0].aval.shape == (2, 5, 3)]
    assert len(copies) == want, f"h0 {factors.h0.shape}: {len(copies)} per-row copies transposed"


@pytest.mark.parametrize("family", ["signed_decay", "rotation"])
def test_channels_first_factors_give_every_method_the_same_numbers(family, monkeypatch):
  """Channels-first factors (`Factors.channels_first`) through each method that reads the usual
  layout (and the time-parallel kernel past its length, which hands them to the step kernel):
  y is (d, b, t) and y and every gradient are the same numbers as from (b, t, d) factors."""
  from ssm_bench.scan import pallas_parallel
  monkeypatch.setattr(pallas_parallel, "MAX_LENGTH", 4)  # 7 steps go to the step kernel
  f = to_factors(family, factored_inputs(family, 7, seed=2, b=2, d=3, n=2))
  for method in ("sequential", "associative", "chunked", "pallas", "pallas_parallel"):
    fn = lambda f: scan.diagonal_scan(f, method)
    y, g = output_and_grad(fn, jnp.cos)(f)
    y_cf, g_cf = output_and_grad(fn, jnp.cos)(channels_first(f))
    np.testing.assert_allclose(jnp.moveaxis(y_cf, 0, -1), y, rtol=1e-6, atol=1e-6,
                               err_msg=f"{method}: channels-first y differs")
    for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(g_cf.batch_major()),
                            jax.tree.leaves(g)):
      np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6, err_msg=(
          f"{method}: channels-first gradient {jax.tree_util.keystr(path)} differs"))


@pytest.mark.parametrize("method,length", [
    # slow: each fused kernel's values and gradients at short lengths are checked against the
    # sequential scan (checked here) in its own tests, every family
    pytest.param(m, n, marks=pytest.mark.slow) if n == 7 and m in scan.FUSED else (m, n)
    for m in FACTORED for n in (7, 1000)
    # the associative scan at 1000 is tested above; pallas_parallel (and pallas_chunked
    # through it) hands 1000 steps to pallas
    if (m, n) not in (("associative", 1000), ("pallas_parallel", 1000), ("pallas_chunked", 1000))])
@pytest.mark.parametrize("family", scan.FAMILIES)
def test_diagonal_scan_matches_float64_loop(method, family, length):
  assert_matches_float64_loop(lambda f: scan.diagonal_scan(f, method), family,
                              factored_inputs(family, length),
                              f"{method}/{family}, length {length}")


def assert_matches_float64_loop(fn, family, p, what):
  """fn(factors) against the float64 loop: values, and each factor's gradient of sum(w y) along
  a random direction against central finite differences."""
  w = np.random.default_rng(9).normal(size=p["x"].shape)
  want = numpy_factored(family, p)
  w32 = jnp.asarray(w, jnp.float32)
  got, grads = output_and_grad(fn, lambda y: w32)(to_factors(family, p))
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4 * np.abs(want).max(),
                             err_msg=f"{what}: forward differs")
  rng = np.random.default_rng(3)
  loss = lambda q: float(np.sum(w * numpy_factored(family, q)))
  for name, value in p.items():  # directional derivative along a random direction, per factor
    v = rng.normal(size=value.shape)
    v = v + 1j * rng.normal(size=value.shape) if np.iscomplexobj(value) else v
    eps = 1e-6
    fd = (loss({**p, name: value + eps * v}) - loss({**p, name: value - eps * v})) / (2 * eps)
    ad = float(np.real(np.sum(np.asarray(getattr(grads, name), np.complex128) * v)))
    assert abs(ad - fd) <= 1e-3 * max(1.0, abs(fd)), (
        f"{what}: d/d{name} is {ad:.6g}, finite differences {fd:.6g}")


# A researcher's layer may pair any family with B and C per step or constant; the built-in
# layers use one pairing per family (real: per step, complex: constant), which the kernels read.
OTHER_LAYOUTS = [(family, layouts) for family in scan.FAMILIES
                 for layouts in itertools.product(("step", "const"), repeat=2)
                 if layouts != (("step", "step") if family in ("decay", "signed_decay")
                                else ("const", "const"))]


@pytest.mark.parametrize("family,layouts", OTHER_LAYOUTS)
def test_every_family_takes_b_and_c_per_step_or_constant(family, layouts):
  """Chunked (the CPU's auto) gives the float64 loop's values and gradients at chunks that do
  and do not divide the length, and every fused method hands such factors to it: what
  `recording` shows and what the call returns."""
  from ssm_bench.scan import chunked
  p = factored_inputs(family, 7, seed=6, b=2, d=3, n=4, layouts=layouts)
  for chunk in (1, 3, 4):
    assert_matches_float64_loop(lambda f: chunked.scan(f, chunk), family, p,
                                f"{family}, B/C {layouts}, chunk {chunk}")
  f = to_factors(family, p)
  want = scan.diagonal_scan(f, "chunked")
  for method in scan.FUSED:
    with scan.recording() as used:
      got = scan.diagonal_scan(f, method)
    assert used == ["chunked"], f"{family}, B/C {layouts}: {method} ran {used}, not chunked"
    np.testing.assert_array_equal(got, want, err_msg=f"{family}, B/C {layouts}: {method} differs")


@pytest.mark.parametrize("family", scan.FAMILIES)
def test_the_fused_methods_keep_the_built_in_layouts(family):
  """The hand-over to chunked is for other layouts only: the built-in pairing stays fused. The
  complex family, which only the chunked kernel reads, runs there for every fused method; and
  a layer asking `scan.channels_first` is told the layout of the kernel that runs, not the one
  asked for."""
  f = to_factors(family, factored_inputs(family, 7))
  for method in scan.FUSED:
    with scan.recording() as used:
      jax.eval_shape(lambda f: scan.diagonal_scan(f, method), f)
    want = method if family in scan.FUSED_FAMILIES else "pallas_chunked"
    assert used == [want], f"{family}: {method} ran {used}, not {want}"
    assert scan.channels_first(method, 7, family) == (want in scan.READS_CHANNELS_FIRST), (
        f"{family} under {method} (runs {want}): channels first "
        f"{scan.channels_first(method, 7, family)}")


@pytest.mark.parametrize("change,problem", [
    (dict(B=jnp.zeros((2, 7, 5))),
     "decay factors: B has shape (2, 7, 5); expected (2, 7, 2) or (3, 2)"),
    (dict(C=jnp.zeros((3, 5))), "C has shape (3, 5); expected (2, 7, 2) or (3, 2)"),
    (dict(lam=None), "lam is missing; expected (3, 2)"),
    (dict(dt=jnp.zeros((2, 7))), "dt has shape (2, 7); expected (2, 7, 3)"),
    (dict(h0=jnp.zeros((4, 3, 2))), "h0 has shape (4, 3, 2); expected (3, 2) or (2, 3, 2)"),
    (dict(B=jnp.zeros((2, 7, 2), jnp.complex64)), "B is complex; the real families"),
    (dict(x=jnp.zeros((2, 7))), "x has shape (2, 7); expected (batch, time, d)"),
    (dict(x=jnp.zeros((2, 7, 3), jnp.complex64)), "x is complex; x is real"),
])
def test_factors_that_do_not_fit_fail_in_one_line_naming_the_expected_shape(change, problem):
  f = dataclasses.replace(to_factors("decay", factored_inputs("decay", 7)), **change)
  with pytest.raises(ValueError) as e:
    scan.diagonal_scan(f, "chunked")
  assert problem in str(e.value) and "\n" not in str(e.value), str(e.value)


def before_mambas_rule(f):
  """Real factors as a Mamba layer hands them (`Factors.discretize`): dt the pre-activation
  (both signs, through softplus's bend), x unscaled."""
  return dataclasses.replace(f, dt=4.0 * f.dt - 3.0, discretize="softplus")


def discretized_by_hand(fn):
  """fn of the factors with Mamba's rule written out here, as arguments of the handed ones."""
  def apply(f):
    dt = jnp.logaddexp(f.dt, 0.0)
    return fn(dataclasses.replace(f, x=dt * f.x, dt=dt, discretize="given"))
  return apply


@pytest.mark.parametrize("method", ["sequential", "associative", "chunked"])
@pytest.mark.parametrize("family", ["decay", "signed_decay"])
def test_factors_before_mambas_rule_scan_softplus_dt_and_x_scaled_by_it(method, family):
  """`discretize="softplus"`: the scan uses dt' = softplus(dt) and x' = dt' x, values and the
  gradients of what was handed (the fused kernel's own are in test_pallas_chunked.py)."""
  f = before_mambas_rule(to_factors(family, factored_inputs(family, 9, d=3, n=2)))
  fn = lambda f: scan.diagonal_scan(f, method)
  w = jnp.cos
  got, got_g = output_and_grad(fn, w)(f)
  want, want_g = output_and_grad(discretized_by_hand(fn), w)(f)
  np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=f"{method}: values")
  for name in ("x", "dt", "lam", "B", "C", "h0"):
    np.testing.assert_allclose(getattr(got_g, name), getattr(want_g, name), rtol=1e-5,
                               atol=1e-5, err_msg=f"{method}, {family}: d/d{name} differs")


def test_a_discretize_rule_other_than_the_real_families_step_size_fails_in_one_line():
  with pytest.raises(ValueError, match="^unknown discretize 'zoh'; choose one of given, softplus$"):
    to_factors("decay", factored_inputs("decay", 7)).with_steps(discretize="zoh")
  f = to_factors("rotation", factored_inputs("rotation", 7))
  with pytest.raises(ValueError, match="^rotation factors: discretize='softplus' is a rule for the "
                                       "step size dt of the decay and signed_decay families$"):
    scan.diagonal_scan(f.with_steps(discretize="softplus"), "chunked")


def test_auto_on_a_gpu_picks_each_familys_kernel(monkeypatch):
  """On a GPU `auto` is the chunked kernel for the families it has, and the step-by-step
  kernel for s4d's constant family (`AUTO_BY_FAMILY`: 1.77x faster there than time-parallel);
  the complex family's kernel is untimed there (and one XLA fails to compile around it on some
  GPUs), so `auto` keeps the plain-JAX scan for it."""
  monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
  got = {family: scan.resolve("auto", family) for family in scan.FAMILIES}
  assert got == {"decay": "pallas_chunked", "signed_decay": "pallas_chunked",
                 "rotation": "pallas_chunked", "constant": "pallas", "complex": "chunked"}, got


def test_chunked_uses_the_cpu_chunks_only_on_cpu_and_keeps_its_memory_bound_elsewhere(monkeypatch):
  """One step per chunk (the complex families' CPU size) saves every state: off the CPU, where
  chunked is the memory-light fallback, every family must keep chunks of CHUNK steps."""
  from ssm_bench.scan import chunked
  f = to_factors("rotation", factored_inputs("rotation", 48))
  def saved_chunks():
    jaxpr = jax.make_jaxpr(lambda f: chunked.scan(f))(f).jaxpr
    return [e.params["length"] for e in equations(jaxpr) if e.primitive.name == "scan"]
  monkeypatch.setattr(chunked.jax, "default_backend", lambda: "cpu")
  assert saved_chunks() == [48 // chunked.CPU_CHUNK["rotation"]]
  for backend in ("gpu", "tpu"):
    monkeypatch.setattr(chunked.jax, "default_backend", lambda: backend)
    assert saved_chunks() == [48 // chunked.CHUNK], f"{backend}: chunked uses the CPU's chunks"


@pytest.mark.parametrize("family", scan.FAMILIES)
def test_chunked_gives_the_reference_at_any_chunk_size_including_padded_ones(family):
  """CHUNK differs per family (1 for the complex ones), so the padding of a length that is not a
  whole number of chunks must hold for every family and size, not only for the defaults."""
  from ssm_bench.scan import chunked
  p = factored_inputs(family, 7)
  f = to_factors(family, p)
  w = jnp.asarray(np.random.default_rng(9).normal(size=p["x"].shape), jnp.float32)
  want, want_g = output_and_grad(lambda f: scan.diagonal_scan(f, "sequential"), lambda y: w)(f)
  for chunk in (1, 3, 4, 16):
    got, got_g = output_and_grad(lambda f: chunked.scan(f, chunk), lambda y: w)(f)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5,
                               err_msg=f"{family}, chunk {chunk}: values differ from sequential")
    for name in p:
      np.testing.assert_allclose(getattr(got_g, name), getattr(want_g, name), rtol=1e-4, atol=1e-5,
                                 err_msg=f"{family}, chunk {chunk}: d/d{name} differs")


@pytest.mark.parametrize("family", scan.FAMILIES)
def test_chunked_written_out_backward_keeps_vmapped_runs_apart(family):
  """Chunked's written-out backwards (`chunked._real`, `_pairs`) under vmap, as a sweep's group
  trains them: two different runs, with shared and per-row h0, each get their own gradients."""
  from ssm_bench.scan import chunked
  runs = [to_factors(family, factored_inputs(family, 9, seed=s, b=2, d=3, n=2)) for s in (1, 2)]
  shared = [dataclasses.replace(f, h0=f.h0[0]) for f in runs]
  for group in (runs, shared):
    assert_runs_under_vmap_match_the_sequential_scan(lambda f: chunked.scan(f, 4), group, family)


def assert_runs_under_vmap_match_the_sequential_scan(fused, runs, family):
  """Different runs stacked and vmapped through `fused`: each run's values and gradients equal
  the sequential scan's for that run (an index map that mixed the runs, or read run 0 for
  both, fails here; identical runs could not tell)."""
  stacked = jax.tree.map(lambda *x: jnp.stack(x), *runs)
  y, g = jax.vmap(output_and_grad(fused, jnp.cos))(stacked)  # the gradient of sum(sin(y))
  ref = output_and_grad(lambda f: scan.diagonal_scan(f, "sequential"), jnp.cos)
  for k, f in enumerate(runs):
    want_y, want = ref(f)
    np.testing.assert_allclose(y[k], want_y, rtol=2e-4, atol=2e-5,
                               err_msg=f"{family}: run {k}'s output under vmap differs")
    got = jax.tree.map(lambda x: x[k], g)
    for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(got), jax.tree.leaves(want)):
      np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-4, err_msg=f"{family}: run {k}'s "
                                 f"gradient {jax.tree_util.keystr(path)} under vmap differs")
  assert not np.allclose(y[0], y[1]), "the runs are not different"
