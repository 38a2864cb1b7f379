"""Sweep progress people can read: tqdm bars with ETA on a terminal, plain lines otherwise.

Two levels: groups of the sweep, and steps inside the group being trained (the local executor
reports steps; a Ray worker reports only when its group ends).
"""
from __future__ import annotations

import sys
import time

from launch import watchdog


class Progress:
  def __init__(self, groups: int, runs: int, enabled: bool = True, stream=None):
    self.stream = stream or sys.stdout
    self.enabled = enabled
    self.bars = enabled and self.stream.isatty()
    self.total_groups, self.total_runs = groups, runs
    self.t0, self.groups_done, self.runs_done = time.time(), 0, 0
    self.step_bar, self._last_line = None, 0.0
    if self.bars:
      from tqdm import tqdm
      self.group_bar = tqdm(total=groups, desc="groups", unit="group", position=0,
                            file=self.stream, dynamic_ncols=True)

  def start_group(self, name: str, runs: int, steps: int):
    """Called before a group trains (local executor only)."""
    watchdog.beat()
    if self.bars:
      from tqdm import tqdm
      if self.step_bar is not None:
        self.step_bar.close()
      self.step_bar = tqdm(total=steps, desc=f"{name} ({runs} runs)", unit="step", position=1,
                           leave=False, file=self.stream, dynamic_ncols=True)
    self._group, self._steps = name, steps

  def step(self, step: int):
    """Steps done in the current group (a resumed group starts past 0)."""
    watchdog.beat()
    if self.bars and self.step_bar is not None:
      self.step_bar.update(step - self.step_bar.n)
    elif self.enabled and time.time() - self._last_line > 30:  # a plain line twice a minute
      self._last_line = time.time()
      print(f"  {self._group}: step {step}/{self._steps}", file=self.stream, flush=True)

  def drop(self, groups: int, runs: int):
    """Groups and runs the sweep will not train after all (a staged sweep's skipped runs)."""
    self.total_groups -= groups
    self.total_runs -= runs
    if self.bars and groups:
      self.group_bar.total = self.total_groups
      self.group_bar.refresh()

  def add_groups(self, groups: int):
    """A group split to fit the device trains as this many more programs."""
    self.drop(-groups, 0)

  def group_done(self, runs: int):
    watchdog.beat()
    self.groups_done += 1
    self.runs_done += runs
    if not self.enabled:
      return
    if self.bars:
      self.group_bar.update(1)
      return
    elapsed = time.time() - self.t0
    left = self.total_groups - self.groups_done
    eta = elapsed / self.groups_done * left
    print(f"[{self.groups_done}/{self.total_groups} groups, {self.runs_done}/{self.total_runs} "
          f"runs] {elapsed:.0f}s elapsed, ETA {eta:.0f}s", file=self.stream, flush=True)

  def close(self):
    if self.bars:
      if self.step_bar is not None:
        self.step_bar.close()
      self.group_bar.close()
