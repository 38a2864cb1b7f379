"""Layers from outside the package: import the modules a config names, which register their layers.

    --plugins=examples.rotation            import the module (its top level calls register_layer)
    --plugins=mypkg.layers:register        import it, then call register() (no arguments)

A run records its plugins in its config (`TrainConfig.plugins`), and every place that builds a
run's network loads them first (`train.model_config`), so a resume, a sweep's re-exec under the
watchdog, a Ray worker and a table all find the layer again. A module is found on sys.path: the
current directory when run with `python -m`, or an installed package.
"""
from __future__ import annotations

import importlib

from ssm_bench import failures
from ssm_bench import registry
from ssm_bench import theory
from ssm_bench.config import ConfigError, canonical_plugins


class PluginError(ValueError):
  """A plugin that cannot be imported or registered; the message is one line."""


_loaded: set[str] = set()


def load(text: str) -> tuple[str, ...]:
  """Import every plugin of a comma list (each once per process); returns the entries."""
  try:
    entries = tuple(e for e in canonical_plugins(text).split(",") if e)
  except ConfigError as e:
    raise PluginError(str(e)) from None
  for entry in entries:
    if entry in _loaded:
      continue
    module_name, _, attr = entry.partition(":")
    try:
      module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
      if e.name and module_name.startswith(e.name):  # the plugin itself, not one of its imports
        raise PluginError(f"cannot import plugin {module_name!r}: no such module on the path "
                          "(run from the directory that holds it, or install its package)") from None
      raise PluginError(f"plugin {module_name!r} failed on import: {failures.one_line(e)}") from None
    except (registry.LayerError, theory.TheoryError) as e:
      raise PluginError(f"plugin {module_name!r}: {e}") from None
    except Exception as e:  # the plugin's own code
      raise PluginError(f"plugin {module_name!r} failed on import: {failures.one_line(e)}") from None
    if attr:
      fn = getattr(module, attr, None)
      if not callable(fn):
        raise PluginError(f"plugin module {module_name!r} has no function {attr!r}"
                          + ("" if fn is None else f" ({attr} is not callable)"))
      try:
        fn()
      except (registry.LayerError, theory.TheoryError) as e:
        raise PluginError(f"plugin {entry!r}: {e}") from None
      except Exception as e:
        raise PluginError(f"plugin {entry!r} failed: {failures.one_line(e)}") from None
    _loaded.add(entry)
  return entries


def loaded() -> tuple[str, ...]:
  """The plugin entries this process has loaded, in sorted order."""
  return tuple(sorted(_loaded))


def try_load(text: str) -> str:
  """load(), but a failure is returned as its one-line reason ('' when all loaded): for tables,
  which show a layer they cannot find as `?` rather than fail."""
  try:
    load(text)
    return ""
  except PluginError as e:
    return str(e)
