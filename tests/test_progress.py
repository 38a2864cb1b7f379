"""A sweep's progress lines (launch/progress.py): counts, ETA, and totals that follow what a
sweep actually trains."""
import io

from launch import executors
from launch import progress
from launch import sweep


def test_progress_prints_plain_lines_with_eta_when_not_a_terminal(tmp_path):
  out = io.StringIO()
  p = progress.Progress(2, 4, stream=out)
  p.start_group("C2 mamba x1", 2, 20)
  p.step(10)
  p.group_done(2)
  assert "[1/2 groups, 2/4 runs]" in out.getvalue() and "ETA" in out.getvalue(), out.getvalue()


def test_every_progress_event_touches_the_watchdogs_heartbeat(tmp_path, monkeypatch):
  """The watchdog kills a sweep child whose heartbeat is older than stall_s: a group that
  trains longer than that beats at every chunk of steps, not only at its start and end."""
  import os
  from launch import watchdog
  beat = tmp_path / "heartbeat"
  monkeypatch.setenv(watchdog.ENV, str(beat))
  p = progress.Progress(1, 2, enabled=False)
  for event in (lambda: p.start_group("C2 mamba x1", 2, 20), lambda: p.step(10),
                lambda: p.group_done(2)):
    if beat.exists():
      os.utime(beat, (0, 0))  # as old as a stalled child's
    event()
    assert beat.exists() and beat.stat().st_mtime > 1e9, "a progress event did not beat"


def test_progress_eta_is_the_mean_group_time_times_the_groups_left(monkeypatch):
  """1 of 4 groups done in 30 s: 3 left at 30 s each, ETA 90 s."""
  now = [1000.0]
  monkeypatch.setattr(progress.time, "time", lambda: now[0])
  out = io.StringIO()
  p = progress.Progress(4, 4, stream=out)
  now[0] += 30
  p.group_done(1)
  assert "30s elapsed, ETA 90s" in out.getvalue(), out.getvalue()


def test_progress_totals_shrink_when_a_staged_sweep_skips_runs():
  out = io.StringIO()
  p = progress.Progress(3, 6, stream=out)
  p.drop(1, 2)  # a stage found one group unnecessary
  p.start_group("A5 ids4 x1", 2, 20)
  p.group_done(2)
  assert "[1/2 groups, 2/4 runs]" in out.getvalue(), out.getvalue()


def test_progress_of_a_resumed_group_counts_only_the_runs_it_trains(tmp_path):
  groups = sweep.plan("tiny", str(tmp_path))
  executors.local([([groups[0][0][0]], [groups[0][1][0]])])  # one run of the first group
  out = io.StringIO()
  bar = progress.Progress(2, 3, stream=out)
  executors.local(groups, progress=bar)
  assert "[1/2 groups, 1/3 runs]" in out.getvalue(), f"finished runs counted:\n{out.getvalue()}"
  assert "[2/2 groups, 3/3 runs]" in out.getvalue(), out.getvalue()
