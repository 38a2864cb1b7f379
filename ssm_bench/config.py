"""Configuration: every open architectural and training choice is a field (defaults in BUILD_NOTES).

`ArchConfig` holds the fields a network and a run share; `ModelConfig` (what the network needs)
and `TrainConfig` (what defines a run) both extend it, so no field is declared twice.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import re
import typing

NORMS = ("layernorm", "rmsnorm", "none")
ACTIVATIONS = ("gelu", "relu", "silu", "tanh", "identity")
INITIAL_STATES = ("ones", "zeros", "learned")
DECODERS = ("mlp", "linear")
SCHEDULES = ("constant", "cosine", "cosine_restarts")
# jax's names for float32 matmul and conv arithmetic; "default" leaves jax's setting, which is
# the backend's choice unless JAX_DEFAULT_MATMUL_PRECISION is set (true float32 on CPU, TF32 on
# recent NVIDIA GPUs, one bfloat16 pass on TPU).
MATMUL_PRECISIONS = ("default", "float32", "tensorfloat32", "bfloat16", "tf32x3")
# ...and the ones jax names by an algorithm: "tf32x3", float32 from three TF32 passes on an NVIDIA
# GPU's tensor cores (about float32's accuracy at nearer TF32's speed; the precision section of
# launch.bench times it and checks its gradients against float32's). jax compiles it only for a
# GPU; elsewhere it computes float32, as "tensorfloat32" does on a CPU.
MATMUL_ALGORITHMS = {"tf32x3": "TF32_TF32_F32_X3"}
# Whether a group trains at the shortest of a few sequence lengths that holds its curriculum
# (ssm_bench/length_buckets.py): "auto" on a CPU, "on", or "off" (always train_length).
LENGTH_BUCKETS = ("auto", "on", "off")
# The evaluation grid's spacing (and first length): acc(L) is stored at L = 20, 40, ...
GRID_STEP = 20
# The traced hyperparameters: runs that differ only in these train together under vmap.
TRACED_FIELDS = ("lr", "schedule", "seed")
# How a network is computed, not which network: a run set from a construction keeps its own.
# Tables pool runs across them; each run's summary says what `auto` chose.
NUMERICS_FIELDS = ("scan_method", "matmul_precision", "length_buckets")
# How a run is executed, not which run: how often it logs (the compiled chunk's length) and
# checkpoints, and the evaluation's batch chunk. None changes a number of the result (data keys,
# the curriculum and the schedule go by step), so none is part of a run's name or of a table's
# protocol: a finished sweep relaunched with another checkpoint_every retrains nothing.
EXECUTION_FIELDS = ("log_every", "checkpoint_every", "eval_chunk")


def _scan_methods():
  from ssm_bench import scan  # deferred: scan imports jax, config must stay light
  return scan.METHODS


# field -> allowed values; checked for every config and offered as flag choices.
CHOICES = {"norm": NORMS, "activation": ACTIVATIONS, "initial_state": INITIAL_STATES,
           "decoder": DECODERS, "schedule": SCHEDULES, "scan_method": _scan_methods,
           "matmul_precision": MATMUL_PRECISIONS, "length_buckets": LENGTH_BUCKETS}


def choices(field: str):
  c = CHOICES.get(field)
  return c() if callable(c) else c


class ConfigError(ValueError):
  """A config value out of range or not among the choices; the message is one line."""


_PLUGIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(:[A-Za-z_][A-Za-z0-9_]*)?\Z")


def canonical_plugins(text: str) -> str:
  """Plugin modules as stored: 'pkg.mod' or 'pkg.mod:register', comma-separated, no spaces."""
  entries = [e.strip() for e in (text or "").split(",") if e.strip()]
  bad = [e for e in entries if not _PLUGIN.match(e)]
  if bad:
    raise ConfigError(f"plugins must be importable module names such as examples.rotation or "
                      f"mypkg.layers:register, comma-separated; got {bad[0]!r}")
  return ",".join(dict.fromkeys(entries))


def canonical_model(model: str, depth: int) -> str:
  """A run's `model` as stored: layer names without spaces, a hybrid's comma list as many as
  `depth`, and a list of one repeated name as that name (`mamba,mamba` is `mamba` at depth 2),
  so one network has one run identity and one theory. Whether the names are registered is the
  layer registry's to say (a plugin may not be loaded yet)."""
  entries = [e.strip() for e in model.split(",")]
  if not all(entries):
    raise ConfigError(f"model {model!r} has an empty name; give one layer name or a comma list "
                      "of them for a hybrid stack, such as s4d,mamba")
  if len(entries) > 1 and len(entries) != depth:
    raise ConfigError(f"model {model!r} lists {len(entries)} layers but depth is {depth}: a "
                      "hybrid stack's depth is the length of its list")
  return entries[0] if len(set(entries)) == 1 else ",".join(entries)


