"""The layer registry: one record per recurrent layer, filled through one public call.

    from ssm_bench.registry import register_layer
    register_layer("lru", LRU, theory_class="time_invariant", kwargs=module_kwargs(LRU))

A record holds everything the suite knows about a layer: its builder, the class of its
transitions (what `theory` predicts from), the scan family it hands `scan.diagonal_scan` (if
any), its analytic constructions, its values per preset, and its own hyperparameters with their
defaults (set per run through the config's `layer_kwargs`). The built-in layers register in
`ssm_bench.layers.builtin` through the same call a plugin module makes (see `ssm_bench.plugins`).
"""
from __future__ import annotations

import dataclasses
import json
import re
import threading
import types
from typing import Any, Callable

from ssm_bench import failures

NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
BUILTIN_SOURCE = "ssm_bench.layers.builtin"


class LayerError(ValueError):
  """A bad registration, an unknown layer or a bad layer_kwargs; the message is one line."""


@dataclasses.dataclass(frozen=True)
class LayerSpec:
  """One layer's record. `builder(cfg, name=..., **kwargs)` returns a Flax module mapping
  (batch, time, d_model) to the same shape; `kwargs` are its own hyperparameters (defaults)."""
  name: str
  builder: Callable
  # a theory.CLASSES name ('householder:2' with a parameter), or a function of the layer's
  # kwargs giving one (DeltaProduct's class depends on its n_h and beta range)
  theory_class: str | Callable
  scan_family: str | None = None  # the scan.Factors family it hands diagonal_scan, if any
  constructions: tuple = ()  # analytic.Construction records: tasks it has weights by hand for
  presets: types.MappingProxyType = dataclasses.field(default_factory=dict)  # preset -> values
  kwargs: types.MappingProxyType = dataclasses.field(default_factory=dict)  # name -> default
  description: str = ""
  source: str = ""  # the module that registered it
  uses_scan_method: bool = True  # False: the layer computes one way whatever --scan_method says
  # the width a theory class with a width condition reads (householder: the dimensions its keys
  # live in), as a function of the run's config fields and the layer's kwargs; None: d_state
  state_width: Callable | None = None

  @property
  def builtin(self) -> bool:
    return self.source == BUILTIN_SOURCE


_LAYERS: dict[str, LayerSpec] = {}
_loading_builtins = False  # true while this module's lock holder imports the built-ins
_builtins_lock = threading.RLock()  # another thread waits for the whole set, never half of it


def _ensure_builtins():
  global _loading_builtins
  with _builtins_lock:
    if not _LAYERS and not _loading_builtins:
      _loading_builtins = True
      try:
        import ssm_bench.layers.builtin  # noqa: F401  (registers on import)
      finally:
        _loading_builtins = False


def _unwrapped(builder):
  """The class or function a builder calls: a functools.partial's own, else the builder."""
  return getattr(builder, "func", builder)


def _origin(builder) -> str:
  fn = _unwrapped(builder)
  return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def module_kwargs(builder: Callable, **defaults) -> dict:
  """A Flax module's hyperparameters as `register_layer` kwargs: its dataclass fields that have a
  default (not `cfg`, `parent`, `name`), less those a functools.partial fixes, with `defaults`
  overriding some, so that the module's own field defaults are the one place they are written."""
  cls = _unwrapped(builder)
  fixed = getattr(builder, "keywords", {}) or {}
  if not dataclasses.is_dataclass(cls):
    raise LayerError(f"module_kwargs needs a Flax module (a dataclass), got {cls!r}")
  fields = {f.name: f.default for f in dataclasses.fields(cls)
            if f.name not in ("parent", "name") and f.name not in fixed
            and f.default is not dataclasses.MISSING}
  unknown = sorted(set(defaults) - set(fields))
  if unknown:
    raise LayerError(f"module_kwargs: {cls.__name__} has no field {', '.join(map(repr, unknown))} "
                     f"(its fields with defaults: {', '.join(fields) or 'none'})")
  return {**fields, **defaults}


def _first_doc_line(builder) -> str:
  """The first line of the builder's own docstring (not one a dataclass, as a Flax module is,
  writes from its signature, nor an inherited one): a layer's description when none is given."""
  target = _unwrapped(builder)
  doc = target.__dict__.get("__doc__") if hasattr(target, "__dict__") else None
  line = (doc or "").strip().split("\n")[0].strip()
  return "" if line.startswith(f"{getattr(target, '__name__', '')}(") else line


