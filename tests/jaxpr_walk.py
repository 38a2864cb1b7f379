"""Walking a jaxpr, nested ones included: for tests that read what a program was traced into."""
import jax.extend

from launch.bench_train_many import outside_kernels  # noqa: F401  (one walker, the bench's)


def equations(jaxpr):
  """Every equation of a jaxpr, nested ones (custom_vjp, pjit, scan, pallas_call) included."""
  for e in jaxpr.eqns:
    yield e
    for sub in jax.extend.core.jaxprs_in_params(e.params):
      yield from equations(sub)