def _canonicalize(cfg):
  from ssm_bench import registry  # light: the registry module imports no jax at import time
  try:
    object.__setattr__(cfg, "layer_kwargs", registry.canonical_kwargs(cfg.layer_kwargs))
  except registry.LayerError as e:
    raise ConfigError(str(e)) from None
  if hasattr(cfg, "plugins"):
    object.__setattr__(cfg, "plugins", canonical_plugins(cfg.plugins))
  if hasattr(cfg, "model"):
    object.__setattr__(cfg, "model", canonical_model(cfg.model, cfg.depth))


def _check_choices(cfg):
  for f in dataclasses.fields(cfg):
    allowed = choices(f.name)
    if allowed is not None and getattr(cfg, f.name) not in allowed:
      raise ConfigError(f"unknown {f.name} {getattr(cfg, f.name)!r}; choose one of "
                        f"{', '.join(allowed)}")


@functools.lru_cache(maxsize=None)
def _type_hints(cls) -> dict:
  """The dataclass's field types, resolved once per class (resolving them per instance was two
  thirds of expanding the 7290-run table2 grid)."""
  return typing.get_type_hints(cls)


@dataclasses.dataclass(frozen=True)
class ArchConfig:
  """Architecture fields shared by the network and the run."""
  d_model: int = 128
  d_state: int = 64
  scan_method: str = "auto"
  matmul_precision: str = "default"  # arithmetic of every matmul and conv (MATMUL_PRECISIONS)
  norm: str = "layernorm"  # pre-norm inside each block and before the decoder head
  activation: str = "gelu"  # the nonlinearity between a layer and its output projection
  initial_state: str = "ones"  # ones: unit-norm constant h0 (paper Sec. 6)
  conv_kernel: int = 4  # causal depthwise conv in the Mamba block; 0 turns it off
  dt_min: float = 1e-3  # Mamba/S4D step-size init, log-uniform in [dt_min, dt_max]
  dt_max: float = 1e-1
  decoder: str = "mlp"  # head on the residual stream: an MLP (universal) or one linear map
  # The layers' own hyperparameters: a JSON object (keys the layers' registry records declare),
  # stored canonically (sorted keys, no spaces; '' for none) so equal kwargs are one identity.
  layer_kwargs: str = ""


def arch_fields(cfg) -> dict:
  """The ArchConfig part of any config, as keyword arguments."""
  return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(ArchConfig)}


@dataclasses.dataclass(frozen=True)
class ModelConfig(ArchConfig):
  layers: tuple = ("mamba",)  # one layer name per depth; hybrids mix names
  vocab_size: int = 2
  num_classes: int = 2
  decoder_hidden: int = 0  # hidden width of the MLP decoder head; 0 means d_model

  def __post_init__(self):
    object.__setattr__(self, "layers", tuple(self.layers))
    _canonicalize(self)
    _check_choices(self)

  @property
  def depth(self) -> int:
    return len(self.layers)


# Checked ranges: field -> (predicate, what it must be).
_POSITIVE_INTS = ("depth", "d_model", "d_state", "steps", "batch_size", "train_length",
                  "log_every", "checkpoint_every", "eval_seqs", "eval_chunk", "eval_length", "curriculum_every",
                  "curriculum_start", "curriculum_patience")
_RANGES = {
    **{name: (lambda v: v >= 1, "a positive integer") for name in _POSITIVE_INTS},
    "lr": (lambda v: math.isfinite(v) and v > 0, "a finite number > 0"),
    "weight_decay": (lambda v: math.isfinite(v) and v >= 0, "a finite number >= 0"),
    "grad_clip": (lambda v: math.isfinite(v) and v > 0, "a finite number > 0"),
    "warmup_steps": (lambda v: v >= 0, "an integer >= 0"),
    "conv_kernel": (lambda v: v >= 0, "an integer >= 0 (0 turns the conv off)"),
    "dt_min": (lambda v: math.isfinite(v) and v > 0, "a finite number > 0"),
    "dt_max": (lambda v: math.isfinite(v) and v > 0, "a finite number > 0"),
    "curriculum_threshold": (lambda v: math.isfinite(v) and v >= 0,
                             "a finite number >= 0 (above 1 the length never grows)"),
    "init_from_analytic": (lambda v: math.isfinite(v), "a finite number (< 0 means off)"),
    "seed": (lambda v: 0 <= v < 2 ** 31, "an integer in [0, 2^31)"),
    "pad_order": (lambda v: v >= 0, "an integer >= 0 (0: no padding)"),
}


