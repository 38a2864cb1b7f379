"""Fitting shape groups to device memory: the splitter on given estimates, and real estimates."""
import json
import re
import subprocess
import sys

import pytest

from ssm_bench import memory
from ssm_bench import scan
from ssm_bench.config import PRESETS, TrainConfig
import launcher

GiB = 2 ** 30
CFGS = [TrainConfig(lr=lr, seed=s) for lr in (1e-4, 1e-3, 1e-2) for s in range(9)]  # 27 runs


def test_a_group_that_fits_stays_whole():
  parts = memory.plan_group(CFGS, 80 * GiB, memory.Estimate(fixed=1 * GiB, per_run=1 * GiB))
  assert [len(p) for p in parts] == [27]


def test_a_group_too_large_is_split_into_the_fewest_near_equal_programs():
  est = memory.Estimate(fixed=1 * GiB, per_run=4.4 * GiB)  # 27 runs: 120 GiB; 14 runs: 62.6 GiB
  parts = memory.plan_group(CFGS, 80 * GiB, est)
  assert [len(p) for p in parts] == [14, 13]
  assert sum(parts, []) == CFGS, "a run was lost or reordered by the split"
  assert all(est.bytes(len(p)) <= 80 * GiB * memory.HEADROOM for p in parts)
  assert [len(p) for p in memory.plan_group(CFGS, 80 * GiB, memory.Estimate(0, 30 * GiB))] == [2] * 13 + [1]
  # 75.6 GiB fits the 80 GiB device but not the 85% of it a plan may use (XLA's estimate is not
  # the peak); 54 GiB of runs plus 20 GiB shared fit neither
  for est in (memory.Estimate(0, 2.8 * GiB), memory.Estimate(20 * GiB, 2 * GiB)):
    assert [len(p) for p in memory.plan_group(CFGS, 80 * GiB, est)] == [14, 13], (
        f"{est}: 27 runs planned as one program past HEADROOM of the device")


def test_a_group_whose_single_run_does_not_fit_is_refused_in_one_line():
  with pytest.raises(memory.DoesNotFit, match=r"one run needs 90.0 GiB, more than 85% of the 80.0 GiB"):
    memory.plan_group(CFGS, 80 * GiB, memory.Estimate(fixed=0, per_run=90 * GiB), name="C2-mamba")


def test_a_group_is_measured_whole_first_and_estimated_only_if_it_does_not_fit(monkeypatch):
  """Training's fit compiles the group's own program (which training then loads from the
  compilation cache) and the K = 1, 2 estimate only for a group that does not fit; --dry_run
  (a report) prints the estimate and compiles nothing else."""
  sizes = []

  devices = []

  def program_bytes(cfg, k, device=None):  # 1 GiB shared + 1 GiB per run
    sizes.append(k)
    devices.append(device)
    return (1 + k) * GiB

  monkeypatch.setattr(memory, "_program_bytes", program_bytes)
  monkeypatch.setattr(memory, "_CACHE", {})
  group = [(CFGS, [f"run{i}" for i in range(27)])]
  out = memory.fit_groups(group, 80 * GiB)
  assert [len(c) for c, _ in out] == [27] and sizes == [27], f"compiled for K = {sizes}"
  sizes.clear()
  out = memory.fit_groups(group, 20 * GiB)  # 28 GiB whole; 17 GiB usable: 14 + 13
  assert sizes == [27, 1, 2], f"compiled for K = {sizes}"
  assert [len(c) for c, _ in out] == [14, 13]
  assert [d for _, ds in out for d in ds] == group[0][1], "a run lost its directory in the split"
  sizes.clear()
  monkeypatch.setattr(memory, "_CACHE", {})
  memory.fit_groups(group, 80 * GiB, report=lambda *a: None)
  assert sizes == [1, 2], f"the dry run compiled for K = {sizes}"
  devices.clear()
  monkeypatch.setattr(memory, "_CACHE", {})
  target = object()  # a compile-only GPU (`launch.sweep --target`)
  memory.fit_groups(group, 20 * GiB, device=target)
  assert len(devices) == 3 and all(d is target for d in devices), (
      f"a program of the plan was compiled for another device than the one planned for: {devices}")


def test_the_plan_keeps_headroom_counts_every_run_and_keys_estimates_by_device(monkeypatch):
  """A whole group fits only within HEADROOM of the device (XLA's estimate is not the peak); a
  program that does not grow from one run to two is planned as K whole programs, never as
  runs that cost nothing; estimates for two devices compiled for (`--target`) are two."""
  compiled = []

  def program_bytes(cfg, k, device=None):
    compiled.append((k, device))
    return (1 + k) * GiB

  monkeypatch.setattr(memory, "_program_bytes", program_bytes)
  monkeypatch.setattr(memory, "_CACHE", {})
  assert not memory.fits_whole(CFGS, 32 * GiB), "28 GiB planned on a 32 GiB device (87.5%)"
  assert memory.fits_whole(CFGS, 33 * GiB)
  a, b = (type("Device", (), {"device_kind": kind})() for kind in ("GPU A", "GPU B"))
  compiled.clear()
  for device in (a, b, a):
    memory.estimate(CFGS[0], device)
  assert [d for _, d in compiled] == [a, a, b, b], (
      f"estimates compiled for {[getattr(d, 'device_kind', d) for _, d in compiled]}: one "
      "device's estimate served another's")
  monkeypatch.setattr(memory, "_program_bytes", lambda cfg, k, device=None: 3 * GiB)
  monkeypatch.setattr(memory, "_CACHE", {})
  est = memory.estimate(CFGS[0])
  assert est.per_run == 3 * GiB and est.bytes(27) >= 27 * 3 * GiB, (
      f"{est}: runs that did not grow the program planned as free")


