"""The stack that turns tokens into logits, from layers found in the layer registry by name.

Block (paper Sec. 6): x <- x + out(act(layer(norm(x)))); embedding in, MLP decoder head out.
"""
from __future__ import annotations

import contextlib
import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp

from ssm_bench import failures
from ssm_bench import registry
from ssm_bench import state_widths
from ssm_bench.config import MATMUL_ALGORITHMS, ModelConfig

ACTIVATIONS = {"gelu": nn.gelu, "relu": nn.relu, "silu": nn.silu, "tanh": jnp.tanh,
               "identity": lambda x: x}


parse_layers = registry.parse_layers


def build_layer(cfg: ModelConfig, i: int):
  """Layer i of the stack, with its own kwargs (its registry defaults, then cfg.layer_kwargs)."""
  kwargs = registry.layer_kwargs(cfg.layers, cfg.layer_kwargs)[i]
  return registry.get(cfg.layers[i]).builder(cfg, name=f"layer{i}", **kwargs)


def check(cfg: ModelConfig, length: int = 4):
  """Build the network abstractly (no arithmetic) on `length` tokens: a layer that cannot be
  built with these kwargs or returns the wrong shape raises LayerError, before any run directory
  exists; so does a layer whose class function fails for these kwargs. Callers pass the longest
  sequence a run feeds it (its eval_length), so a layer bounded in length (a table of learned
  positions) refuses the run here, not after training."""
  registry.check_classes(cfg.layers, cfg.layer_kwargs)
  state_widths.check(cfg.layers, dataclasses.asdict(cfg), cfg.layer_kwargs)
  try:
    jax.eval_shape(lambda: StateTracker(cfg).init(jax.random.PRNGKey(0),
                                                   jnp.zeros((1, length), jnp.int32)))
  except registry.LayerError:
    raise
  except Exception as e:  # the layer's own code failed: say which layer, in one line
    raise registry.LayerError(f"building {'/'.join(dict.fromkeys(cfg.layers))} failed: "
                              f"{failures.one_line(e)}") from None


def scan_auto(cfg: ModelConfig) -> str | None:
  """What scan_method "auto" resolves to for this network's layers on this backend, in layer
  order (", "-joined; None if no layer calls a scan), traced abstractly: the scan functions'
  own choice, so a delta-rule layer reports its HOUSEHOLDER_AUTO, not the diagonal AUTO."""
  from ssm_bench import scan
  auto = dataclasses.replace(cfg, scan_method="auto")
  with scan.recording() as used:
    jax.eval_shape(lambda: StateTracker(auto).init(jax.random.PRNGKey(0),
                                                   jnp.zeros((1, 4), jnp.int32)))
  return ", ".join(dict.fromkeys(used)) or None


# Vocabularies up to this size are looked up as a one-hot matmul (every built-in task's is: the
# largest Table 2 group has order 60); larger ones by a gather, where the one-hot matrix would
# cost more than the lookup.
ONE_HOT_MAX_VOCAB = 256
LOOKUP_SCOPE = "embedding_lookup"


def jax_precision(precision: str) -> str:
  """jax's setting for a config's matmul_precision: an algorithm (`MATMUL_ALGORITHMS`) where the
  backend compiles it (a GPU), float32 elsewhere (its accuracy; a CPU has no TF32)."""
  if precision not in MATMUL_ALGORITHMS:
    return precision
  return MATMUL_ALGORITHMS[precision] if jax.default_backend() == "gpu" else "float32"


class Embed(nn.Module):
  """nn.Embed's parameter ("embedding", same init, so the same values from the same key) looked
  up as a one-hot matmul. nn.Embed's gather has a scatter-add for its gradient, whose updates
  collide (every occurrence of a token adds into its row) and which XLA's GPU backend adds with
  atomics in no fixed order: a GPU training step was not bit-reproducible (results/bench/README.md,
  2026-11-25). The matmul's gradient is a matmul. Same forward values: a one-hot row picks an
  embedding row exactly at float32 precision."""
  num_embeddings: int
  features: int

  @nn.compact
  def __call__(self, tokens):
    table = self.param("embedding", nn.linear.default_embed_init,
                       (self.num_embeddings, self.features))
    if self.num_embeddings > ONE_HOT_MAX_VOCAB:
      return jnp.take(table, tokens, axis=0)
    with jax.named_scope(LOOKUP_SCOPE):  # a lookup, exact whatever the network's matmul precision
      onehot = jax.nn.one_hot(tokens, self.num_embeddings, dtype=table.dtype)
      return jnp.dot(onehot, table, precision=jax.lax.Precision.HIGHEST)


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
          else jax.default_matmul_precision(jax_precision(cfg.matmul_precision))):
      # Recomputed in the backward from its input, its intermediates not stored (GELU's tanh
      # form keeps five sequence-sized ones): outside the scan kernels a GPU step is
      # bandwidth-bound, and this moves 1.49 GB less per 27-run mamba step on the H200
      # (results/bench/README.md, "A GPU's step compiled without a GPU"); same values.
      act = jax.checkpoint(ACTIVATIONS[cfg.activation])
      x = Embed(cfg.vocab_size, cfg.d_model, name="embed")(tokens)
      for i, name in enumerate(cfg.layers):
        y = build_layer(cfg, i)(_norm(cfg.norm, f"norm{i}")(x))
        if getattr(y, "shape", None) != x.shape:
          raise registry.LayerError(
              f"layer {name!r} returned shape {getattr(y, 'shape', type(y).__name__)}; a layer "
              f"must map (batch, time, d_model) = {x.shape} to the same shape")
        x = x + nn.Dense(cfg.d_model, name=f"out{i}")(act(y))
      x = _norm(cfg.norm, "norm_f")(x)
      if cfg.decoder == "linear":
        return nn.Dense(cfg.num_classes, name="head_out")(x)
      hidden = nn.Dense(cfg.decoder_hidden or cfg.d_model, name="head_hidden")(x)
      return nn.Dense(cfg.num_classes, name="head_out")(nn.relu(hidden))