@dataclasses.dataclass(frozen=True)
class TrainConfig(ArchConfig):
  """Everything that defines a run; its id is derived from these values (see runs.run_name)."""
  task: str = "C2"
  model: str = "mamba"  # a layer name, or a comma list for a hybrid stack
  depth: int = 1
  lr: float = 1e-3
  schedule: str = "constant"
  seed: int = 0
  steps: int = 20000
  batch_size: int = 256
  weight_decay: float = 0.01
  grad_clip: float = 1.0
  warmup_steps: int = 0  # linear learning-rate warm-up before any schedule
  train_length: int = 60  # curriculum cap (paper: 60)
  curriculum_start: int = 2
  curriculum_threshold: float = 0.95
  curriculum_patience: int = 5  # consecutive checks at or above the threshold
  curriculum_every: int = 10  # steps between curriculum checks
  # train at the curriculum's length, not always its cap (LENGTH_BUCKETS; a numerics field)
  length_buckets: str = "auto"
  log_every: int = 100  # steps per compiled chunk and per metrics line
  checkpoint_every: int = 1000
  eval_seqs: int = 512
  eval_chunk: int = 64
  eval_length: int = 1000  # evaluate every position up to here (grid: evaluation.grid)
  init_from_analytic: float = -1.0  # noise scale around the construction; < 0 means off
  preset: str = ""  # the preset these values came from, recorded for tables
  # > 0: a group task's vocabulary and classes padded to this order (classes past the task's own
  # masked out of the loss and the prediction), and its Cayley table passed as data, so runs of
  # every group up to this order share one compiled program (table2: 60). 0: the task's sizes.
  pad_order: int = 0
  # Modules that register layers (ssm_bench.plugins), imported wherever this run is built (a
  # resume, a sweep's re-exec, a Ray worker, a table), so a plugin's layer is found again.
  plugins: str = ""

  def __post_init__(self):
    hints = _type_hints(type(self))
    for f in dataclasses.fields(self):
      v, want = getattr(self, f.name), hints[f.name]
      if want is float and isinstance(v, int) and not isinstance(v, bool):
        object.__setattr__(self, f.name, float(v))
      elif want in (int, float, str) and (not isinstance(v, want) or isinstance(v, bool)):
        raise ConfigError(f"{f.name} must be {want.__name__}, got {v!r}")
    _canonicalize(self)
    _check_choices(self)
    for name, (ok, what) in _RANGES.items():
      if not ok(getattr(self, name)):
        raise ConfigError(f"{name} must be {what}, got {getattr(self, name)!r}")
    if self.dt_max < self.dt_min:
      raise ConfigError(f"dt_max ({self.dt_max}) must be >= dt_min ({self.dt_min})")
    if self.eval_seqs % min(self.eval_chunk, self.eval_seqs):
      raise ConfigError(f"eval_seqs ({self.eval_seqs}) must be a multiple of eval_chunk "
                        f"({self.eval_chunk}); set both")
    if self.eval_length < GRID_STEP:
      raise ConfigError(f"eval_length ({self.eval_length}) must be >= {GRID_STEP}, the first "
                        "length of the evaluation grid")
    if self.eval_length < self.train_length:
      raise ConfigError(f"eval_length ({self.eval_length}) must be >= train_length "
                        f"({self.train_length})")
    if self.steps % self.log_every:
      raise ConfigError(f"steps ({self.steps}) must be a multiple of log_every ({self.log_every})")
    if self.checkpoint_every % self.log_every:
      raise ConfigError(f"checkpoint_every ({self.checkpoint_every}) must be a multiple of "
                        f"log_every ({self.log_every})")

  def replace(self, **kw) -> "TrainConfig":
    return dataclasses.replace(self, **kw)

  def shape_key(self) -> tuple:
    """Every field but the traced ones: runs that agree here share one compiled program (with
    pad_order, the group task is data too: any group up to that order)."""
    return tuple("*" if f == "task" and self.pad_order else getattr(self, f)
                 for f in SHAPE_FIELDS)


