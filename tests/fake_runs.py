"""Finished runs written by hand: for tests of what a sweep does with earlier results."""
from ssm_bench import evaluation
from ssm_bench import runs


def finish_with(cfg, run_dir, max_len, status="done"):
  """A summary as if cfg had trained in run_dir and reached max_len (on every position and on
  whole strings, as the curves say)."""
  curve = {str(n): float(n <= max_len) for n in evaluation.grid(cfg.eval_length)}
  runs.rundir.write_summary(cfg, run_dir, {"status": status, "max_len": max_len,
                                           "steps": cfg.steps, "acc_curve": curve,
                                           "seq_acc_curve": curve}, 1.0)


def finish_with_seq_acc(cfg, run_dir, seq_acc):
  """A summary with this sequence accuracy at the training length (what the illusion sweep's
  stages read) and no extrapolation."""
  curve = {str(n): 0.0 for n in evaluation.grid(cfg.eval_length)}
  runs.rundir.write_summary(cfg, run_dir, {"status": "done", "max_len": 0, "steps": cfg.steps,
                                           "acc_curve": curve, "seq_acc_curve": curve,
                                           "seq_acc_at_train_length": seq_acc}, 1.0)
  assert runs.is_finished(run_dir), "the fake summary is not a valid finished one"
