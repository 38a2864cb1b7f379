"""Cyclic and dihedral groups in two DeltaNet layers, one reflection per token: weights set by
hand in the module training uses, the proof of the householder class's two-layer claim (Siems
et al. 2025, DeltaProduct, Sec. 4, prove it for the dihedral groups; their subgroups, the cyclic
groups among them, follow by leaving tokens out).

A group with a faithful orthogonal representation rho in the plane (r <= 2 dimensions) has
rotations, which are two reflections each, and reflections. Let c_t be the parity of the number
of tokens up to t that are rotations other than the identity, and F a fixed reflection. The
second layer applies A_t = F^{c_t} rho(x_t)^T F^{c_{t-1}}: for a rotation c flips, and a rotation
times a reflection is a reflection; for a reflection c stays, and F rho F is a reflection; the
identity stays the identity. The product telescopes: A_t ... A_1 = F^{c_t} rho(y_t)^T for the
running product y_t = x_1 ... x_t, and the query F^{c_t} u reads w = rho(y_t) u, decoded as in
`analytic_deltaproduct` (the head scores <rho(g) u, w>, largest exactly at g = y_t).

The first layer counts c_t: key e_0, beta = 2 on the counted tokens (a sign flip) and 0
elsewhere, and reads alpha_x sigma_t with sigma_t = (-1)^{c_t} and alpha_x = x + 1. These 2 |G|
integers are distinct, and hat functions of them (relu(s - i + 1) - 2 relu(s - i) +
relu(s - i - 1), integers throughout) give the second layer one-hot inputs for (x_t, c_t),
exactly 0 or 1, from which its key and query are read.
"""
from __future__ import annotations

import numpy as np

from ssm_bench import analytic
from ssm_bench import analytic_deltaproduct
from ssm_bench import reflections
from ssm_bench.config import ModelConfig

PLANE = 2  # the representation's dimensions: the second layer's keys must be this wide


def plane_representation(g) -> np.ndarray | None:
  """(order, r, r) of a faithful orthogonal representation of g in r <= 2 dimensions (the
  groups that have one: the cyclic and dihedral groups), or None."""
  if g.order > reflections.MAX_ORDER:
    return None
  n_h, irreps = reflections.witness(g, PLANE)
  return None if n_h is None or not irreps else reflections.representation(g, irreps)


def _transitions(rho: np.ndarray):
  """(F, counted, A): the fixed reflection, which tokens flip c, and A[x, c] the second layer's
  transition for token x when c_t = c (c_{t-1} = c xor counted[x])."""
  order, r = rho.shape[0], rho.shape[1]
  F = np.eye(r)
  F[-1, -1] = -1.0
  M = np.transpose(rho, (0, 2, 1))  # token x applies rho(x)^T
  counted = np.array([np.linalg.det(m) > 0 and not np.allclose(m, np.eye(r)) for m in M])
  power = lambda c: np.linalg.matrix_power(F, int(c))
  A = np.array([[power(c) @ M[x] @ power(c ^ counted[x]) for c in (0, 1)]
                for x in range(order)])
  return F, counted, A


def _plane_parts(task_name: str):
  """(rho, u, F, counted, keys) of the group's plane construction: its representation, the
  query that separates its points, the fixed reflection, which tokens flip c, and keys[x][c]
  the one reflection (or none: the identity) of token x when c_t = c."""
  g = analytic.task_group(task_name)
  rho = None if g is None else plane_representation(g)
  if rho is None:
    raise analytic.NoConstruction(f"{task_name}: no faithful representation in the plane")
  u, margin = analytic_deltaproduct.query(rho)
  if margin < 1e-3:
    raise analytic.NoConstruction(f"{task_name}: no query separates the group's points")
  F, counted, A = _transitions(rho)
  keys = [[reflections.reflection_keys(a) for a in pair] for pair in A]
  if max(len(k) for pair in keys for k in pair) > 1:  # a plane's orthogonal maps: never
    raise analytic.NoConstruction(f"{task_name}: a transition needs two reflections")
  return rho, u, F, counted, keys