SHAPE_FIELDS = tuple(f.name for f in dataclasses.fields(TrainConfig) if f.name not in TRACED_FIELDS)


def field_types() -> dict:
  """TrainConfig field -> Python type (int, float or str), for command-line parsing."""
  hints = _type_hints(TrainConfig)
  return {f.name: hints[f.name] for f in dataclasses.fields(TrainConfig)}


# Presets: small enough to finish on a laptop CPU. Values a preset sets override the defaults;
# explicit flags override the preset.
PRESETS = {
    # The paper trains in "standard FP32 precision": true float32 matmuls, where jax would use
    # TF32 on recent NVIDIA GPUs (no effect on CPU, whose default is float32 already).
    "paper": dict(matmul_precision="float32"),
    # Tuned on C2 so negmamba extrapolates on 2 CPU cores in about a minute (BUILD_NOTES):
    # a high peak lr with a cosine decay is what mattered; no conv so Delta is per token.
    "cpu": dict(d_model=32, d_state=4, batch_size=64, steps=3000, lr=0.03, schedule="cosine",
                conv_kernel=0, log_every=100, checkpoint_every=1000, eval_seqs=128,
                eval_chunk=64, preset="cpu"),
    # Seconds-sized runs for tests and for trying a command out.
    "tiny": dict(d_model=8, d_state=2, batch_size=8, steps=20, log_every=10, checkpoint_every=10,
                 eval_seqs=8, eval_chunk=8, train_length=8, conv_kernel=0, preset="tiny"),
}

# Table 2 at the paper's width: the paper preset without the Mamba block's conv (results/pilots.md,
# "The table2 protocol"), every group padded to order 60 (all nine have order <= 60) so that one
# compiled program per (model, depth, d_state) trains them all. Its own label, so its tables say
# "table2" rather than listing these values as differences from "paper".
PRESETS["table2"] = {**PRESETS["paper"], "conv_kernel": 0, "pad_order": 60, "preset": "table2"}
# Every Table 2 cell in about half an hour on one GPU (launch/sweeps.py, table2_lite).
PRESETS["table2_lite"] = {**PRESETS["table2"], "d_state": 32, "schedule": "cosine", "steps": 3000,
                          "checkpoint_every": 1000, "preset": "table2_lite"}
# Table 2 at CPU scale (all 90 cells on 2 cores): the cpu preset's values under its own label; the
# layers' registry records size some models apart in it.
PRESETS["table2_cpu"] = {**PRESETS["cpu"], "preset": "table2_cpu"}
# The baselines on Table 2's C2, S3 and A5 rows at CPU scale: table2_cpu's values under a label
# of their own, so the extended table names itself and the paper's Table 2 keeps its columns.
PRESETS["table2_ext_cpu"] = {**PRESETS["cpu"], "preset": "table2_ext_cpu"}
# The state-tracking profile's protocols: the base presets' values under a label of their own, so
# profile runs never pool with another protocol's (launch/sweeps.py, "profile").
# The tiny and GPU ones pad every group to order 60 (the profile's largest, A5), as table2 does:
# one compiled program per stage and depth trains every group (a tiny profile 33 s instead of
# 156 s here, 3 programs instead of 30). The CPU one does not: a group trains each chunk at its
# runs' longest curriculum length (`length_buckets`), and one group per task keeps the short ones
# short (BUILD_NOTES, "Training at the curriculum's length").
PRESETS["profile_cpu"] = {**PRESETS["cpu"], "preset": "profile_cpu"}
PRESETS["profile_tiny"] = {**PRESETS["tiny"], "pad_order": 60, "preset": "profile_tiny"}
PRESETS["profile"] = {**PRESETS["paper"], "conv_kernel": 0, "pad_order": 60, "preset": "profile"}
PROFILE_PRESETS = {"cpu": "profile_cpu", "tiny": "profile_tiny", "paper": "profile"}
PROFILE_LABELS = tuple(PROFILE_PRESETS.values())


def preset_values(preset: str, model: str | None = None) -> dict:
  """The preset's values, with the values the model's registry record gives for that preset on
  top (a layer may be sized apart in a protocol; unknown presets give {})."""
  from ssm_bench import registry
  return {**PRESETS.get(preset, {}), **registry.preset_values(preset, model)}