def register_layer(name: str, builder: Callable, *, theory_class: str,
                   scan_family: str | None = None, constructions=(), presets: dict | None = None,
                   kwargs: dict | None = None, description: str = "",
                   uses_scan_method: bool = True, source: str | None = None,
                   state_width: Callable | None = None) -> LayerSpec:
  """Add a layer to the registry; returns its record.

  theory_class: one of theory.CLASSES (what the layer's transitions are; `unknown` if you do not
  claim one). scan_family: a scan.FAMILIES name if the layer calls diagonal_scan with it.
  presets: {preset: {config field: value}} applied on top of the preset for this model.
  kwargs: the layer's own hyperparameters and their defaults (JSON scalars), set per run with
  --config.layer_kwargs='{"name": value}'. state_width(config, kwargs) -> int: the dimensions
  the layer's state lives in as a width-conditioned class reads them (householder: the keys'
  width), from the run's config fields (a dict: d_model, d_state, ...) and the layer's kwargs;
  default: the config's d_state. description: one line for its card (default: the first line of
  the builder's docstring). Registering the same builder again under its name with the same
  record is a no-op (a plugin imported twice); another record or another layer under a taken
  name is an error.
  """
  from ssm_bench import theory
  if not _loading_builtins:
    _ensure_builtins()
  source = source or getattr(_unwrapped(builder), "__module__", "?")
  if not isinstance(name, str) or not NAME.match(name):
    raise LayerError(f"layer name {name!r} must be lower-case letters, digits and '_', "
                     "starting with a letter")
  if name in _LAYERS:
    old = _LAYERS[name]
    if _origin(old.builder) == _origin(builder):
      claim = _claims(theory_class, scan_family, kwargs, presets, uses_scan_method)
      if claim == _claims(old.theory_class, old.scan_family, old.kwargs, old.presets,
                          old.uses_scan_method):
        return old
      # the record would be silently the first one's: tables would print a class it dropped
      raise LayerError(f"layer {name!r} is already registered by {old.source} with another "
                       f"record ({_claims_text(old)}); register the builder under a new name "
                       "to give it another class, family, kwargs or presets")
    raise LayerError(f"layer {name!r} is already registered by {old.source}; "
                     f"{source} must choose another name")
  if not callable(builder):
    raise LayerError(f"layer {name!r}: the builder must be callable, got {builder!r}")
  try:
    theory.parse(theory_class(dict(kwargs or {})) if callable(theory_class) else theory_class)
  except Exception as e:
    raise LayerError(f"layer {name!r}: {e}") from None
  if scan_family is not None:
    from ssm_bench import scan
    if scan_family not in scan.FAMILIES:
      raise LayerError(f"layer {name!r}: unknown scan_family {scan_family!r}; choose one of "
                       f"{', '.join(scan.FAMILIES)} or None")
  kwargs = dict(kwargs or {})
  for k, v in kwargs.items():
    if not isinstance(k, str) or not isinstance(v, (bool, int, float, str)):
      raise LayerError(f"layer {name!r}: kwargs must map names to JSON scalars, got {k!r}: {v!r}")
  if state_width is not None:
    from ssm_bench import state_widths  # (it imports this module)
    state_widths.check_record(name, state_width, kwargs)
  _check_presets(name, presets or {})
  from ssm_bench import analytic
  for c in constructions:  # read by every group's listing: one wrong entry failed them all
    if not isinstance(c, analytic.Construction):
      raise LayerError(f"layer {name!r}: constructions must be analytic.Construction records "
                       f"(description, applies, build), got {c!r}")
  if not isinstance(description, str):
    raise LayerError(f"layer {name!r}: description must be a string, got {description!r}")
  description = description or _first_doc_line(builder)
  spec = LayerSpec(name=name, builder=builder, theory_class=theory_class,
                   scan_family=scan_family, constructions=tuple(constructions),
                   presets=types.MappingProxyType({p: dict(v) for p, v in (presets or {}).items()}),
                   kwargs=types.MappingProxyType(kwargs), description=description, source=source,
                   uses_scan_method=uses_scan_method, state_width=state_width)
  _LAYERS[name] = spec
  return spec


def _claims(theory_class, scan_family, kwargs, presets, uses_scan_method) -> tuple:
  """What a record declares, comparable between two registrations of one builder (a function
  by its module and name: a plugin imported twice makes a new function object)."""
  cls = _origin(theory_class) if callable(theory_class) else theory_class
  return (cls, scan_family, dict(kwargs or {}),
          {p: dict(v) for p, v in (presets or {}).items()}, uses_scan_method)


