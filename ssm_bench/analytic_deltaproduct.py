"""Any finite group (up to reflections.MAX_ORDER) in one DeltaProduct layer with n_h = the
registered default where its reflection length (reflections.py) fits in it, else that length:
weights set by hand in the module training uses, the proof of the householder class's claim.

Token x applies rho(x)^T, a product of at most n_h reflections (beta = 2, unit keys set in its
embedding; an unused factor gets beta = 0 from a gate channel, the identity). The values
v_j = C^T k_j make every step the affine map S <- H (S - C) + C, so S_t - C = rho(y_t)^T (S_0 - C)
for the running product y_t = x_1 ... x_t. With S_0 - C = [I 0] and a constant query u, the
layer reads w = rho(y_t) u; the head scores each element g by <rho(g) u, w>, which is largest
(|u|^2) exactly at g = y_t. Signed features cross the ReLUs as the pair (w, -w).
"""
from __future__ import annotations

import json

import numpy as np

from ssm_bench import analytic
from ssm_bench import reflections
from ssm_bench import registry as layer_registry
from ssm_bench.config import ModelConfig
from tasks import registry


def query(rho: np.ndarray) -> tuple[np.ndarray, float]:
  """A unit query whose orbit points are furthest apart (of a few fixed random draws): the
  decoding margin 1 - max_{g != 1} <rho(g) u, u>."""
  rng = np.random.default_rng(0)
  best, margin = None, -1.0
  for _ in range(64):
    u = rng.standard_normal(rho.shape[1])
    u /= np.linalg.norm(u)
    m = 1.0 - float(np.max(np.einsum("gij,i,j->g", rho[1:], u, u), initial=-1.0))
    if m > margin:
      best, margin = u, m
  return best, margin


def deltaproduct(task_name: str, d_model: int = 0, d_state: int = 0):
  """(ModelConfig, params) of one DeltaProduct layer tracking the group `task_name`."""
  g = registry.get_task(task_name).group
  # the narrowest representation at the least n_h: the keys the card says suffice
  n_h, irreps = reflections.witness(g, reflections.reflection_width(g))
  rho = reflections.representation(g, irreps)  # (order, r, r)
  r, order = rho.shape[1], g.order
  u, margin = query(rho)
  if margin < 1e-3:
    raise analytic.NoConstruction(f"{task_name}: no query separates the group's points")
  keys = [reflections.reflection_keys(m.T) for m in rho]  # rho(x)^T = H_1 ... H_k
  n = max(d_state, r)
  n_h = _n_h(n_h)
  # embedding: n_h key blocks of n channels, the read-out pairs (w, -w), 2 r channels, then
  # one gate per factor: 1 where the token leaves that factor unused
  feats = n_h * n
  gates = feats + 2 * r
  d = max(d_model, gates + n_h)
  cfg = ModelConfig(layers=("deltaproduct",), layer_kwargs=_kwargs(n_h), vocab_size=order,
                    num_classes=order, d_model=d, d_state=n, norm="none", activation="relu",
                    initial_state="ones", conv_kernel=0)
  p = analytic.zeros_like_init(cfg)["params"]
  emb, lay = p["embed"]["embedding"], p["layer0"]
  for x, ks in enumerate(keys):
    # the layer applies factor 1 first: A = F_{n_h} ... F_1 = H_1 ... H_k, so F_j = H_{k + 1 - j}
    for j, k in enumerate(reversed(ks)):
      emb[x, j * n:j * n + r] = k
    # an unused factor: beta = 2 sigmoid(-100), which leaves the state as it was in float32,
    # with a unit key (a zero key is exact too, but its normalization has a NaN gradient and
    # noise on it makes a full reflection: near_solution trains from these weights)
    for j in range(len(ks), n_h):
      emb[x, j * n] = 1.0
      emb[x, gates + j] = 1.0
  s0 = np.full((n, d), 1.0 / np.sqrt(d))  # initial_state "ones": rows of norm 1 over d values
  offset = s0.copy()
  offset[np.arange(r), np.arange(r)] -= 1.0  # C = S_0 - [I 0]
  for j in range(n_h):
    block = slice(j * n, (j + 1) * n)
    lay["k"]["kernel"][block, j * n:(j + 1) * n] = np.eye(n)
    lay["v"]["kernel"][block, j * d:(j + 1) * d] = offset  # v_j = C^T k_j
  lay["beta"]["bias"][:] = 100.0  # beta = 2 sigmoid(100) = 2 exactly in float32
  lay["beta"]["kernel"][np.arange(gates, gates + n_h), np.arange(n_h)] = -200.0
  lay["q"]["bias"][:r] = u
  # z = S_t^T u = [I 0]^T w + C^T u: the first r values minus the constant are w
  const = offset.T[:r, :r] @ u
  for i in range(r):
    lay["o"]["kernel"][i, feats + i] = 1.0
    lay["o"]["kernel"][i, feats + r + i] = -1.0
    lay["o"]["bias"][feats + i] = -const[i]
    lay["o"]["bias"][feats + r + i] = const[i]
  lay["D"][:] = 0.0
  decode(p, "out0", rho, u, feats)
  return cfg, analytic.finish({"params": p})


