"""The workers section: the same groups trained in one process and in worker processes, wall
time as a speed-up over the first count, the runs' results compared, and the compilation cache
off for both sides and restored after."""
import os
import types

import jax

from launch import bench_workers
from launch import executors
from ssm_bench import runs


def test_workers_section_reports_the_speedup_and_whether_the_runs_agree(monkeypatch):
  monkeypatch.setenv("SSM_BENCH_CACHE", "on")
  cache_before = jax.config.jax_enable_compilation_cache
  now, calls, summaries = [0.0], [], {}
  monkeypatch.setattr(bench_workers, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))

  def local(groups, workers):
    calls.append((workers, os.environ.get("SSM_BENCH_CACHE"),
                  jax.config.jax_enable_compilation_cache))
    for i, (_, dirs) in enumerate(groups):
      for j, d in enumerate(dirs):  # with 2 workers one run ends elsewhere, its loss 1e-3 off
        moved = workers == 2 and (i, j) == (1, 1)
        summaries[d] = {"status": "done", "max_len": 200 if moved else 100,
                        "final_loss": 0.5 + (1e-3 if moved else 0.0)}
    now[0] += 12.0 / workers  # 12 s in one process, 6 s with two workers
    return 0
  monkeypatch.setattr(executors, "local", local)
  monkeypatch.setattr(runs, "read_summary", lambda d: summaries.get(d))
  [row] = bench_workers.bench_workers(["mamba"], workers=(1, 2), steps=10)
  assert [w for w, _, _ in calls] == [1, 2], f"worker counts trained: {calls}"
  assert all(env == "off" and not cfg for _, env, cfg in calls), (
      f"a side compiled with the compilation cache on: {calls}")
  assert os.environ["SSM_BENCH_CACHE"] == "on" and (
      jax.config.jax_enable_compilation_cache == cache_before), "the cache settings were not restored"
  assert (row["wall_s_1"], row["wall_s_2"], row["speedup_2"]) == (12.0, 6.0, 2.0), row
  assert row["groups"] == len(bench_workers.TASKS) and row["steps"] == 10, row
  assert row["same_status_and_max_len"] is False, "a run that ended at another max_len agreed"
  assert abs(row["max_final_loss_diff"] - 1e-3) < 1e-9, row


def test_the_groups_are_the_profiles_abelian_groups_two_rates_each():
  groups = bench_workers.groups_for("negmamba", steps=50)
  assert [[(c.task, c.lr, c.steps, c.model) for c in g] for g in groups] == [
      [(t, lr, 50, "negmamba") for lr in (3e-3, 3e-2)] for t in bench_workers.TASKS], groups
