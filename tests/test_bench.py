"""Every benchmarked variant computes what its reference computes (times are not asserted)."""
from absl import flags
import pytest

from launch import bench
from ssm_bench.config import TrainConfig

TINY = TrainConfig(task="C2", model="negmamba", d_model=8, d_state=2, batch_size=8, steps=5,
                   log_every=5, checkpoint_every=5, conv_kernel=0)


@pytest.fixture(scope="module", autouse=True)
def small_flags():
  flags.FLAGS.unparse_flags()
  flags.FLAGS(["bench", "--batch=4", "--length=12", "--d_model=8", "--d_state=2", "--reps=1"])
  yield
  flags.FLAGS.unparse_flags()


def test_step_timings_are_checked_across_scan_methods():
  # one real and one complex layer; tests/test_models.py checks that every
  # model gives the same output under both methods
  rows = bench.bench_step(["negmamba", "aussm"], reps=1)
  for row in rows:
    assert row["all_match"], f"{row['model']}: scan methods give different parameters after a step"
    assert row["fastest"] in ("sequential", "associative")


def test_scan_methods_match_and_floor_is_reported():
  out = bench.bench_scan(reps=1)
  assert all(m["matches_reference"] for m in out["methods"])
  assert all(m["fraction_of_floor"] > 0 for m in out["methods"])


def test_train_many_matches_separate_runs():
  out = bench.bench_train_many(reps=1, base=TINY)
  assert [r["K"] for r in out["rows"]] == [1, 9, 27]
  assert all(r["matches_separate"] for r in out["rows"])


def test_one_pass_eval_matches_per_length_eval():
  out = bench.bench_eval(reps=1, cfg=TINY, num_seqs=4, grid=(20, 500, 1000))
  assert out["matches_per_length"]


def test_sampling_section_runs():
  out = bench.bench_sampling(reps=1)
  assert out["sample_ms"] > 0 and out["smallest_step_ms"] > 0
