"""What the bench's test modules share: small bench flags for the whole module, and a tiny run."""
from absl import flags
import pytest

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
