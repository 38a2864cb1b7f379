"""Helpers shared by the absl entry points: one-line errors, JSON output."""
from __future__ import annotations

import json
import logging
import os
import sys

from launch import interrupts

# jax logs its search for TPU/GPU plugins at INFO, which absl would print on every CPU start.
logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)


# Every entry point takes --plugins (defined once: entry points are imported together in tests).
from absl import flags as _flags  # noqa: E402
PLUGINS = _flags.DEFINE_string(
    "plugins", "", "Comma list of modules that register layers, e.g. examples.rotation or "
    "mypkg.layers:register (train and sweep record it in each run's config).")
# --target for the bench and the sweep alike, for the same reason
TARGET = _flags.DEFINE_string(
    "target", "", "A GPU of launch/gpu_targets to compile for without one (jax's CUDA plugin): "
    "launch.bench's compiled and registers sections (registers default: sm_90; the others this "
    "machine's device), launch.sweep's --dry_run (its programs and, unless --memory_gb, 75% of "
    "that GPU's memory).")


def load_plugins(extra: str = "") -> str:
  """Import --plugins (and `extra`); a bad one is a one-line UsageError. Returns the list."""
  from ssm_bench import plugins
  from ssm_bench.config import ConfigError, canonical_plugins
  try:
    text = canonical_plugins(",".join(p for p in (PLUGINS.value, extra) if p))
    plugins.load(text)
  except (ConfigError, plugins.PluginError) as e:
    raise UsageError(str(e)) from None
  return text


INTERRUPTED = interrupts.INTERRUPTED


class UsageError(Exception):
  """Bad input from the command line: printed as one line, exit status 2."""


def fail(message: str):
  """The one error convention of every entry point: `error: ...` on stderr, status 2."""
  print(f"error: {message}", file=sys.stderr)
  sys.exit(2)


# An entry point's pointers for flags users reach for that it does not have (flag name -> the
# flag that does it): absl's "did you mean" only finds similar spellings.
FLAG_HINTS: dict[str, str] = {}


def _parse_flags(argv):
  """absl's parser, but a bad flag is one `error:` line with status 2 (absl: two lines, 1)."""
  from absl import flags
  from launch import config_flags
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    name = getattr(e, "flagname", None) or ""
    hint = FLAG_HINTS.get(name)
    if not hint and name and f"{config_flags.PREFIX}{name}" in flags.FLAGS:
      # launch.train's short spelling (--steps, --layer_kwargs) given to an entry point that
      # takes config fields as --config.<field> only
      hint = f"this command spells it --{config_flags.PREFIX}{name}=VALUE"
    fail(f"{e}; {hint}" if hint else f"{e}; see --help")


def run_main(main):
  """absl.app.run(main), turning flag errors and UsageError into a one-line error."""
  from absl import app

  def wrapped(argv):
    from absl import logging as absl_logging
    from ssm_bench.theory import TheoryError
    absl_logging.set_verbosity(absl_logging.WARNING)  # orbax logs every checkpoint at INFO
    interrupts.install()  # (done at `python -m launch.X`'s import already; here for others)
    try:
      interrupts.arm()  # a Ctrl-C noted while the modules imported stops the command here
      rc = main(argv)
      sys.stdout.flush()  # here, so that a closed pipe is caught below, not at teardown
      return rc
    except UsageError as e:
      fail(str(e))
    except TheoryError as e:  # a plugin's theory class whose rule misbehaved where it was read
      fail(str(e))
    except BrokenPipeError:
      # the reader stopped reading (`| head`): as a shell tool ends, without a traceback, and
      # without the interpreter's flush at exit failing on the same pipe
      os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
      sys.exit(141)  # 128 + SIGPIPE
    except MemoryError as e:  # an allocation NumPy could not make (a construction's tables)
      first = str(e).splitlines()[0] if str(e) else type(e).__name__
      fail(f"out of memory ({first}): ask for less at once (a smaller group, length or batch)")
    except Exception as e:  # an allocation XLA could not make: one line, not a traceback
      first = str(e).splitlines()[0] if str(e) else ""
      if not first.startswith("RESOURCE_EXHAUSTED"):
        raise
      fail(f"out of memory ({first.removeprefix('RESOURCE_EXHAUSTED: ')}): ask for less at "
           "once (fewer sequences per chunk, a shorter length, a smaller batch or width)")
    except KeyboardInterrupt:
      # Ctrl-C is how a sweep is stopped: finished runs and checkpoints are on disk already.
      print(INTERRUPTED, file=sys.stderr)
      sys.stdout.flush()
      sys.stderr.flush()
      # Exit without the interpreter's teardown: with XLA's threads still busy (a Ctrl-C during
      # compilation) it crashed with SIGSEGV after the line above in 4 of 8 tries here.
      os._exit(130)

  app.run(wrapped, flags_parser=_parse_flags)


def group_names(flag: str, names, also: str = "") -> tuple:
  """`names` in order, once each, every one a group name; else one UsageError for the flag
  naming the grammar (and `also`, e.g. the profile's own groups)."""
  from tasks import groups
  if not names:
    raise UsageError(f"{flag}: no group given; {groups.GRAMMAR}{also}")
  for name in names:
    try:
      groups.get_group(name)
    except groups.GroupError as e:
      raise UsageError(f"{flag}: {e}{also}") from None
  return tuple(dict.fromkeys(names))


def enable_compilation_cache():
  """Persist compiled programs across processes: a relaunched sweep or a resumed run skips
  recompiling its shape groups. SSM_BENCH_CACHE=off turns it off; any other value is the path.
  Programs that compile in under SSM_BENCH_CACHE_MIN_S seconds (0.5) are not stored: the tests
  set 0, as their many launches recompile the same small programs (BUILD_NOTES, "Tests and CI")."""
  path = os.environ.get("SSM_BENCH_CACHE", os.path.expanduser("~/.cache/ssm-bench/xla"))
  if path == "off":
    return
  import jax
  jax.config.update("jax_compilation_cache_dir", path)
  min_s = os.environ.get("SSM_BENCH_CACHE_MIN_S", "0.5")
  try:
    min_s = float(min_s)
  except ValueError:
    raise UsageError(f"SSM_BENCH_CACHE_MIN_S={min_s!r}: give a number of seconds (0.5 by default)")
  jax.config.update("jax_persistent_cache_min_compile_time_secs", min_s)


def progress(line: str):
  """A progress line: on stderr, so stdout stays the command's result (`--json | jq` works)."""
  print(line, file=sys.stderr, flush=True)


def print_json(obj):
  print(json.dumps(obj, sort_keys=False))