CACHE_HIT = """
import json, sys
import jax
jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
hits = []
jax.monitoring.register_event_listener(
    lambda event, **kw: hits.append(event) if event.endswith("cache_hits") else None)
from ssm_bench import memory, train
from ssm_bench.config import PRESETS, TrainConfig
cfgs = [TrainConfig(**PRESETS["tiny"], lr=lr) for lr in (1e-3, 3e-3)]
assert memory.fit_groups([(cfgs, ["a", "b"])], 1e12) == [(cfgs, ["a", "b"])]
measured = len(hits)
init_many, chunk_many = train.Trainer(cfgs[0]).compiled()
hp = train.hparams(cfgs)
jax.block_until_ready(chunk_many(init_many(hp), hp))
print(json.dumps({"while_measuring": measured, "training": len(hits) - measured}))
"""


def test_the_program_measured_whole_is_the_one_training_loads_from_the_compilation_cache(tmp_path):
  """fits_whole's compile is not extra work only if training's program is the same one: with
  the persistent cache on, training's first chunk must be a cache hit."""
  out = subprocess.run([sys.executable, "-c", CACHE_HIT, str(tmp_path)], capture_output=True,
                       text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  got = json.loads(out.stdout.strip().splitlines()[-1])
  assert got == {"while_measuring": 0, "training": 1}, (
      f"{got}: training compiled another program than the one measured")


def test_estimate_grows_with_the_state_and_the_group():
  small = TrainConfig(**{**PRESETS["tiny"], "d_state": 2})
  big = small.replace(d_state=16)
  a, b = memory.estimate(small), memory.estimate(big)
  assert b.per_run > a.per_run > 0, (a, b)
  assert b.bytes(27) > b.bytes(1)


def test_dry_run_lists_the_estimate_and_the_split():
  out = launcher.run(["launch.sweep", "--sweep=table2", "--dry_run",
                      "--only=^C2-mamba-L1-n128-", "--config.batch_size=16",
                      "--memory_gb=1"], timeout=600)
  assert out.returncode == 0, out.stderr
  assert "split into" in out.stdout and "GiB per run" in out.stdout, out.stdout[:2000]
  last = out.stdout.strip().splitlines()[-1]
  parts = int(re.search(r"split into (\d+) programs", out.stdout).group(1))
  assert last == f"table2: 27 runs in 1 compiled group; {parts} programs fit 1.0 GiB", (
      f"the count of programs is not the split's {parts}: {last}")
  assert "to plan for a GPU add --target=" in out.stdout and (
      f"--config.scan_method={scan.AUTO['gpu']}" in out.stdout), (
      "the dry run does not say which scan method its estimates are for, nor how to plan for "
      "a GPU")


def test_estimates_are_per_task_size_not_borrowed_from_the_first_task():
  """The cache once keyed every task as C2: S6 (order 720) got C2's estimate when C2 came first."""
  tiny = dict(PRESETS["tiny"], model="mamba")
  small = memory.estimate(TrainConfig(task="C2", **tiny))
  large = memory.estimate(TrainConfig(task="S6", **tiny))
  assert large.bytes(1) > small.bytes(1), (
      f"S6 estimated at {large.bytes(1):.0f} bytes, C2 at {small.bytes(1):.0f}: borrowed")
  assert memory._key(TrainConfig(task="C60", **tiny)) == memory._key(TrainConfig(task="A5", **tiny))


def test_the_evaluation_chunk_is_sized_on_the_program_evaluation_runs(monkeypatch):
  """With a budget, the chunk's compiled program is measured on the function evaluation will
  run, its extra arguments traced (a padded group's class count: then it is the same program,
  which the persistent cache serves again); 1 sequence at a time when nothing fits."""
  import jax
  import numpy as np
  from ssm_bench import train
  cfg = TrainConfig(**{**PRESETS["tiny"], "task": "S3", "pad_order": 12, "eval_seqs": 16,
                       "eval_chunk": 8})
  trainer = train.Trainer(cfg)
  traced = []

  def masked(p, x, order):
    traced.append(order)
    return train.mask_classes(trainer.model.apply(p, x), order)
  args = (np.int32(6),)
  assert memory.eval_chunk(trainer, None, masked, args) == 8 and not traced, (
      "without a budget the configured chunk, nothing compiled")
  assert memory.eval_chunk(trainer, 1e12, masked, args) == 8
  assert traced and all(isinstance(o, jax.core.Tracer) for o in traced), (
      f"sized on another program than evaluation runs: {traced}")
  assert memory.eval_chunk(trainer, 1.0, masked, args) == 1, "nothing fits: one sequence"
  # a chunk's program within the device but past the HEADROOM of it a plan may use
  monkeypatch.setattr(memory, "compiled_bytes", lambda lowered: 0.9 * GiB)
  assert memory.eval_chunk(trainer, 1.0 * GiB, masked, args) == 1, (
      "a chunk planned at 90% of the device, past HEADROOM")


def test_a_padded_group_shares_one_estimate_across_its_tasks():
  """With pad_order (one program per shape across tasks) every task's vocabulary and classes are
  the padded order's, so C2 and S3 at pad 60 share a key, and not the unpadded C2's."""
  tiny = dict(PRESETS["tiny"], model="mamba")
  padded = [memory._key(TrainConfig(task=t, pad_order=60, **tiny)) for t in ("C2", "S3")]
  assert padded[0] == padded[1] and padded[0] != memory._key(TrainConfig(task="C2", **tiny))


def test_the_cpus_memory_is_the_machines_ram():
  import os
  ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  assert memory.device_bytes() == float(ram), (memory.device_bytes(), ram)
