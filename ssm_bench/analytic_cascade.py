"""Cascades by hand, in the modules training uses: any solvable group in k simple_aussm (or full
AUSSM, or a plugin's layer of that form: `cascade_construction`) layers, k = its derived length
(paper 000, Theorem 4.2's direction "derived length k suffices"). The levels of a normal series
with Abelian quotients (`levels_of`, `next_input`, `cosets`) are shared with the 2-group cascade
of negmamba layers (`analytic_signed`).

Level i tracks a stream z_t in G_i (level 0: the tokens; G_0 = G > G_1 = G' > ... > G_k = 1, the
derived series). Its layer rotates one state coordinate per character of the Abelian quotient
A_i = G_i / G_{i+1} (analytic.characters), so it holds q_t, the coset of the running product
Q_t = z_1 ... z_t. With a coset representative c(q) (c(1) = 1), Q_t = K_t c(q_t) where
K_t = K_{t-1} w_t and w_t = c(q_{t-1}) z_t c(q_t)^-1 lies in G_{i+1}: the stream of level i + 1,
a function of (q_t, z_t) since q_{t-1} = q_t (z_t G_{i+1})^-1. Unrolled, the running product is
y_t = c_{k-1}(q^{k-1}_t) ... c_0(q^0_t), which the head reads from every level's state.

Between levels, one exact indicator per pair (q, z): with the match score
s(q) = (sum_j cos(phi_j - phi_j(q)) - k) / delta (0 at the state's coset, <= -1 elsewhere;
delta = 1 - cos(2 pi / e)) and the one-hot of z passed through D, a = 2 onehot + 2 s - 1/2 is
about 1.5 for the pair and <= -1/2 otherwise, so relu(a) - relu(a - 1) is 1 or exactly 0. The
sums of these indicators are the next level's one-hots, which set its angles; the state's drift
never reaches the angles beyond float32 rounding, so the cascade is exact far past training.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from ssm_bench import analytic
from ssm_bench import analytic_one_layer
from ssm_bench.config import ModelConfig
from tasks import groups
from tasks import registry


@dataclasses.dataclass
class Level:
  elements: np.ndarray  # G_i as indices of G (its stream's alphabet)
  coset: np.ndarray  # element of G -> coset index in A_i (-1 outside G_i); coset 0 = G_{i+1}
  rep: np.ndarray  # coset -> its representative (an element of G), rep[0] = identity
  chars: np.ndarray  # (k, |A_i|) characters of A_i, values in Z_e
  e: int


def levels_of(g: groups.Group, series) -> list[Level]:
  """One level per step of a normal series with Abelian quotients (derived or elementary-2)."""
  out = []
  for big, small in zip(series, series[1:]):
    coset = np.full(g.order, -1)
    rep = []
    for x in big:  # ascending: the identity (0) first, so coset 0 is G_{i+1}
      if coset[x] < 0:
        coset[g.table[x, small]] = len(rep)
        rep.append(int(x))
    rep = np.array(rep)
    quotient = coset[g.table[rep[:, None], rep[None, :]]]
    chars, e = analytic_one_layer.characters(
        groups.Group(f"{g.name}/{len(out)}", quotient.astype(np.int32)))
    chars = chars[chars.any(axis=1)]  # the trivial character carries nothing
    out.append(Level(np.asarray(big), coset, rep, chars, e))
  return out


def next_input(g: groups.Group, lv: Level, q: int, z: int) -> int:
  """w = c(q_prev) z c(q)^-1 for the coset q reached by reading z."""
  t, inv = g.table, g.inverse
  quotient_inv = lv.coset[inv[lv.rep]]  # coset -> its inverse coset
  q_prev = lv.coset[t[lv.rep[q], lv.rep[quotient_inv[lv.coset[z]]]]]
  return int(t[t[lv.rep[q_prev], z], inv[lv.rep[q]]])


def cosets(g: groups.Group, levels, y: int) -> list[int]:
  """The levels' cosets (q^0, ..., q^{k-1}) when the running product is y: q^i is the coset of
  the level's product, and K = Q c(q)^-1 is the next level's."""
  out = []
  for lv in levels:
    out.append(int(lv.coset[y]))
    y = int(g.table[y, g.inverse[lv.rep[out[-1]]]])
  assert y == 0, "the levels do not account for the element"
  return out


class Channels:
  """Consecutive blocks of the residual stream, by name."""

  def __init__(self):
    self.size, self.blocks = 0, {}

  def add(self, name, count: int) -> np.ndarray:
    self.blocks[name] = np.arange(self.size, self.size + count)
    self.size += count
    return self.blocks[name]


def _phases(lv: Level) -> np.ndarray:
  return 2 * np.pi * lv.chars / lv.e  # (k, |A_i|)


def _match_weights(lv: Level, q: int, root_n: float) -> tuple[np.ndarray, float]:
  """s(q) = w . (Re h, Im h) of the first k state coordinates + bias (h0 = 1 / sqrt(n))."""
  k, ph = lv.chars.shape[0], _phases(lv)[:, q]
  delta = 1.0 - math.cos(2 * math.pi / lv.e)
  return np.concatenate([np.cos(ph), np.sin(ph)]) * root_n / delta, -k / delta


class SimpleLayers:
  """Writes a cascade level into simple_aussm: theta = Dense(v), y = Dense(Re h, Im h) + D v.
  A plugin layer of the same form but for its angles (`examples/clock.py`) overrides `rotate`:
  the channel that carries a one-hot input turns state coordinate `coord` by `angle`."""
  # Whether the layer reads its biases from a state coordinate that never rotates and turns by
  # W u / sqrt(d) (AussmLayers): the cascade then adds that coordinate and a power-of-4 width
  CONSTANT_STATE = False

  def __init__(self, p, cfg: ModelConfig):
    self.p, self.n = p, cfg.d_state

  def rotate(self, i, channel, coord, angle):  # the one-hot `channel` turns `coord` by angle
    self.p[f"layer{i}"]["theta"]["kernel"][channel, coord] = angle

  def read(self, i, c, coord, re, im):  # output c += re Re h_coord + im Im h_coord
    kernel = self.p[f"layer{i}"]["readout"]["kernel"]
    kernel[coord, c], kernel[self.n + coord, c] = re, im

  def bias(self, i, c, value):
    self.p[f"layer{i}"]["readout"]["bias"][c] = value

  def out(self, i, src, dst, value):
    self.p[f"out{i}"]["kernel"][src, dst] += value

  def pair(self, i, a, a1, k, w, b):
    """Outputs a = 2 onehot + 2 s - 1/2 and a1 = a - 1 for the match score s = w . h + b."""
    for c, shift in ((a, 0.5), (a1, 1.5)):
      for coord in range(k):
        self.read(i, c, coord, 2 * w[coord], 2 * w[k + coord])
      self.bias(i, c, 2 * b - shift)
      self.p[f"layer{i}"]["D"][c] = 2.0  # + 2 (the stream's copy of the pair's one-hot)


GATE_ON, GATE_OFF = 32.0, -200.0  # silu(32) = 32 and silu(-200) = 0 exactly in float32


class AussmLayers(SimpleLayers):
  """The same level in a full AUSSM layer: u = 32 v, theta = W u / sqrt(d) (sqrt(d) a power of
  2 when the cascade chooses d, so theta is the angle exactly), B = 0 (the input term off), C's
  entries written in polar form, a bias read from a state coordinate that never rotates (the
  last: h0 = 1 / sqrt(n) there), the pairs as `pair` says, and the output gate silu(32) = 32
  undone in the output projection. A plugin layer of AUSSM's form with other parameters for B,
  C or a decay overrides `__init__` and `read` (examples/decaying_aussm.py)."""
  CONSTANT_STATE = True

  def __init__(self, p, cfg: ModelConfig):
    super().__init__(p, cfg)
    n, d = cfg.d_state, cfg.d_model
    self.const, self.root_d = n - 1, math.sqrt(d)
    for i in range(len(cfg.layers)):
      lay = p[f"layer{i}"]
      lay["in_u"]["kernel"][:] = GATE_ON * np.eye(d)  # u = 32 v: silu(32) = 32, silu(0) = 0
      lay["in_z"]["bias"][:] = GATE_ON
      lay["B_re"][:], lay["C_re"][:] = GATE_OFF, GATE_OFF  # softplus(-200) = 0 exactly

  def rotate(self, i, channel, coord, angle):
    self.p[f"layer{i}"]["theta_w"][channel, coord] = angle * self.root_d / GATE_ON

  def read(self, i, c, coord, re, im):  # Re(C h) = Re C Re h - Im C Im h
    value = complex(re, -im)
    if abs(value) > 0:
      lay = self.p[f"layer{i}"]
      lay["C_re"][c, coord] = math.log(math.expm1(abs(value)))
      lay["C_im"][c, coord] = np.angle(value)

  def bias(self, i, c, value):
    self.read(i, c, self.const, value * math.sqrt(self.n), 0.0)

  def out(self, i, src, dst, value):
    super().out(i, src, dst, value / GATE_ON)

  def pair(self, i, a, a1, k, w, b):
    """a = 4 onehot + 4 s - 1/2 and a1 = a - 1, computed alike but for D silu(u) = (32 onehot +
    u0) / 8 with u0 = 72 and 64 (silu is the identity there in float32): Re(C h) is the same
    float for both, and a, a1 lie in [2, 4) at a match, so a1 rounds to a - 1 exactly and the
    next level's one-hot is exactly 1 (its angle does not drift)."""
    lay = self.p[f"layer{i}"]
    for c, u0 in ((a, 72.0), (a1, 64.0)):
      for coord in range(k):
        self.read(i, c, coord, 4 * w[coord], 4 * w[k + coord])
      self.bias(i, c, 4 * b - 0.5 - 72.0 / 8)
      lay["in_u"]["bias"][c] = u0
      lay["D"][c] = 1.0 / 8


