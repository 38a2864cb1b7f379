"""Every TrainConfig field as a command-line flag, generated from the dataclass (no hand list).

  --config.steps=5000 --config.lr=3e-3 --config.eval_chunk=32     (launch.train and launch.sweep)
  --steps=5000 --lr=3e-3                                           (launch.train's short spelling)

Values are parsed with the field's type and checked by TrainConfig itself, so a bad name or value
fails at parse time with one line. `preset` is not a field flag: `--preset` picks the base values.
"""
from __future__ import annotations

from absl import flags

from ssm_bench import config

PREFIX = "config."
_DEFINERS = {int: flags.DEFINE_integer, float: flags.DEFINE_float, str: flags.DEFINE_string}
_NOT_FLAGS = ("preset",)  # set by --preset, recorded for tables


def define(short: bool = False, help: dict | None = None) -> dict:
  """Define --config.<field> (and --<field> when short) for every field; returns the holders.
  `help` adds a sentence to some fields' help (the task grammar, the model names)."""
  defaults = config.TrainConfig()
  holders = {}
  for name, typ in config.field_types().items():
    if name in _NOT_FLAGS:
      continue
    allowed = config.choices(name)
    doc = f"TrainConfig.{name} (default {getattr(defaults, name)!r}"
    doc += f"; one of {', '.join(allowed)})" if allowed else ")"
    doc += f" {help[name]}" if help and name in help else ""
    # a short spelling another module already defines (--plugins, in launch.common) is that flag
    spellings = [PREFIX + name] + ([name] if short and name not in flags.FLAGS else [])
    holders[name] = [_DEFINERS[typ](s, None, doc) for s in spellings]
  return holders


def overrides(holders: dict) -> dict:
  """The fields set on the command line; a field given in both spellings is an error."""
  out = {}
  for name, hs in holders.items():
    given = [h for h in hs if h.present]
    if len(given) > 1:
      raise ValueError(f"--{name} and --{PREFIX}{name} both given; use one")
    if given:
      out[name] = given[0].value
  return out


def build(holders: dict, preset: str, **fixed) -> dict:
  """Preset values (with the preset's values for the chosen model), then `fixed` (an entry
  point's own flags), then the command-line fields."""
  given = {**fixed, **overrides(holders)}
  model = given.get("model", config.TrainConfig.model)
  return {**config.preset_values(preset, model), **given}
