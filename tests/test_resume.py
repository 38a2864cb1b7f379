"""Resume and summary defects that once lost finished work or wrote a wrong number."""
import numpy as np
import pytest

from ssm_bench import evaluation
from ssm_bench import rundir
from ssm_bench import runs
from ssm_bench import train
from ssm_bench.config import ConfigError, PRESETS, TrainConfig

TINY = TrainConfig(**{**PRESETS["tiny"], "steps": 40, "checkpoint_every": 20})


@pytest.mark.parametrize("steps", [40, 30])  # the last step a checkpoint step, or not
def test_run_killed_after_its_last_checkpoint_finishes_on_relaunch(tmp_path, steps):
  d, cfg = str(tmp_path / "run"), TINY.replace(steps=steps)

  def kill_at_the_end(step):
    if step == cfg.steps:  # the final checkpoint is saved; evaluation has not run
      raise KeyboardInterrupt
  with pytest.raises(KeyboardInterrupt):
    runs.train_group([cfg], [d], on_chunk=kill_at_the_end)
  chunks = []
  [s] = runs.train_group([cfg], [d], on_chunk=chunks.append)
  assert chunks == [], f"steps={steps}: training resumed, the last step was not checkpointed"
  assert s["status"] == "done", f"relaunch ended {s['status']}: {s.get('error')}"
  rows = rundir.read_metrics(d)
  assert [r["step"] for r in rows] == list(range(10, steps + 1, 10))
  assert s["steps"] == steps and (s["final_train_acc"], s["final_loss"]) == (
      rows[-1]["acc"], rows[-1]["loss"]), f"not the last logged row's: {s['final_loss']}, {rows}"


def test_tensorboard_drops_the_points_logged_past_the_checkpoint_resumed_from(tmp_path):
  """Killed at step 30 (checkpoint at 20): the old event file holds step 30, the resumed process
  logs it again; TensorBoard must show each step once."""
  from tensorboard.backend.event_processing import event_accumulator
  d = str(tmp_path / "run")

  def kill(step):
    if step == 30:
      raise KeyboardInterrupt
  with pytest.raises(KeyboardInterrupt):
    runs.train_group([TINY], [d], on_chunk=kill)
  runs.train_group([TINY], [d])
  acc = event_accumulator.EventAccumulator(d)
  acc.Reload()
  steps = [e.step for e in acc.Scalars("train/loss")]
  assert steps == [10, 20, 30, 40], f"train/loss logged at steps {steps}"


def test_a_group_mates_error_keeps_the_results_already_written(tmp_path, monkeypatch):
  cfgs = [TINY.replace(lr=lr) for lr in (1e-3, 3e-3)]
  dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
  real, calls = evaluation.curves, []

  def fail_on_second_run(correct):
    calls.append(1)
    if len(calls) == 2:
      raise RuntimeError("evaluation ran out of memory")
    return real(correct)
  monkeypatch.setattr(evaluation, "curves", fail_on_second_run)
  with pytest.raises(RuntimeError):
    runs.train_group(cfgs, dirs)
  first, second = runs.read_summary(dirs[0]), runs.read_summary(dirs[1])
  assert first["status"] == "done", "a finished run was overwritten by its group-mate's failure"
  assert second["status"] == "failed" and "out of memory" in second["error"]
  monkeypatch.setattr(evaluation, "curves", real)
  again = runs.train_group(cfgs, dirs)
  assert [s["status"] for s in again] == ["done", "done"]
  assert again[0]["finished_at"] == first["finished_at"], "the finished run was redone"


def test_acc_at_train_length_reads_the_length_the_curriculum_reached(tmp_path, monkeypatch):
  cfg = TINY.replace(curriculum_threshold=2.0, train_length=8)  # never grows: stays at 2
  per_pos = np.arange(1, evaluation.EVAL_LENGTH + 1) / 1e4
  monkeypatch.setattr(evaluation, "curves", lambda correct: (per_pos, per_pos))
  [s] = runs.train_group([cfg], [str(tmp_path / "run")])
  assert s["final_train_length"] == 2
  assert s["acc_at_train_length"] == pytest.approx(per_pos[1]), (
      f"read position {s['acc_at_train_length'] * 1e4:.0f}, not the reached length 2")
  assert s["seq_acc_at_train_length"] == pytest.approx(per_pos[1]), (
      f"sequence accuracy read at {s['seq_acc_at_train_length'] * 1e4:.0f}, not at length 2")


def test_analytic_init_records_the_construction_it_trains():
  asked = TrainConfig(task="C6", model="simple_aussm", init_from_analytic=0.0)
  with pytest.raises(ConfigError, match="norm='none'"):
    train.Trainer(asked)  # layernorm/gelu/d_model 128 would be recorded but not trained
  cfg = train.analytic_config(asked)
  mcfg = train.model_config(cfg)
  assert (cfg.norm, cfg.activation, cfg.d_model) == (mcfg.norm, mcfg.activation, mcfg.d_model)
  assert cfg.norm == "none" and cfg.model == "simple_aussm" and cfg.depth == 1
  # the run's numerics are its own, not the construction's defaults: a scan method and a
  # matmul precision asked for are what the network computes with
  asked = asked.replace(scan_method="sequential", matmul_precision="float32")
  mcfg = train.model_config(train.analytic_config(asked))
  assert (mcfg.scan_method, mcfg.matmul_precision) == ("sequential", "float32"), mcfg
