"""An example layer with a theory class of its own: a clock, whose transitions are m-th roots of
unity, registered with the theorem it is tested against.

    python -m launch.info --plugins=examples.clock --model=clock              # its predictions
    python -m launch.profile --plugins=examples.clock --model=clock           # against them
    python -m launch.info --plugins=examples.clock --model=clock --layer_kwargs='{"m": 6}'

The layer is simple_aussm with each state's transition chosen among the m roots of unity
w^k = exp(2 pi i k / m) by an argmax over logits affine in the input (a straight-through
estimator: the forward uses the chosen root, the gradient is that of the softmax mixture of the
roots, which is not on the circle and is never used forward):

    a_t[j] = w^argmax_k (W v_t + c)[j, k],   h_t = a_t h_{t-1},   y_t = W_out [Re h_t, Im h_t] + D v_t

so every transition is one of the m points, and the layer declares the class
`roots_of_unity:<m>`, which this module adds to the suite with `theory.register_class`: its step
takes a subgroup H to H^m [H, H] (`Group.power_commutator_subgroup`), so one layer tracks the
Abelian groups of exponent dividing m, and a stack removes one such quotient per layer. With
m = 4 (the default) one layer tracks C2 and C2xC2, two D4 and Q8, and no depth tracks C3, C6, S3,
A4, S4 or A5, where simple_aussm (any phase) tracks C3 and C6 with one layer and S3 and A4 with
two; `"m": 6` gives back C3, C6, S3 and A4 and leaves C4 to two layers.

Depth 1 is proven for this layer, which has no input term: its state after a stream is the
image of the stream's letters in the Abelian group of n-tuples of m-th roots of unity, so two
streams with the letters in another order, or one with a letter repeated m more times, end in
the same state; the group product must agree on them (ab = ba, g^m = 1) for the readout to
name it. For deeper stacks, that k clocks suffice where the series reaches the identity in k
steps is built: the record's construction is paper 000's unit-modulus cascade with every angle
one of the m roots (`analytic_cascade.cascade_construction`; S4 in three clocks at m = 6 is
exact at 10^6 steps, `python -m launch.analytic --plugins=examples.clock --model=clock
--task=S4`). That fewer do not suffice (the rest of Theorems 4.1-4.2 with characters valued in
the m-th roots) is assumed here, not proven: the profile tests it.
"""
from __future__ import annotations

import json
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ssm_bench import analytic_cascade
from ssm_bench import registry
from ssm_bench import scan
from ssm_bench import theory
from ssm_bench.layers import common
from ssm_bench.registry import module_kwargs, register_layer


def _exponent_step(group, subgroup, m):
  """H -> H^m [H, H]; without m (any root of unity), the commutator subgroup."""
  if m is None:
    return group.commutator_subgroup(subgroup)
  return group.power_commutator_subgroup(subgroup, m)


def _roots_of_unity(a, tol, m):
  """|a| = 1 and, with m, a^m = 1: on the unit circle, at one of the m points."""
  a = np.asarray(a).astype(np.complex128)
  off_circle = float(np.max(np.abs(np.abs(a) - 1.0), initial=0.0))
  if m is None:
    return off_circle <= tol, f"max ||a| - 1| = {off_circle:.3g}"
  # the distance to the nearest m-th root, measured in angle
  angle = np.angle(a) * m / (2 * math.pi)
  off_root = float(np.max(np.abs(angle - np.round(angle)), initial=0.0)) * 2 * math.pi / m
  ok = off_circle <= tol and off_root <= tol
  return ok, (f"max ||a| - 1| = {off_circle:.3g}, max angle to the nearest of the {m} roots of "
              f"unity {off_root:.3g}")