def _reflecting_layer(p, top: int, parts, row, pairs: int):
  """The second layer (DeltaNet, layer `top`) and the decoder: token x with c_t = c reads residual
  channel row(x, c), exactly 1 there and 0 in every other such channel, and applies its one
  reflection (key, beta = 2) or none (beta 0); the query F^c u reads rho(y_t) u from the state's
  rows 0..r-1, written out as the pairs (w, -w) from residual channel `pairs` on."""
  rho, u, F, _, keys = parts
  layer, (order, r), d = p[f"layer{top}"], rho.shape[:2], p["embed"]["embedding"].shape[1]
  for x in range(order):
    for c in (0, 1):
      layer["k"]["kernel"][row(x, c), :r] = keys[x][c][0] if keys[x][c] else np.eye(r)[0]
      layer["beta"]["kernel"][row(x, c), 0] = 0.0 if keys[x][c] else -200.0
      if c:
        layer["q"]["kernel"][row(x, c), :r] = F @ u - u
  layer["beta"]["bias"][0] = 100.0
  layer["q"]["bias"][:r] = u
  layer["h0"][:, d - 1] = 1.0
  layer["h0"][:r] = np.eye(d)[:r]
  for i in range(r):  # w as the pair (w, -w), to cross the ReLUs
    layer["o"]["kernel"][i, pairs + i] = 1.0
    layer["o"]["kernel"][i, pairs + r + i] = -1.0
  layer["D"][:] = 0.0
  analytic_deltaproduct.decode(p, f"out{top}", rho, u, pairs)


def deltanet_plane(task_name: str, d_model: int = 0, d_state: int = 0):
  """(ModelConfig, params) of two DeltaNet layers tracking the group `task_name`."""
  parts = _plane_parts(task_name)
  rho, _, _, counted, _ = parts
  order, r = rho.shape[0], rho.shape[1]
  # residual channels: the counted flag, alpha, the one-hots of s = alpha sigma, the pairs
  FLAG, ALPHA, ONEHOT = 0, 1, 2
  values = [s for s in range(-order, order + 1) if s]  # alpha sigma, 2 |G| integers
  pairs = ONEHOT + len(values)
  knots = list(range(-order - 1, order + 2))  # hinges relu(s - t), first layer's outputs
  d = max(d_model, pairs + 2 * r, len(knots))
  cfg = ModelConfig(layers=("deltanet", "deltanet"), vocab_size=order, num_classes=order,
                    d_model=d, d_state=max(d_state, r), norm="none", activation="relu",
                    initial_state="learned", conv_kernel=0)
  p = analytic.zeros_like_init(cfg)["params"]
  emb, first = p["embed"]["embedding"], p["layer0"]
  emb[:, FLAG] = counted
  emb[:, ALPHA] = np.arange(1, order + 1)
  # A token that applies the identity gets beta = 2 sigmoid(-100), which leaves every state
  # entry as it was in float32, and a unit key all the same: a zero key would be exact too, but
  # the key's normalization has no gradient there (NaN), and any noise on it makes a full
  # reflection of a random key (near_solution trains from these weights).
  # first layer: key e_0, beta = 2 on counted tokens (state row 0 = e_0 flips there), 0
  # elsewhere; read with q = alpha e_0: s = alpha sigma in value 0, then the hinges
  first["k"]["bias"][0] = 1.0
  first["beta"]["kernel"][FLAG, 0] = 200.0  # 2 sigmoid(100) = 2 exactly in float32
  first["beta"]["bias"][0] = -100.0
  first["q"]["kernel"][ALPHA, 0] = 1.0
  # states' rows no key reaches hold a unit vector in a value nothing reads (a zero row would
  # be exact too, but the learned state's row normalization has no gradient there)
  first["h0"][:, d - 1] = 1.0
  first["h0"][0] = np.eye(d)[0]
  for j, t in enumerate(knots):
    first["o"]["kernel"][0, j] = 1.0
    first["o"]["bias"][j] = -t
  hinge = {t: j for j, t in enumerate(knots)}
  for i, s in enumerate(values):  # the hat at s: 1 there, 0 at every other integer
    for t, w in ((s - 1, 1.0), (s, -2.0), (s + 1, 1.0)):
      p["out0"]["kernel"][hinge[t], ONEHOT + i] = w
  first["D"][:] = 0.0
  # second layer: the key and the query of (x, c), from the one-hot of s = (x + 1) (-1)^c
  _reflecting_layer(p, 1, parts,
                    lambda x, c: ONEHOT + values.index((x + 1) * (-1 if c else 1)), pairs)
  return cfg, analytic.finish({"params": p})