def _power_of_4_at_least(n: int) -> int:
  return 4 ** math.ceil(math.log(max(n, 1), 4))


@functools.lru_cache(maxsize=64)
def series_levels(task_name: str, series: str) -> tuple:
  """(group, levels) of the task's group along its "derived" or "elementary2" series (seconds
  for a group of order 5040: asked again by the size limit and the build)."""
  g = registry.get_task(task_name).group
  return g, levels_of(g, getattr(g, f"{series}_series"))


def derived_exponents(task_name: str) -> list[int]:
  """The exponents of the Abelian quotients along the task's group's derived series, top first
  (the orders of the roots of unity a unit-modulus cascade's angles need)."""
  return [lv.e for lv in series_levels(task_name, "derived")[1]]


def _solvable_plan(task_name: str, d_model: int, d_state: int, layer: str, layer_kwargs: str = "",
                   full: bool = False):
  """(group, levels, pairs, channels, ModelConfig) of the solvable cascade; nothing built.
  `full`: the writer's `CONSTANT_STATE`."""
  g = registry.get_task(task_name).group
  if g is None or not g.is_solvable:
    raise analytic.NoConstruction(f"{task_name} is not a solvable group")
  g, levels = series_levels(task_name, "derived")
  depth = len(levels)
  n = max([d_state, 1] + [lv.chars.shape[0] + full for lv in levels])  # + the constant
  pairs = [[(q, int(z)) for z in lv.elements for q in range(len(lv.rep))] if i < depth - 1
           else [] for i, lv in enumerate(levels)]
  ch = Channels()
  for i, lv in enumerate(levels):
    ch.add(("onehot", i), len(lv.elements))
    ch.add(("pair", i), 2 * len(pairs[i]))  # (a, a - 1) per pair, each fed the pair's one-hot
    ch.add(("feat", i), 4 * lv.chars.shape[0])  # relu(+-Re h_j), relu(+-Im h_j)
  width = max(d_model, _power_of_4_at_least(ch.size) if full else ch.size)
  cfg = ModelConfig(layers=(layer,) * depth, layer_kwargs=layer_kwargs, vocab_size=g.order,
                    num_classes=g.order, d_model=width, d_state=n, norm="none",
                    activation="relu", initial_state="ones", conv_kernel=0)
  return g, levels, pairs, ch, cfg


