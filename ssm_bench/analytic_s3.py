"""S3 by hand in two layers (paper 000, Sec. 5.3 and App. B): layer 1 tracks the sign of the
permutation, layer 2 rotates by +-2 pi / 3 in the direction layer 1's current state gives, and
the head decodes (sign, rotation) into the element (the paper's Table 4). Two forms: simple_aussm
layers, and the same cascade from two full AUSSM layers with the input term off (the network
paper 000's Sec. 6 starts near). analytic_cascade.py builds any solvable group the general way.
"""
from __future__ import annotations

import math

import jax
import numpy as np

from ssm_bench import analytic
from ssm_bench.config import ModelConfig
from tasks import groups


def _s3_encoding(g: groups.Group):
  """Elements as s^a r^b (inputs) and r^B s^A (states) for an order-3 r and order-2 s."""
  t = g.table
  order_of = lambda x: next(k for k in range(1, 7) if _power(t, x, k) == 0)
  r = next(x for x in range(6) if order_of(x) == 3)
  s = next(x for x in range(6) if order_of(x) == 2)
  enc_in = {int(t[_power(t, s, a), _power(t, r, b)]): (a, b) for a in (0, 1) for b in (0, 1, 2)}
  state_of = {(A, B): int(t[_power(t, r, B), _power(t, s, A)]) for A in (0, 1) for B in (0, 1, 2)}
  return enc_in, state_of


def _power(t, x, k):
  y = 0
  for _ in range(k):
    y = t[y, x]
  return y


def s3(d_model: int = 0, d_state: int = 4):
  """Two simple_aussm layers: sign, then a rotation whose direction depends on the sign."""
  g = groups.get_group("S3")
  enc_in, state_of = _s3_encoding(g)
  n = d_state
  cfg = ModelConfig(layers=("simple_aussm", "simple_aussm"), vocab_size=6, num_classes=6,
                    d_model=max(d_model, 17), d_state=n, norm="none", activation="relu",
                    initial_state="ones", conv_kernel=0)
  p = analytic.zeros_like_init(cfg)["params"]
  emb = p["embed"]["embedding"]
  for x, (a, b) in enc_in.items():
    emb[x, 0] = np.pi * a  # layer 1 angle: a flip on every transposition
    emb[x, 1:3] = float(b == 1)  # each one-hot twice: once per sign it is paired with
    emb[x, 3:5] = float(b == 2)
  root_n = math.sqrt(n)  # h0 = 1/sqrt(n): sigma = sqrt(n) Re h = +-1
  l1, l2 = p["layer0"], p["layer1"]
  l1["theta"]["kernel"][0, 0] = 1.0
  l1["D"][1:5] = 1.0
  # y_c = onehot + s sigma - 1 (ReLU: an exact indicator of (b, sign)); y5, y6 = +-sigma
  for c, s in ((1, 1), (2, -1), (3, 1), (4, -1), (5, 1), (6, -1)):
    l1["readout"]["kernel"][0, c] = s * root_n
    l1["readout"]["bias"][c] = -1.0 if c <= 4 else 0.0
  for c in range(1, 7):
    p["out0"]["kernel"][c, c + 6] = 1.0  # indicators -> channels 7..12
  # layer 2: theta = 2 pi / 3 * (I[b=1,+] - I[b=1,-] + 2 I[b=2,+] - 2 I[b=2,-])
  for c, w in ((7, 1), (8, -1), (9, 2), (10, -2)):
    l2["theta"]["kernel"][c, 0] = 2 * np.pi / 3 * w
  for c, (part, s) in zip(range(13, 17), [(0, 1), (0, -1), (1, 1), (1, -1)]):
    l2["readout"]["kernel"][part * n, c] = s * root_n
    p["out1"]["kernel"][c, c] = 1.0
  _s3_head(p, state_of)
  return cfg, analytic.finish({"params": p})


def _s3_head(p, state_of):
  """Decode (relu(+-sigma), relu(+-cos), relu(+-sin)) in channels 11..16 into the element."""
  for c in range(11, 17):
    p["head_hidden"]["kernel"][c, c] = 1.0
  for (A, B), elem in state_of.items():
    sign = 1.0 if A == 0 else -1.0
    ang = 2 * np.pi * B / 3
    head = p["head_out"]["kernel"]
    head[11, elem], head[12, elem] = 2 * sign, -2 * sign
    head[13, elem], head[14, elem] = np.cos(ang), -np.cos(ang)
    head[15, elem], head[16, elem] = np.sin(ang), -np.sin(ang)