def signed_plane(task_name: str, d_model: int = 0, d_state: int = 0):
  """(ModelConfig, params) of a negmamba layer under a DeltaNet layer tracking the group
  `task_name`: the negmamba layer counts c_t in the first DeltaNet layer's place, so one
  reflection per token above any stack that tracks C2 tracks the plane's groups (the
  householder class's `above` rule).

  Its state's coordinate 0 flips sign on the counted tokens, a = 2 exp(Delta lam) - 1 with
  Delta = softplus(200) = 200 there (a = -1) and softplus(-100) elsewhere (a = 1), lam = -1,
  B = 0, so h_t = (-1)^{c_t} h0. Channel (x, c) starts from h0 = (+-1, 0), + where c = 0, reads
  C = (1/2, 0) and adds D u = [x_t = x] - 1/2: its output +-(-1)^{c_t} / 2 + [x_t = x] - 1/2 is
  1 exactly where x_t = x and c_t = c, and 0 or -1 elsewhere, gated by silu(32) = 32. The
  ReLU between the layers and out0's 1/32 leave the one-hot of (x_t, c_t) in the residual, from
  which the DeltaNet layer reads its key and query as in `deltanet_plane`."""
  parts = _plane_parts(task_name)
  rho, _, _, counted, _ = parts
  order, r = rho.shape[0], rho.shape[1]
  CONST, FLAG, TOKEN = 0, 1, 2  # residual channels: 1, the counted flag, the token's one-hot
  ONEHOT = TOKEN + order  # then the one-hots of (x, c), then the pairs
  row = lambda x, c: ONEHOT + 2 * x + c
  pairs = ONEHOT + 2 * order
  d = max(d_model, pairs + 2 * r + 1)
  cfg = ModelConfig(layers=("negmamba", "deltanet"), vocab_size=order, num_classes=order,
                    d_model=d, d_state=max(d_state, r, 2), norm="none", activation="relu",
                    initial_state="learned", conv_kernel=0)  # negmamba's 2 states: C reads 0
  p = analytic.zeros_like_init(cfg)["params"]
  emb, first = p["embed"]["embedding"], p["layer0"]
  emb[:, CONST] = 1.0
  emb[:, FLAG] = counted
  emb[:, TOKEN:TOKEN + order] = np.eye(order)
  first["in_u"]["kernel"][FLAG, FLAG] = 1.0  # u: the flag, for Delta
  first["dt_down"]["kernel"][FLAG, 0] = 1.0
  first["dt_up"]["kernel"][0, :] = 300.0
  first["dt_up"]["bias"][:] = -100.0  # Delta = softplus(200) = 200 or softplus(-100) ~ 0
  first["A_log"][:] = 0.0  # lam = -1: exp(-200) = 0 in float32, a = -1
  first["in_u"]["bias"][CONST] = 1.0
  first["C"]["kernel"][CONST, 0] = 0.5  # C = (1/2, 0) at every step
  # states' rows that nothing reads hold a unit vector in a state C does not read (a zero row
  # would be exact too, but the learned state's row normalization has no gradient there)
  first["h0"][:, 1] = 1.0
  first["D"][:] = 0.0
  for x in range(order):
    for c in (0, 1):
      j = row(x, c)
      first["in_u"]["kernel"][TOKEN + x, j] = 1.0
      first["in_u"]["bias"][j] = -0.5
      first["h0"][j] = np.eye(cfg.d_state)[0] * (-1.0 if c else 1.0)
      first["D"][j] = 1.0
      first["in_z"]["bias"][j] = 32.0  # silu(32) = 32 exactly in float32
      p["out0"]["kernel"][j, j] = 1.0 / 32.0
  _reflecting_layer(p, 1, parts, row, pairs)
  return cfg, analytic.finish({"params": p})


def _built(task_name: str) -> bool:
  g = analytic.task_group(task_name)
  return g is not None and g.order > 1 and plane_representation(g) is not None


PLANE_GROUPS = analytic.Construction(
    "a cyclic or dihedral group in two layers, one reflection per token: the first counts the "
    "rotations mod 2, the second reflects in the plane in a frame that flips with that count "
    "(Siems et al. 2025, Sec. 4)", _built, deltanet_plane)
SIGNED_PLANE = analytic.Construction(
    "a cyclic or dihedral group in a negmamba layer under one DeltaNet layer, one reflection "
    "per token: the negmamba layer counts the rotations mod 2 in place of DeltaNet's first "
    "layer (the householder class's above rule)",
    _built, signed_plane, fallback=True, below=("negmamba",))
