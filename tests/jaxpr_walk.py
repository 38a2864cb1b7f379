"""Walking a jaxpr, nested ones included: for tests that read what a program was traced into."""
import jax
import jax.extend


def equations(jaxpr):
  """Every equation of a jaxpr, nested ones (custom_vjp, pjit, scan, pallas_call) included."""
  for e in jaxpr.eqns:
    yield e
    for sub in jax.extend.core.jaxprs_in_params(e.params):
      yield from equations(sub)


def outside_kernels(jaxpr):
  """Equations of a jaxpr and its sub-jaxprs, the bodies of Pallas kernels excepted: what XLA
  runs around the kernels."""
  for e in jaxpr.eqns:
    yield e
    if e.primitive.name != "pallas_call":
      for sub in jax.extend.core.jaxprs_in_params(e.params):
        yield from outside_kernels(sub)