_GATE = 20.0  # AUSSM's output gate silu(z) with z = 20: exactly 20.0 in float32
_OFF = -200.0  # softplus(-200) underflows to exactly 0: a polar parameter switched off


def _polar(lay, name, d, n, value, phase):
  """Set one entry of an AUSSM polar parameter softplus(re) exp(i im) to `value` exp(i phase)."""
  lay[f"{name}_re"][d, n] = math.log(math.expm1(value))
  lay[f"{name}_im"][d, n] = phase


def s3_aussm(d_model: int = 0, d_state: int = 4):
  """The S3 cascade from two full AUSSM layers (paper 000, Sec. 6 initialises AUSSM near it).

  B = 0 (the input term off), so each layer rotates h0 by theta_t = W u_t / sqrt(d) + b, shared
  over channels; state coordinate 0 of layer 1 never rotates and its readout is the constant -1
  that simple_aussm's readout bias gives; the one-hots pass through D silu(u) with
  D = 1 / silu(1). Every layer output carries the gate's factor 20, undone in out0 / out1.
  """
  g = groups.get_group("S3")
  enc_in, state_of = _s3_encoding(g)
  n = max(d_state, 2)
  cfg = ModelConfig(layers=("aussm", "aussm"), vocab_size=6, num_classes=6,
                    d_model=max(d_model, 17), d_state=n, norm="none", activation="relu",
                    initial_state="ones", conv_kernel=0)
  p = analytic.zeros_like_init(cfg)["params"]
  d, root_n, root_d = cfg.d_model, math.sqrt(n), math.sqrt(cfg.d_model)
  emb = p["embed"]["embedding"]
  for x, (a, b) in enc_in.items():
    emb[x, 0] = np.pi * a
    emb[x, 1:3] = float(b == 1)
    emb[x, 3:5] = float(b == 2)
  l1, l2 = p["layer0"], p["layer1"]
  for lay in (l1, l2):
    lay["B_re"][:], lay["C_re"][:] = _OFF, _OFF
    lay["in_z"]["bias"][:] = 20.0
  # layer 1: u = v; coordinate 1 rotates by pi a (the sign), coordinate 0 stays at h0
  l1["in_u"]["kernel"][:] = np.eye(d)
  l1["theta_w"][0, 1] = root_d
  l1["D"][1:5] = 1.0 / float(jax.nn.silu(1.0))
  for c, s in ((1, 1), (2, -1), (3, 1), (4, -1), (5, 1), (6, -1)):
    _polar(l1, "C", c, 1, root_n, 0.0 if s > 0 else np.pi)  # s * sigma
    if c <= 4:
      _polar(l1, "C", c, 0, root_n, np.pi)  # the constant -1
  for c in range(1, 7):
    p["out0"]["kernel"][c, c + 6] = 1.0 / _GATE
  # layer 2: u_0 = 2 pi / 3 (I[b=1,+] - I[b=1,-] + 2 I[b=2,+] - 2 I[b=2,-]) rotates coordinate 0
  for c, w in ((7, 1), (8, -1), (9, 2), (10, -2)):
    l2["in_u"]["kernel"][c, 0] = 2 * np.pi / 3 * w
  l2["theta_w"][0, 0] = root_d
  for c, phase in zip(range(13, 17), (0.0, np.pi, -np.pi / 2, np.pi / 2)):  # cos, -cos, sin, -sin
    _polar(l2, "C", c, 0, root_n, phase)
    p["out1"]["kernel"][c, c] = 1.0 / _GATE
  _s3_head(p, state_of)
  return cfg, analytic.finish({"params": p})


S3_CASCADE = analytic.Construction(
    "S3 in two layers: the sign, then a +-2pi/3 rotation (paper 000, Sec. 5.3, App. B)",
    lambda task: task in ("S3", "D3"), lambda task, dm, ds: s3(dm, max(ds, 4)))
S3_AUSSM = analytic.Construction(
    "S3 in two full AUSSM layers, input term off (paper 000, Sec. 6)",
    lambda task: task in ("S3", "D3"), lambda task, dm, ds: s3_aussm(dm, max(ds, 4)))
