"""The model zoo: a registry of recurrent layers and the stack that turns tokens into logits.

Block (paper Sec. 6): x <- x + out(act(layer(norm(x)))); embedding in, MLP decoder head out.
"""
from __future__ import annotations

import contextlib
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

from ssm_bench.config import ModelConfig
from ssm_bench.layers import aussm, mamba, rnn, s4d

LAYERS = {
    "mamba": functools.partial(mamba.Mamba, negative=False),
    "negmamba": functools.partial(mamba.Mamba, negative=True),
    "aussm": aussm.AUSSM,
    "simple_aussm": aussm.SimpleAUSSM,
    "s4d": s4d.S4D,
    "rnn": rnn.RNN,
    "ids4": rnn.IDS4,
}

ACTIVATIONS = {"gelu": nn.gelu, "relu": nn.relu, "silu": nn.silu, "tanh": jnp.tanh,
               "identity": lambda x: x}


def parse_layers(spec: str, depth: int = 1) -> tuple:
  """'mamba' with depth 2 -> ('mamba', 'mamba'); 's4d,mamba' -> ('s4d', 'mamba')."""
  names = tuple(s.strip() for s in spec.split(",") if s.strip())
  unknown = [n for n in names if n not in LAYERS]
  if not names or unknown:
    raise ValueError(f"unknown model {spec!r}; choose from {', '.join(LAYERS)} "
                     "or a comma list of them for a hybrid stack")
  return names * depth if len(names) == 1 else names


def _norm(kind: str, name: str):
  if kind == "layernorm":
    return nn.LayerNorm(name=name)
  if kind == "rmsnorm":
    return nn.RMSNorm(name=name)
  return lambda x: x


class StateTracker(nn.Module):
  """tokens (batch, time) -> logits (batch, time, num_classes)."""
  cfg: ModelConfig

  @nn.compact
  def __call__(self, tokens):
    cfg = self.cfg
    # Applies while the network is traced, so every matmul and conv of training and evaluation
    # is computed at the config's precision, whatever jit or vmap wraps the call; "default"
    # leaves jax's own setting (JAX_DEFAULT_MATMUL_PRECISION, recorded in each summary).
    with (contextlib.nullcontext() if cfg.matmul_precision == "default"
          else jax.default_matmul_precision(cfg.matmul_precision)):
      act = ACTIVATIONS[cfg.activation]
      x = nn.Embed(cfg.vocab_size, cfg.d_model, name="embed")(tokens)
      for i, name in enumerate(cfg.layers):
        y = LAYERS[name](cfg, name=f"layer{i}")(_norm(cfg.norm, f"norm{i}")(x))
        x = x + nn.Dense(cfg.d_model, name=f"out{i}")(act(y))
      x = _norm(cfg.norm, "norm_f")(x)
      if cfg.decoder == "linear":
        return nn.Dense(cfg.num_classes, name="head_out")(x)
      hidden = nn.Dense(cfg.decoder_hidden or cfg.d_model, name="head_hidden")(x)
      return nn.Dense(cfg.num_classes, name="head_out")(nn.relu(hidden))
