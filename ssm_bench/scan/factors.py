"""A diagonal SSM layer's recurrence, given by the factors the layer already has.

    h_t[d, n] = a_t[d, n] h_{t-1}[d, n] + x_t[d] B_t[n]          (B per step, shared over d)
                                        + x_t[d] B[d, n]          (or B constant per (d, n))
    y_t[d]    = Re sum_n C_t[n] h_t[d, n]                        (C likewise)

with the transition a_t given by the layer's family:

    decay         exp(dt_t[d] lam[d, n])          dt (b, t, d), lam (d, n) real < 0
    signed_decay  2 exp(dt_t[d] lam[d, n]) - 1    in (-1, 1): negative eigenvalues
    constant      a[d, n]                         constant complex (exp(dt lam) precomputed)
    rotation      exp(i theta_t[n])               theta (b, t, n): unit modulus, shared over d
    complex       a_t[n]                          a (b, t, n): any complex number per step,
                                                  shared over d (decay and phase: r e^{i phi})

B and C each take either form, whatever the family (a researcher's layer may pair any of them);
the fused kernels read the built-in layers' families and pairing only (`kernel_layout`: per step
for the real families, constant for the complex ones; not the `complex` family, which no
built-in layer hands over) and `diagonal_scan` hands the others to chunked.
x is real in every family; the real families' B, C and h0 are real too.

`discretize="softplus"` hands the real families' x and dt before Mamba's rule: dt is the step
size's pre-activation and x the input before its scaling, and the recurrence uses
dt' = softplus(dt) and x' = dt' x (`discretized`). The real kernels of `pallas_chunked` read
them so and apply the rule in registers, where XLA would write dt' and x' out and read them
again; every other method scans `discretized()` factors, which compute the same thing first.

A layer names its family in its registry record (`scan_family`); the layers are not named here.

`Factors` holds them; `materialize` builds a_t and the input term for a window of steps, which is
what the reference methods scan (chunked and the fused kernels never build them).

A layer may hand its per-step arrays channels first, (channels, batch, time), where
`scan.channels_first` says the method reads that layout (the time-parallel kernel's tiles): its
matmuls then write them in that order at no cost, where XLA would otherwise transpose each one.
`batch_major` gives the usual layout, which every other method scans.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

# the families every fused kernel reads (the built-in layers'), and every family: the complex
# one only the chunked kernel reads (`pallas_chunked`)
FUSED_FAMILIES = ("decay", "signed_decay", "constant", "rotation")
FAMILIES = FUSED_FAMILIES + ("complex",)
COMPLEX = ("constant", "rotation", "complex")
DISCRETIZE = ("given", "softplus")  # x and dt as the recurrence uses them, or Mamba's rule
_PER_STEP = ("x", "dt", "theta", "a", "B", "C")  # arrays with a time axis (when present)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Factors:
  """One layer's factors. Per-step arrays are (batch, time, ...); B and C are each (batch, time,
  n) when they vary per step (the built-in decay layers') or (d, n) constants (the complex
  ones'). `channels_first`: the per-step arrays are (..., batch, time) instead, channels or
  states first. `check()` says in one line what does not fit."""
  family: str = dataclasses.field(metadata=dict(static=True))
  x: jax.Array  # (b, t, d) real
  B: jax.Array
  C: jax.Array
  h0: jax.Array  # (b, d, n) or (d, n) shared by every batch row; complex for complex families
  dt: jax.Array | None = None  # decay, signed_decay
  lam: jax.Array | None = None  # decay, signed_decay
  theta: jax.Array | None = None  # rotation
  a: jax.Array | None = None  # constant (d, n); complex, per step (b, t, n)
  channels_first: bool = dataclasses.field(default=False, metadata=dict(static=True))
  discretize: str = dataclasses.field(default="given", metadata=dict(static=True))

  def __post_init__(self):
    if self.family not in FAMILIES:
      raise ValueError(f"unknown family {self.family!r}; choose one of {', '.join(FAMILIES)}")
    if self.discretize not in DISCRETIZE:
      raise ValueError(f"unknown discretize {self.discretize!r}; choose one of "
                       f"{', '.join(DISCRETIZE)}")

  def discretized(self) -> "Factors":
    """The same recurrence with x and dt as it uses them (Mamba's rule applied: the class
    docstring); the factors themselves when they already are."""
    if self.discretize == "given":
      return self
    dt = jax.nn.softplus(self.dt)
    return dataclasses.replace(self, x=dt * self.x, dt=dt, discretize="given")

  @property
  def is_complex(self) -> bool:
    return self.family in COMPLEX

  @property
  def kernel_layout(self) -> bool:
    """B and C as the fused kernels read them: per step for the real families, constant for the
    complex ones (every built-in layer's)."""
    return all((v.ndim == 3) != self.is_complex for v in (self.B, self.C))

  def check(self):
    """A one-line ValueError naming the expected shape for a factor that does not fit x and
    h0 (`diagonal_scan` calls it where it traces, so a plugin layer's mistake reads as one)."""
    if self.x.ndim != 3:
      raise ValueError(f"{self.family} factors: x has shape {self.x.shape}; expected "
                       f"{'(d, batch, time)' if self.channels_first else '(batch, time, d)'}")
    if self.discretize != "given" and self.family not in ("decay", "signed_decay"):
      raise ValueError(f"{self.family} factors: discretize={self.discretize!r} is a rule for "
                       "the step size dt of the decay and signed_decay families")
    if jnp.iscomplexobj(self.x):
      raise ValueError(f"{self.family} factors: x is complex; x is real (a complex input "
                       "vector goes in B)")
    d = self.x.shape[0 if self.channels_first else -1]
    n = self.h0.shape[-1]
    per_step = lambda m: ((m, self.batch, self.length) if self.channels_first
                          else (self.batch, self.length, m))
    needs = {"h0": [(d, n), (self.batch, d, n)], "B": [per_step(n), (d, n)],
             "C": [per_step(n), (d, n)]}
    needs.update({"decay": {"dt": [per_step(d)], "lam": [(d, n)]},
                  "signed_decay": {"dt": [per_step(d)], "lam": [(d, n)]},
                  "rotation": {"theta": [per_step(n)]},
                  "constant": {"a": [(d, n)]},
                  "complex": {"a": [per_step(n)]}}[self.family])
    for name, shapes in needs.items():
      v = getattr(self, name)
      if v is None or v.shape not in shapes:
        got = "is missing" if v is None else f"has shape {v.shape}"
        raise ValueError(f"{self.family} factors: {name} {got}; expected "
                         + " or ".join(map(str, shapes)) + f" (x {self.x.shape}, n = {n} "
                         "from h0's last axis)")
      if not self.is_complex and jnp.iscomplexobj(v):
        raise ValueError(f"{self.family} factors: {name} is complex; the real families' "
                         "factors are real (a complex state is the rotation or constant family)")

  @property
  def batch(self) -> int:
    return self.x.shape[1 if self.channels_first else 0]

  def batched_h0(self):
    """h0 as (batch, d, n): a (d, n) h0, shared by every batch row, broadcast."""
    if self.h0.ndim == 3:
      return self.h0
    return jnp.broadcast_to(self.h0, (self.batch,) + self.h0.shape)

  @property
  def length(self) -> int:
    return self.x.shape[-1 if self.channels_first else 1]

  def steps(self) -> dict:
    """The per-step arrays, by name (time on axis 1; channels first: the last axis)."""
    return {k: getattr(self, k) for k in _PER_STEP if getattr(self, k) is not None
            and (k not in ("B", "C", "a") or getattr(self, k).ndim == 3)}

  def with_steps(self, **steps) -> "Factors":
    return dataclasses.replace(self, **steps)

  def to_channels_first(self) -> "Factors":
    """The same factors with (channels, batch, time) per-step arrays, as a channels-first layer
    builds them (`scan.channels_first`); the inverse of `batch_major`."""
    if self.channels_first:
      return self
    return dataclasses.replace(self, channels_first=True,
                               **{k: jnp.moveaxis(v, -1, 0) for k, v in self.steps().items()})

  def batch_major(self) -> "Factors":
    """The same factors with (batch, time, ...) per-step arrays (a copy when channels first)."""
    if not self.channels_first:
      return self
    return dataclasses.replace(self, channels_first=False,
                               **{k: jnp.moveaxis(v, 0, -1) for k, v in self.steps().items()})


def decay(dt, lam, signed: bool, slope: bool = False):
  """The real families' a = exp(dt lam), or 2 exp(dt lam) - 1 for signed decay (dt[..., d]);
  with `slope`, (a, da / d(dt lam)) (a written-out backward's)."""
  e = jnp.exp(dt[..., None] * lam)
  a = 2.0 * e - 1.0 if signed else e
  return (a, 2.0 * e if signed else e) if slope else a


def transition(f: Factors):
  """a_t broadcastable to (b, t, d, n)."""
  f = f.discretized()
  if f.family in ("decay", "signed_decay"):
    return decay(f.dt, f.lam, f.family == "signed_decay")
  if f.family == "rotation":
    return jnp.exp(1j * f.theta)[..., None, :]
  return f.a[..., None, :] if f.family == "complex" else f.a


def materialize(f: Factors):
  """(a_t, b_t, C broadcastable to the state) over f's time window: O(b t d n) memory."""
  f = f.discretized()
  B, C = (v[..., None, :] if v.ndim == 3 else v for v in (f.B, f.C))
  return transition(f), f.x[..., None] * B, C


def readout(h, C):
  """y[..., d] = Re sum_n C h."""
  return jnp.real(jnp.sum(h * C, axis=-1))
