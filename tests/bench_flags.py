"""What the bench's test modules share: small bench flags for the whole module, and a tiny run."""
from absl import flags
import pytest

from launch import bench
from ssm_bench.config import PRESETS, TrainConfig

TINY = TrainConfig(**{**PRESETS["tiny"], "model": "negmamba", "steps": 5, "log_every": 5,
                      "checkpoint_every": 5})


@pytest.fixture(scope="module", autouse=True)
def small_flags():
  """Imported by a test module: its tests see the bench's flags at a tiny cell."""
  flags.FLAGS.unparse_flags()
  flags.FLAGS(["bench", "--batch=4", "--length=12", "--d_model=8", "--d_state=2", "--reps=1"])
  yield
  flags.FLAGS.unparse_flags()


def run_section_per_models(section, models):
  """`launch.bench --sections=<section> --out=` once per --models value (None: not given)."""
  try:
    flags.FLAGS["out"].parse("")
    flags.FLAGS["sections"].parse(section)
    for value in models:
      if value is None:
        flags.FLAGS["models"].unparse()
      else:
        flags.FLAGS["models"].parse(value)
      bench.main([])
  finally:
    flags.FLAGS["out"].unparse()
    flags.FLAGS["sections"].unparse()
    flags.FLAGS["models"].unparse()