_WRITERS = {"simple_aussm": SimpleLayers, "aussm": AussmLayers}


def solvable(task_name: str, d_model: int = 0, d_state: int = 0, layer: str = "simple_aussm",
             writer=None, layer_kwargs: str = ""):
  """(ModelConfig, params): derived-length-many unit-modulus layers tracking the group: the
  simple_aussm or full aussm, or a plugin's layer of simple_aussm's form with `writer(params,
  cfg)`, a `SimpleLayers` that writes its angles, or an `AussmLayers` (`layer_kwargs`: the
  layers' own)."""
  writer = writer or _WRITERS.get(layer)
  if writer is None:
    raise ValueError(f"the solvable cascade is built from {' or '.join(_WRITERS)}, or a layer "
                     f"with a writer of its own, not {layer!r}")
  g, levels, pairs, ch, cfg = _solvable_plan(task_name, d_model, d_state, layer, layer_kwargs,
                                             writer.CONSTANT_STATE)
  n = cfg.d_state
  root_n = math.sqrt(n)
  p = analytic.zeros_like_init(cfg)["params"]
  writer = writer(p, cfg)

  def one_hot_targets(i: int, z: int) -> list[int]:
    """The channels that carry 'level i reads z': its one-hot and its pairs' copies."""
    pos = {int(x): j for j, x in enumerate(levels[i].elements)}
    out = [ch.blocks[("onehot", i)][pos[z]]]
    for j, (_, pz) in enumerate(pairs[i]):
      if pz == z:
        out += list(ch.blocks[("pair", i)][2 * j:2 * j + 2])
    return out

  for x in range(g.order):
    p["embed"]["embedding"][x, one_hot_targets(0, x)] = 1.0
  for i, lv in enumerate(levels):
    k, ph = lv.chars.shape[0], _phases(lv)
    for j, z in enumerate(lv.elements):
      for coord in range(k):
        writer.rotate(i, ch.blocks[("onehot", i)][j], coord, ph[coord, lv.coset[z]])
    for j, (q, z) in enumerate(pairs[i]):
      w, b = _match_weights(lv, q, root_n)
      a, a1 = ch.blocks[("pair", i)][2 * j:2 * j + 2]
      writer.pair(i, a, a1, k, w, b)  # a = 2 onehot + 2 s - 1/2 (or twice that), then a - 1
      for target in one_hot_targets(i + 1, next_input(g, lv, q, z)):
        writer.out(i, a, target, 1.0)
        writer.out(i, a1, target, -1.0)
    feats = ch.blocks[("feat", i)]
    for j in range(k):
      for f, (re, im) in zip(feats[4 * j:4 * j + 4], ((1, 0), (-1, 0), (0, 1), (0, -1))):
        writer.read(i, f, j, re * root_n, im * root_n)  # relu(+-sqrt(n) Re/Im h_j)
        writer.out(i, f, f, 1.0)
  # head: one hidden unit per element y = c_{k-1}(q^{k-1}) ... c_0(q^0), 1/2 + sum of the
  # levels' match scores: 1/2 at the state's element, below 0 at every other
  hidden, head = p["head_hidden"], p["head_out"]["kernel"]
  for y in range(g.order):
    hidden["bias"][y] = 0.5
    for i, (lv, q) in enumerate(zip(levels, cosets(g, levels, y))):
      w, b = _match_weights(lv, q, 1.0)  # the features already carry sqrt(n)
      k, feats = lv.chars.shape[0], ch.blocks[("feat", i)]
      for j in range(k):
        hidden["kernel"][feats[4 * j:4 * j + 4], y] = (w[j], -w[j], w[k + j], -w[k + j])
      hidden["bias"][y] += b
    head[y, y] = 1.0
  return cfg, analytic.finish({"params": p})