def _claims_text(spec: LayerSpec) -> str:
  cls = spec.theory_class if isinstance(spec.theory_class, str) else _origin(spec.theory_class)
  return (f"class {cls}, scan_family {spec.scan_family}, kwargs {dict(spec.kwargs)}, "
          f"presets {sorted(spec.presets)}")


def _check_presets(name: str, presets: dict):
  """Each preset a layer sizes itself in must exist, and its values make a valid config on top
  of it: a typo (a preset or field name) would otherwise be silently never applied."""
  from ssm_bench import config
  for preset, values in presets.items():
    if preset not in config.PRESETS:
      raise LayerError(f"layer {name!r}: unknown preset {preset!r} in its presets; choose from "
                       f"{', '.join(config.PRESETS)}")
    fields = config.field_types()
    unknown = sorted(set(values) - set(fields))
    if unknown:
      raise LayerError(f"layer {name!r}: preset {preset!r} sets {', '.join(map(repr, unknown))}, "
                       f"not config fields (e.g. {', '.join(list(fields)[:6])}, ...)")
    try:
      config.TrainConfig(**{**config.PRESETS[preset], **values})
    except ValueError as e:
      raise LayerError(f"layer {name!r}: preset {preset!r}: {e}") from None


def names() -> tuple:
  """Every registered layer name, in registration order (built-ins first)."""
  _ensure_builtins()
  return tuple(_LAYERS)


def specs() -> tuple:
  _ensure_builtins()
  return tuple(_LAYERS.values())


def find(name: str) -> LayerSpec | None:
  _ensure_builtins()
  return _LAYERS.get(name)


def get(name: str) -> LayerSpec:
  spec = find(name)
  if spec is None:
    from ssm_bench import plugins  # (plugins imports this module)
    loaded = plugins.loaded()
    theirs = [n for n, s in _LAYERS.items() if not s.builtin]
    where = (f"plugins loaded: {', '.join(loaded)}; their layers: {', '.join(theirs) or 'none'}"
             if loaded else "a plugin's layers need --plugins=module")
    raise LayerError(f"unknown model {name!r}; choose from {', '.join(_LAYERS)} or a comma list "
                     f"of them for a hybrid stack ({where})")
  return spec


def parse_layers(spec: str, depth: int = 1) -> tuple:
  """'mamba' with depth 2 -> ('mamba', 'mamba'); 's4d,mamba' -> ('s4d', 'mamba')."""
  names_ = tuple(s.strip() for s in spec.split(",") if s.strip())
  if not names_:
    raise LayerError(f"unknown model {spec!r}; choose from {', '.join(names())}")
  for n in names_:
    get(n)
  return names_ * depth if len(names_) == 1 else names_


def canonical_kwargs(text: str) -> str:
  """layer_kwargs as stored: '' for none, else a JSON object with sorted keys and no spaces, so
  that equal kwargs give the same run identity. LayerError (one line) if it is not one."""
  if not text or not text.strip():
    return ""
  try:
    obj = json.loads(text)
  except ValueError as e:
    raise LayerError(f"layer_kwargs must be a JSON object such as '{{\"r_min\": 0.9}}', got "
                     f"{text!r} ({e})") from None
  if not isinstance(obj, dict) or not all(isinstance(v, (bool, int, float, str))
                                          for v in obj.values()):
    raise LayerError(f"layer_kwargs must be a JSON object of scalars, got {text!r}")
  return json.dumps(obj, sort_keys=True, separators=(",", ":")) if obj else ""


def _undeclared_fields(specs_, keys) -> str:
  """The hint where a key is a field of a plugin's module that its record does not declare (a
  researcher's first try at setting one): how to declare it."""
  for s in specs_:
    if not dataclasses.is_dataclass(_unwrapped(s.builder)):
      continue
    fields = [k for k in keys if k in module_kwargs(s.builder)]
    if fields:
      cls = _unwrapped(s.builder).__name__
      return (f"; {cls} has the field{'s' * (len(fields) > 1)} {', '.join(map(repr, fields))}: "
              f"declare {'them' if len(fields) > 1 else 'it'} in {s.source} with "
              f"register_layer({s.name!r}, ..., kwargs=module_kwargs({cls}))")
  return ""


