"""Model configuration: every open architectural choice is a field here (defaults in BUILD_NOTES)."""
from __future__ import annotations

import dataclasses

NORMS = ("layernorm", "rmsnorm", "none")
ACTIVATIONS = ("gelu", "relu", "silu", "tanh", "identity")
INITIAL_STATES = ("ones", "zeros", "learned")


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
  decoder_hidden: int = 0  # hidden width of the MLP decoder head; 0 means d_model

  def __post_init__(self):
    object.__setattr__(self, "layers", tuple(self.layers))
    for field, allowed in (("norm", NORMS), ("activation", ACTIVATIONS),
                           ("initial_state", INITIAL_STATES)):
      if getattr(self, field) not in allowed:
        raise ValueError(f"unknown {field} {getattr(self, field)!r}; choose one of {', '.join(allowed)}")

  @property
  def depth(self) -> int:
    return len(self.layers)
