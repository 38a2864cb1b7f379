"""TensorBoard event files (ssm_bench/tb.py) as a run writes them: the training scalars, the
accuracy-vs-length curve drawn against the length, and the HParams dashboard's experiment,
session start and session end."""
import time

import pytest
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.plugins.hparams import api_pb2
from tensorboard.plugins.hparams import metadata

from ssm_bench import evaluation
from ssm_bench import runs
from ssm_bench import tb
from test_runs import TINY


def test_a_run_logs_scalars_the_curve_against_length_and_its_hparams_session(tmp_path):
  d = str(tmp_path / "run")
  runs.train_group([TINY], [d])
  acc = event_accumulator.EventAccumulator(d, size_guidance={"scalars": 0, "tensors": 0})
  acc.Reload()
  tags = set(acc.Tags()["scalars"])
  assert {"train/loss", "train/acc", "train/length", "train/lr", "eval/acc_vs_length",
          "eval/max_len"} <= tags, tags
  assert [e.step for e in acc.Scalars("eval/acc_vs_length")] == list(evaluation.GRID), (
      "the accuracy-vs-length curve is not drawn against the length")
  content = acc.PluginTagToContent(metadata.PLUGIN_NAME)
  assert metadata.EXPERIMENT_TAG in content and metadata.SESSION_START_INFO_TAG in content
  start = metadata.parse_session_start_info_plugin_data(content[metadata.SESSION_START_INFO_TAG])
  assert start.hparams["lr"].number_value == pytest.approx(TINY.lr)
  assert start.hparams["model"].string_value == "mamba"
  experiment = metadata.parse_experiment_plugin_data(content[metadata.EXPERIMENT_TAG])
  assert [m.name.tag for m in experiment.metric_infos] == ["eval/max_len"], (
      "the HParams table has no max_len column")
  end = metadata.parse_session_end_info_plugin_data(content[metadata.SESSION_END_INFO_TAG])
  assert end.status == api_pb2.STATUS_SUCCESS, f"a finished run's session ends {end.status}"


def test_tensorboard_ends_a_diverged_runs_session_as_failed(tmp_path):
  """The HParams table marks a run that did not finish (diverged) as failed, not successful."""
  for ok, want in ((True, api_pb2.STATUS_SUCCESS), (False, api_pb2.STATUS_FAILURE)):
    d = str(tmp_path / str(ok))
    w = tb.Writer(d)
    w.end_session(ok)
    w.close()
    acc = event_accumulator.EventAccumulator(d, size_guidance={"tensors": 0})
    acc.Reload()
    content = acc.PluginTagToContent(metadata.PLUGIN_NAME)
    end = metadata.parse_session_end_info_plugin_data(content[metadata.SESSION_END_INFO_TAG])
    assert end.status == want, f"end_session({ok}) wrote status {end.status}"


def test_a_resumed_run_replaces_what_the_earlier_process_logged_past_its_checkpoint(tmp_path):
  """A run killed after logging step 30 but checkpointed at 20 logs 30 again when resumed: the
  restart (a SessionLog START at 21) makes TensorBoard drop the first process's 30, so the curve
  has one point a step, the resumed process's."""
  d = str(tmp_path / "run")
  first = tb.Writer(d)
  for step in (10, 20, 30):
    first.scalars(step, {"train/loss": 1.0})
  first.close()
  # a resumed run is a later process: its file's name (seconds, host, pid, a per-process
  # count) must sort after the first's, which in one process only a later second ensures
  time.sleep(1.05)
  resumed = tb.Writer(d)
  resumed.restart(21)
  resumed.scalars(30, {"train/loss": 0.5})
  resumed.close()
  acc = event_accumulator.EventAccumulator(d, size_guidance={"scalars": 0})
  acc.Reload()
  points = [(e.step, e.value) for e in acc.Scalars("train/loss")]
  assert points == [(10, 1.0), (20, 1.0), (30, 0.5)], (
      f"the earlier process's points past the checkpoint were kept: {points}")