def layer_kwargs(layers, text: str) -> list[dict]:
  """Each layer's kwargs: its defaults, with the keys of `text` it declares. A key that no layer
  of the stack declares is an error naming the keys they do take."""
  given = json.loads(text) if text else {}
  specs_ = [get(n) for n in layers]
  known = {k for s in specs_ for k in s.kwargs}
  unknown = sorted(set(given) - known)
  if unknown:
    takes = ", ".join(sorted(known)) or "none"
    raise LayerError(f"layer_kwargs {', '.join(map(repr, unknown))} not taken by "
                     f"{'/'.join(dict.fromkeys(layers))} (its kwargs: {takes})"
                     + _undeclared_fields(specs_, unknown))
  out = []
  for s in specs_:
    kw = dict(s.kwargs)
    for k, v in given.items():
      if k in kw:
        default = kw[k]
        if isinstance(default, float) and isinstance(v, int) and not isinstance(v, bool):
          v = float(v)
        if type(v) is not type(default):
          raise LayerError(f"layer_kwargs {k!r} of {s.name} must be "
                           f"{type(default).__name__} (default {default!r}), got {v!r}")
        kw[k] = v
    out.append(kw)
  return out


def preset_values(preset: str, model: str | None) -> dict:
  """The layer's own values for a preset ({} for hybrids and unknown layers)."""
  spec = find(model) if model and "," not in model else None
  return dict(spec.presets.get(preset, {})) if spec else {}


def _class_for(spec: LayerSpec, kwargs: dict) -> str:
  """The layer's class with these kwargs (its own, after the stack's were split); LayerError if
  its class function raises or answers something that is not a class of theory.CLASSES."""
  from ssm_bench import theory
  if not callable(spec.theory_class):
    return spec.theory_class
  try:
    cls = spec.theory_class(kwargs)
    theory.parse(cls)
  except Exception as e:
    raise LayerError(f"layer {spec.name!r}: its theory_class for kwargs {kwargs} failed: "
                     f"{failures.one_line(e)}") from None
  return cls


def check_classes(layers, kwargs_text: str = "") -> list[str]:
  """Each layer's class for a run's kwargs, bottom first; LayerError (one line) where a class
  function fails for them: found before training, not by the tables that read the run."""
  return [_class_for(get(n), kw) for n, kw in zip(layers, layer_kwargs(layers, kwargs_text))]


def _class_or_unknown(spec: LayerSpec | None, kwargs_text: str, kwargs: dict | None) -> str:
  """_class_for, `unknown` where it fails: kwargs the stack split (`kwargs`), else those of
  the text this layer takes alone."""
  if spec is None:
    return "unknown"
  try:
    return _class_for(spec, layer_kwargs([spec.name], kwargs_text)[0] if kwargs is None
                      else kwargs)
  except ValueError:  # LayerError, or kwargs that are not JSON
    return "unknown"


def theory_class_of(name: str, kwargs_text: str = "") -> str:
  """The layer's transition class with these kwargs; `unknown` for a layer that is not
  registered here (a plugin that could not be loaded), kwargs it does not take, or a class
  function that fails for them (a stored run's table shows `?` rather than failing)."""
  return _class_or_unknown(find(name), kwargs_text, None)


def theory_classes(model: str, depth: int, kwargs: str = "") -> list[str]:
  """The transition class of every layer of the stack, bottom first (see theory_class_of), each
  with the kwargs of the stack's that it takes."""
  layers = model.split(",") if "," in model else [model] * depth
  try:
    per_layer = layer_kwargs(layers, kwargs)  # as the network splits them
  except ValueError:  # a layer not registered here, or a key none takes: each layer alone
    per_layer = [None] * len(layers)
  return [_class_or_unknown(find(n), kwargs, kw) for n, kw in zip(layers, per_layer)]


def card(name: str, kwargs_text: str = "") -> dict[str, Any]:
  """What the registry says about a layer with these kwargs (its defaults, then the JSON of
  `kwargs_text`), as plain data (for info and reports); LayerError for kwargs it does not take or
  a class function that fails for them."""
  from ssm_bench import theory
  s = get(name)
  kwargs = layer_kwargs([name], canonical_kwargs(kwargs_text))[0]
  cls_name = _class_for(s, kwargs)
  cls = theory.parse(cls_name)[0]
  return {"name": s.name, "source": s.source, "builtin": s.builtin, "description": s.description,
          "theory_class": cls_name, "class_description": cls.description,
          "theorem": cls.theorem, "class_includes": theory.included(cls_name),
          "scan_family": s.scan_family,
          # a stack's own (`below`) says so: its weights are not this layer's alone
          "constructions": [(f"as {c.stack(s.name)}: " if c.below else "") + c.description
                            for c in s.constructions],
          "kwargs": kwargs, "presets": {p: dict(v) for p, v in s.presets.items()}}
