"""Every TrainConfig field is a flag; sweeps take --preset and --config.<field> overrides."""
import dataclasses
import json
import os
import subprocess
import sys

from launch import sweeps
from ssm_bench import config
from ssm_bench.paper import TABLE2_DEPTHS, TABLE2_GROUPS, TABLE2_MODELS


def test_shape_fields_are_every_field_but_the_traced_ones():
  names = [f.name for f in dataclasses.fields(config.TrainConfig)]
  assert set(config.SHAPE_FIELDS) == set(names) - {"lr", "schedule", "seed"}


def test_overrides_reach_every_config_and_summary(tmp_path):
  out = subprocess.run([sys.executable, "-m", "launch.sweep", "--sweep=tiny", f"--workdir={tmp_path}",
                        "--config.steps=30", "--config.weight_decay=0.05", "--config.eval_seqs=16",
                        "--config.curriculum_patience=2", "--quiet"],
                       capture_output=True, text=True, timeout=600)
  assert out.returncode == 0, out.stderr
  names = os.listdir(tmp_path)
  assert len(names) == 4
  for name in names:
    for f in ("config.json", "summary.json"):
      data = json.load(open(tmp_path / name / f))
      cfg = data.get("config", data)
      assert (cfg["steps"], cfg["weight_decay"], cfg["eval_seqs"], cfg["curriculum_patience"]) == (
          30, 0.05, 16, 2), f"{name}/{f}: overrides missing: {cfg}"
    assert json.load(open(tmp_path / name / "summary.json"))["steps"] == 30


def test_table2_lite_covers_all_90_cells():
  cfgs = sweeps.expand("table2_lite", config.PRESETS["paper"])
  cells = {(c.task, c.model, c.depth) for c in cfgs}
  assert cells == {(g, m, d) for g in TABLE2_GROUPS for m in TABLE2_MODELS for d in TABLE2_DEPTHS}
  assert len(cells) == 90 and len(cfgs) == 360