def _solvable_non_abelian(task_name: str) -> bool:
  g = analytic.task_group(task_name)
  return g is not None and g.is_solvable and not g.is_abelian


def _solvable_group(task_name: str) -> bool:
  """A solvable group's uniform stream, Abelian ones too (parity and modcount, whose streams
  are not a group's tokens, and the trivial group, with no level to build, are not)."""
  try:
    g = groups.get_group(task_name)
  except groups.GroupError:
    return False
  return g.is_solvable and g.order > 1


def sized(applies, plan) -> dict:
  """A cascade's `applies` and `limit`: it holds the tasks `applies` accepts, and is built for
  those within analytic.MAX_PARAMS. `plan(task)` is the ModelConfig it would build at its own
  width: its channels grow as |G / G'| |G| and its kernels as their square (S4xC30's
  simple_aussm cascade: 87,228 channels), so it is sized from its plan before `launch.info`
  lists it."""
  limit = functools.lru_cache(maxsize=256)(lambda task: analytic.oversize(plan(task)))
  return {"applies": lambda task: applies(task) and not limit(task),
          "limit": lambda task: limit(task) if applies(task) else ""}


def _plan_of(layer: str, writer, kwargs=lambda task: ""):
  return lambda task: _solvable_plan(task, 0, 0, layer, kwargs(task), writer.CONSTANT_STATE)[-1]


def cascade_construction(description: str, layer: str, writer, kwargs=lambda task: "",
                         **fields) -> analytic.Construction:
  """A plugin layer's solvable cascade as a `Construction` for its registry record: every
  solvable group's uniform stream (order > 1), in derived-length-many `layer`s written by
  `writer(params, cfg)` at `kwargs(task)` (`solvable`), sized as the built-in cascades are."""
  return analytic.Construction(
      description, build=lambda task, dm, ds: solvable(task, dm, ds, layer, writer, kwargs(task)),
      kwargs=kwargs, **sized(_solvable_group, _plan_of(layer, writer, kwargs)), **fields)


SOLVABLE = analytic.Construction(
    "any solvable group in derived-length-many layers: each level rotates by the characters of "
    "its Abelian quotient and passes the rest of the product down (paper 000, Theorem 4.2)",
    build=solvable, **sized(_solvable_non_abelian, _plan_of("simple_aussm", SimpleLayers)))
SOLVABLE_AUSSM = analytic.Construction(
    "any solvable group in derived-length-many full AUSSM layers, input term off: the same "
    "cascade, its biases read from a state coordinate that never rotates (paper 000, "
    "Theorem 4.2; an Abelian group in one layer)",
    build=lambda task, dm, ds: solvable(task, dm, ds, layer="aussm"),
    **sized(_solvable_group, _plan_of("aussm", AussmLayers)))
