"""Check a layer's declared transition class against the transitions it actually produces.

A layer that sows its transitions (`self.sow("intermediates", "transition", a)`) has them sampled
on given inputs and tested against its class's set (theory.CLASSES[...].contains): a layer
declared non-negative whose a_t goes below 0 is flagged, in its run's summary and its profile.
Layers that sow nothing, and classes with nothing to check (non-linear, unknown), say so.
"""
from __future__ import annotations

import functools

import jax
import numpy as np

from ssm_bench import registry
from ssm_bench import theory


def _find(tree, key="transition"):
  """Every array sown under `key` anywhere in the layer's intermediates."""
  out = []
  if isinstance(tree, dict) or hasattr(tree, "items"):
    for k, v in tree.items():
      if k == key:
        out += [np.asarray(x) for x in (v if isinstance(v, (tuple, list)) else (v,))]
      else:
        out += _find(v, key)
  return out


@functools.partial(jax.jit, static_argnums=0)
def _forward(model, params, tokens):
  logits, state = model.apply(params, tokens, mutable=["intermediates"])
  return logits, state.get("intermediates", {})


def forward(model, params, tokens):
  """(logits, sown intermediates): one compiled program per model (hashable by its config; a
  layer name keeps one builder per process, registry.register_layer), shared with the causality
  check (`ssm_bench.causality`). Run eagerly, the first check of each shape compiled every op
  (2-6 s on CPU; a group's runs then took 0.2-0.6 s each). Tokens go in as a NumPy array: jit
  caches a jax array and a NumPy array of the same shape apart, and the causality check's
  changed tokens are NumPy (two programs per model before)."""
  return _forward(model, params, np.asarray(tokens))


def check(model, params, tokens, tol: float = 1e-4) -> dict:
  """{"checked", "ok", "layers": [{layer, model, class, kwargs, checked, ok, detail}]} for the
  stack's layers on these tokens. ok is None when nothing could be checked."""
  layers = model.cfg.layers
  inter = jax.device_get(forward(model, params, tokens)[1])
  rows = []
  # each layer's kwargs as it ran (registry defaults included), so a summary still says which
  # layer it measured after a default changes (run names hash only the given layer_kwargs)
  kwargs = registry.layer_kwargs(layers, model.cfg.layer_kwargs)
  for i, name in enumerate(layers):
    cls = registry.theory_class_of(name, model.cfg.layer_kwargs)
    sown = _find(inter.get(f"layer{i}", {}))
    if not sown:
      row = {"checked": False, "ok": None, "detail": "the layer sows no transitions"}
    else:  # every sown array must lie in the set; report the first that does not
      results = [theory.check(cls, a, tol) for a in sown]
      row = next((r for r in results if r["ok"] is False), results[0])
    rows.append({"layer": f"layer{i}", "model": name, "class": cls, "kwargs": kwargs[i], **row})
  checked = [r for r in rows if r["checked"]]
  return {"checked": bool(checked), "ok": all(r["ok"] for r in checked) if checked else None,
          "layers": rows}


def random_tokens(vocab_size: int, batch: int = 4, length: int = 32, seed: int = 0):
  return jax.random.randint(jax.random.PRNGKey(seed), (batch, length), 0, vocab_size)