theory.register_class(
    "roots_of_unity", "input-dependent diagonal whose every transition is an m-th root of unity",
    "one layer tracks the Abelian groups of exponent dividing m, k layers the groups with a "
    "series of length k whose factors are such groups: G -> G^m [G, G] (depth 1 proven for a "
    "layer with no input term, examples/clock.py; k layers suffice: built, the unit-modulus "
    "cascade with m-th roots; that fewer do not for deeper stacks: paper 000's Theorems "
    "4.1-4.2 with characters valued in the m-th roots, assumed)",
    step=_exponent_step, contains=_roots_of_unity, parameter="m")


class Clock(nn.Module):
  """simple_aussm with each transition one of the m-th roots of unity (straight-through)."""
  cfg: object  # ssm_bench.config.ModelConfig: d_state clocks per layer, the scan method
  m: int = 4

  @nn.compact
  def __call__(self, v):
    cfg, d, n, m = self.cfg, v.shape[-1], self.cfg.d_state, self.m
    if m < 1:
      raise ValueError(f"clock: m must be a positive integer, got {m}")
    roots = jnp.exp(2j * math.pi * jnp.arange(m) / m)
    logits = nn.Dense(n * m, name="logits")(v).reshape(v.shape[:-1] + (n, m))
    soft = jax.nn.softmax(logits, -1).astype(jnp.complex64) @ roots  # inside the disk
    hard = jax.nn.one_hot(jnp.argmax(logits, -1), m, dtype=jnp.complex64) @ roots
    a = soft + jax.lax.stop_gradient(hard - soft)  # the root forward, the mixture's gradient
    self.sow("intermediates", "transition", a)
    h0 = common.initial_state(self, cfg.initial_state, (n,)).astype(jnp.complex64)
    h = scan.linear_scan(a, jnp.zeros_like(a), common.batch_h0(h0, v.shape[0]), cfg.scan_method)
    D = self.param("D", nn.initializers.ones, (d,))
    return nn.Dense(d, name="readout")(jnp.concatenate([h.real, h.imag], -1)) + D * v


class _ClockWeights(analytic_cascade.SimpleLayers):
  """The cascade's rotations as the clock's choices: the channel that carries a one-hot input
  raises the logit of the root its angle is to 10, so the argmax turns the state by exactly that
  angle (each level reads exactly one such channel per step; a state no level rotates has
  all-zero logits, whose argmax is root 0, the identity)."""

  def __init__(self, p, cfg):
    super().__init__(p, cfg)
    self.m = registry.layer_kwargs(cfg.layers[:1], cfg.layer_kwargs)[0]["m"]

  def rotate(self, i, channel, coord, angle):
    k = angle * self.m / (2 * math.pi)
    if abs(k - round(k)) > 1e-6:
      raise ValueError(f"clock: angle {angle} is not a multiple of 2 pi / {self.m}")
    self.p[f"layer{i}"]["logits"]["kernel"][channel, coord * self.m + round(k) % self.m] = 10.0


def cascade_m(task: str) -> str:
  """The cascade's kwargs: the default m where its roots hold every character of the group's
  derived quotients, else the least m that does (the least common multiple of the quotients'
  exponents). At such an m the class's series is the derived series, so the class claims the
  group at exactly the cascade's depth."""
  m = math.lcm(*analytic_cascade.derived_exponents(task))
  default = module_kwargs(Clock)["m"]
  return "" if default % m == 0 else registry.canonical_kwargs(json.dumps({"m": m}))


CASCADE = analytic_cascade.cascade_construction(
    "any solvable group in derived-length-many clocks (at the default m where its roots hold "
    "the derived quotients' characters, else the least m that does): the unit-modulus cascade "
    "with every angle one of the m roots (paper 000, Theorem 4.2)",
    layer="clock", writer=_ClockWeights, kwargs=cascade_m)

register_layer("clock", Clock, theory_class=lambda kwargs: f"roots_of_unity:{kwargs['m']}",
               kwargs=module_kwargs(Clock), constructions=(CASCADE,),
               description="each transition one of the m-th roots of unity (examples/clock.py)")
