"""Model configuration: every open architectural choice is a field here (defaults in BUILD_NOTES)."""
from __future__ import annotations

import dataclasses

NORMS = ("layernorm", "rmsnorm", "none")
ACTIVATIONS = ("gelu", "relu", "silu", "tanh", "identity")
INITIAL_STATES = ("ones", "zeros", "learned")
DECODERS = ("mlp", "linear")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  layers: tuple = ("mamba",)  # one layer name per depth; hybrids mix names
  vocab_size: int = 2
  num_classes: int = 2
  d_model: int = 128
  d_state: int = 64
  scan_method: str = "auto"
  norm: str = "layernorm"  # pre-norm inside each block and before the decoder head
  activation: str = "gelu"  # the nonlinearity between a layer and its output projection
  initial_state: str = "ones"  # ones: unit-norm constant h0 (paper Sec. 6)
  conv_kernel: int = 4  # causal depthwise conv in the Mamba block; 0 turns it off
  dt_min: float = 1e-3  # Mamba/S4D step-size init, log-uniform in [dt_min, dt_max]
  dt_max: float = 1e-1
  decoder: str = "mlp"  # head on the residual stream: an MLP (universal) or one linear map
  decoder_hidden: int = 0  # hidden width of the MLP decoder head; 0 means d_model

  def __post_init__(self):
    object.__setattr__(self, "layers", tuple(self.layers))
    for field, allowed in (("norm", NORMS), ("activation", ACTIVATIONS),
                           ("initial_state", INITIAL_STATES), ("decoder", DECODERS)):
      if getattr(self, field) not in allowed:
        raise ValueError(f"unknown {field} {getattr(self, field)!r}; choose one of {', '.join(allowed)}")

  @property
  def depth(self) -> int:
    return len(self.layers)


SCHEDULES = ("constant", "cosine", "cosine_restarts")

# Fields that change array shapes or the compiled program. Runs that agree on all of these
# train together under vmap; lr, schedule and seed are traced values.
SHAPE_FIELDS = ("task", "model", "depth", "d_model", "d_state", "batch_size", "steps",
                "train_length", "scan_method", "norm", "activation", "initial_state",
                "conv_kernel", "dt_min", "dt_max", "decoder", "weight_decay", "grad_clip", "warmup_steps",
                "curriculum_start", "curriculum_threshold", "curriculum_patience",
                "curriculum_every", "log_every", "eval_seqs", "eval_chunk", "init_from_analytic")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """Everything that defines a run; its id is derived from these values (see runs.run_name)."""
  task: str = "C2"
  model: str = "mamba"  # a layer name, or a comma list for a hybrid stack
  depth: int = 1
  d_model: int = 128
  d_state: int = 64
  lr: float = 1e-3
  schedule: str = "constant"
  seed: int = 0
  steps: int = 20000
  batch_size: int = 256
  scan_method: str = "auto"
  weight_decay: float = 0.01
  grad_clip: float = 1.0
  warmup_steps: int = 0  # linear learning-rate warm-up before any schedule
  train_length: int = 60  # curriculum cap (paper: 60)
  curriculum_start: int = 2
  curriculum_threshold: float = 0.95
  curriculum_patience: int = 5  # consecutive checks at or above the threshold
  curriculum_every: int = 10  # steps between curriculum checks
  log_every: int = 100  # steps per compiled chunk and per metrics line
  checkpoint_every: int = 1000
  eval_seqs: int = 512
  eval_chunk: int = 64
  init_from_analytic: float = -1.0  # noise scale around the construction; < 0 means off
  norm: str = "layernorm"
  activation: str = "gelu"
  initial_state: str = "ones"
  conv_kernel: int = 4
  dt_min: float = 1e-3
  dt_max: float = 1e-1
  decoder: str = "mlp"
  preset: str = ""  # the preset these values came from, recorded for tables

  def __post_init__(self):
    if self.schedule not in SCHEDULES:
      raise ValueError(f"unknown schedule {self.schedule!r}; choose one of {', '.join(SCHEDULES)}")
    for name in ("depth", "d_model", "d_state", "steps", "batch_size", "train_length",
                 "log_every", "checkpoint_every", "eval_seqs", "eval_chunk", "curriculum_every"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)}")
    if self.eval_seqs % min(self.eval_chunk, self.eval_seqs):
      raise ValueError(f"eval_seqs ({self.eval_seqs}) must be a multiple of eval_chunk ({self.eval_chunk})")
    if self.steps % self.log_every:
      raise ValueError(f"steps ({self.steps}) must be a multiple of log_every ({self.log_every})")
    if self.checkpoint_every % self.log_every:
      raise ValueError(f"checkpoint_every ({self.checkpoint_every}) must be a multiple of "
                       f"log_every ({self.log_every})")

  def replace(self, **kw) -> "TrainConfig":
    return dataclasses.replace(self, **kw)

  def shape_key(self) -> tuple:
    return tuple(getattr(self, f) for f in SHAPE_FIELDS)


# Presets: small enough to finish on a laptop CPU. Values a preset sets override the defaults;
# explicit flags override the preset.
PRESETS = {
    "paper": {},
    # Tuned on C2 so negmamba extrapolates on 2 CPU cores in about a minute (BUILD_NOTES):
    # a high peak lr with a cosine decay is what mattered; no conv so Delta is per token.
    "cpu": dict(d_model=32, d_state=4, batch_size=64, steps=3000, lr=0.03, schedule="cosine",
                conv_kernel=0, log_every=100, checkpoint_every=1000, eval_seqs=128,
                eval_chunk=64, preset="cpu"),
}
