"""The width a width-conditioned theory class reads (householder: the dimensions a layer's keys
live in): a layer record's `state_width(config, kwargs)` where it has one, else the run's
d_state. Checked where a record is registered and before a run trains, so a function that
fails for a run's kwargs is one line then, not a wrong prediction in a table later.
"""
from __future__ import annotations

import dataclasses

from ssm_bench import failures
from ssm_bench.registry import LayerError, find, get, layer_kwargs


def check_record(name: str, state_width, kwargs: dict):
  """state_width must give a positive int for the default config and the layer's defaults:
  a bad one is refused at registration, not found by a table's prediction."""
  if not callable(state_width):
    raise LayerError(f"layer {name!r}: state_width must be a function (config, kwargs) -> int, "
                     f"got {state_width!r}")
  _width_for(name, state_width, {}, dict(kwargs), "on the default config")


def _width_for(name: str, state_width, config: dict, kwargs: dict, where: str = "") -> int:
  """state_width(config, kwargs), checked: LayerError (one line) if it raises or is not a
  positive int."""
  where = where or f"for kwargs {kwargs}"
  try:
    width = state_width(_full_config(config), kwargs)
  except Exception as e:
    raise LayerError(f"layer {name!r}: state_width(config, kwargs) failed {where}: "
                     f"{failures.one_line(e)}") from None
  if isinstance(width, bool) or not isinstance(width, int) or width < 1:
    raise LayerError(f"layer {name!r}: state_width must return a positive int, got {width!r} "
                     f"{where}")
  return width


def check(layers, config: dict, kwargs_text: str = ""):
  """Each layer's state_width for a run's config and kwargs, where it has one: LayerError
  before training where it fails, rather than in the tables that read the run."""
  for n, kw in zip(layers, layer_kwargs(layers, kwargs_text)):
    spec = get(n)
    if spec.state_width is not None:
      _width_for(n, spec.state_width, config, kw)


def _full_config(config: dict) -> dict:
  """Every TrainConfig field: the defaults under `config` (a field a stored run predates, or
  the fields a caller did not give)."""
  from ssm_bench.config import TrainConfig
  return {**dataclasses.asdict(TrainConfig()), **config}


def state_width(model: str, config: dict, kwargs_text: str = "") -> int:
  """The width a width-conditioned class reads for a run of `model` with these config fields
  (a summary's config, a TrainConfig's as a dict, or just d_state; the rest default): its
  layer's `state_width`, else d_state.
  A hybrid stack, a layer not registered here or kwargs it does not take: d_state."""
  spec = find(model) if "," not in model else None
  if spec is None or spec.state_width is None:
    return config["d_state"]
  try:
    return _width_for(model, spec.state_width, config, layer_kwargs([model], kwargs_text)[0])
  except (LayerError, ValueError):  # (a stored run's) kwargs it fails for: as if d_state
    return config["d_state"]