def decode(p, out: str, rho: np.ndarray, u: np.ndarray, at: int) -> None:
  """The head for w = rho(y_t) u held as the pair (w, -w) in channels at..at + 2r of the last
  layer's output: `out` adds the pair to the residual stream, the head's ReLU passes it, and
  the logit of g is <rho(g) u, w>, largest exactly at g = y_t."""
  r = rho.shape[1]
  pair = np.arange(at, at + 2 * r)
  p[out]["kernel"][pair, pair] = 1.0
  p["head_hidden"]["kernel"][pair, pair] = 1.0
  points = np.einsum("gij,j->gi", rho, u)  # rho(g) u
  p["head_out"]["kernel"][at:at + r, :] = points.T
  p["head_out"]["kernel"][at + r:at + 2 * r, :] = -points.T


def _default_n_h() -> int:
  return layer_registry.get("deltaproduct").kwargs["n_h"]


def _n_h(length: int) -> int:
  """The n_h a group of this reflection length is built at: the registered default where the
  length fits in it (unused factors are the identity), so a card at the defaults counts C2 as
  held, as the clock builds at its default m where that suffices; else the length."""
  return max(length, _default_n_h())


def _kwargs(n_h: int) -> str:
  return "" if n_h == _default_n_h() else json.dumps({"n_h": n_h})


def layer_kwargs(task_name: str) -> str:
  """The kwargs `deltaproduct` builds the task's layer at (`_n_h` of its reflection length)."""
  g = registry.get_task(task_name).group
  return _kwargs(_n_h(reflections.witness(g, reflections.reflection_width(g))[0]))


def _built(task_name: str) -> bool:
  g = analytic.task_group(task_name)
  return g is not None and 1 < g.order <= reflections.MAX_ORDER  # C1: no reflection to build


def _limit(task_name: str) -> str:
  """Above MAX_ORDER the representation is never searched for (a 5040 x 5040 eigenproblem for
  S7 ran for minutes): no construction, said so, rather than a hang."""
  g = analytic.task_group(task_name)
  return (f"the reflection length is not computed above order {reflections.MAX_ORDER}, and "
          f"{task_name} has order {g.order}" if g is not None and g.order > reflections.MAX_ORDER
          else "")


ANY_GROUP = analytic.Construction(
    "any finite group in one layer, n_h = its reflection length: each token a product of "
    "reflections in a faithful orthogonal representation (Cartan-Dieudonne; Grazzi et al. "
    f"2025); built up to order {reflections.MAX_ORDER}", _built, deltaproduct, limit=_limit,
    kwargs=layer_kwargs)
