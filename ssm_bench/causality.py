"""Check that a network is causal: its output at position t depends on the tokens up to t only.

The suite's measurements rest on it. One-pass evaluation reads the accuracy at every length from
one forward pass at the longest length, and training at the curriculum's length
(`length_buckets`) computes a prefix's loss from a cut batch: with a layer that reads ahead (a
bidirectional scan, a centred conv, attention without its mask) both would measure something
else, and the theory's verdicts are about layers that read a stream in order.

The check: row i of a batch has its tokens changed from a cut c_i on (the cuts spread over the
sequence), and the logits before c_i must not change. It runs on the forward program the
declaration check compiles (`declaration.forward`), so a summary pays two small forward passes
and no compilation. A plugin's network is checked at its initialisation before any run directory
exists (`require`; the built-in layers are checked by the tests), and every run's trained weights
in its summary (`causal`), since a layer can read ahead through weights that start at zero.
"""
from __future__ import annotations

import jax
import numpy as np

from ssm_bench import declaration
from ssm_bench import registry

# a change this small relative to the logits' scale is rounding, not a dependence; a causal
# network computes a prefix's logits with the same operations on the same values (0 in practice)
RTOL = 1e-5


def cuts(batch: int, length: int) -> np.ndarray:
  """Row i's first changed position: spread from 1 to length - 1 (one row: the middle)."""
  if batch == 1 or length < 3:
    return np.full(batch, max(1, length // 2))
  return np.rint(1 + np.arange(batch) * (length - 2) / (batch - 1)).astype(int)


def perturbed(tokens, vocab_size: int):
  """(tokens with each row's positions from its cut on changed, the cuts)."""
  tokens = np.asarray(tokens)
  c = cuts(*tokens.shape)
  after = np.arange(tokens.shape[1])[None, :] >= c[:, None]
  return np.where(after, (tokens + 1) % vocab_size, tokens), c


def compare(logits, logits_changed, c) -> dict:
  """{"checked", "ok", "detail"}: whether any row's logits before its cut moved."""
  a, b = np.asarray(logits, np.float64), np.asarray(logits_changed, np.float64)
  tol = RTOL * max(1.0, float(np.abs(a).max()))
  moved = np.abs(a - b).max(axis=-1)  # (batch, time)
  before = np.arange(a.shape[1])[None, :] < c[:, None]
  leaks = np.argwhere((moved > tol) & before)
  if not len(leaks):
    return {"checked": True, "ok": True,
            "detail": f"no output moved before the positions that changed (cuts "
                      f"{', '.join(map(str, c))} of {a.shape[1]})"}
  row, pos = max(leaks, key=lambda rp: (c[rp[0]] - rp[1], moved[rp[0], rp[1]]))
  ahead = int(c[row] - pos)  # the farthest this batch shows: a lower bound
  return {"checked": True, "ok": False,
          "detail": f"the output at position {pos} moved by {moved[row, pos]:.3g} when only "
                    f"positions >= {c[row]} changed: it reads at least {ahead} "
                    f"position{'s' if ahead > 1 else ''} ahead"}


def check(model, params, tokens) -> dict:
  """The causality check of a StateTracker with these parameters on these tokens."""
  vocab = model.cfg.vocab_size
  if vocab < 2:
    return {"checked": False, "ok": None, "detail": "one token: nothing to change"}
  changed, c = perturbed(tokens, vocab)
  logits = jax.device_get(declaration.forward(model, params, tokens)[0])
  logits_changed = jax.device_get(declaration.forward(model, params, changed)[0])
  return compare(logits, logits_changed, c)


def _at_init(cfg, batch: int, length: int, seed: int = 0):
  """cfg's network (a ModelConfig), random tokens and its parameters at a random
  initialisation."""
  from ssm_bench import models
  model = models.StateTracker(cfg)
  tokens = declaration.random_tokens(cfg.vocab_size, batch, length, seed)
  return model, jax.jit(model.init)(jax.random.PRNGKey(seed), tokens), tokens


def check_at_init(cfg, batch: int = 4, length: int = 16, seed: int = 0) -> dict:
  """The check of cfg's network (a ModelConfig) at a random initialisation."""
  return check(*_at_init(cfg, batch, length, seed))


def checks_at_init(layers: tuple, kwargs: str = "") -> dict:
  """A layer card's checks (`launch.info --model`): its declaration and causality on random
  inputs, for a small network of these layers at a random initialisation; ValueError (one
  line) for a layer that does not build."""
  from ssm_bench import models
  from ssm_bench.config import ModelConfig
  cfg = ModelConfig(layers=layers, vocab_size=6, num_classes=6, d_model=16, d_state=4,
                    layer_kwargs=kwargs)
  models.check(cfg)
  at_init = _at_init(cfg, batch=4, length=32)
  return {"declaration_at_init": declaration.check(*at_init),
          "causal_at_init": check(*at_init)}


def suite_tested(layers, layer_kwargs: str) -> bool:
  """Built-in layers at their defaults: tests/test_causality.py checks each, so a run needs no
  check of its own; a plugin's layer or a built-in's kwargs (a transformer's `{"causal":
  false}`) can read ahead."""
  return not layer_kwargs and all(registry.get(n).builtin for n in layers)


def require(cfg):
  """Raise LayerError (one line) if cfg's network reads ahead at its initialisation, unless
  `suite_tested`."""
  if suite_tested(cfg.layers, cfg.layer_kwargs):
    return
  result = check_at_init(cfg)
  if result["ok"] is False:
    raise registry.LayerError(
        f"the network {','.join(cfg.layers)} is not causal at initialisation: {result['detail']}; "
        "a layer's output at position t must depend on positions up to t only (one-pass "
        "evaluation and training at the curriculum's length rely on it)")
