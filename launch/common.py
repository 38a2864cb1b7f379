"""Helpers shared by the absl entry points: one-line errors, JSON output."""
from __future__ import annotations

import json
import logging
import sys

# jax logs its search for TPU/GPU plugins at INFO, which absl would print on every CPU start.
logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)


class UsageError(Exception):
  """Bad input from the command line: printed as one line, exit status 2."""


def run_main(main):
  """absl.app.run(main), turning UsageError and known ValueErrors into a one-line error."""
  from absl import app

  def wrapped(argv):
    from absl import logging as absl_logging
    absl_logging.set_verbosity(absl_logging.WARNING)  # orbax logs every checkpoint at INFO
    try:
      return main(argv)
    except UsageError as e:
      print(f"error: {e}", file=sys.stderr)
      sys.exit(2)

  app.run(wrapped)


def print_json(obj):
  print(json.dumps(obj, sort_keys=False))
