"""Training at the curriculum's length, not its cap: a few compiled lengths ("buckets").

The curriculum masks the loss past its current length, so every position beyond it is computed
for nothing, and a run that stays at length 4 pays for 60 (on a CPU a step costs about in
proportion to its length: results/bench/README.md, "Training at the curriculum's length").
Every layer is causal (a plugin's is checked: `ssm_bench.causality`), so the positions before
the current length compute the same function of the same tokens at any sequence length; a
group may therefore train at the shortest bucket
(8, 16, ... up to half of train_length, then train_length) that holds every length its runs
can reach before the next bucket is chosen. The batches are still drawn at train_length and
cut, so a run sees the same data either way; only the rounding of the sums over positions
differs.

Buckets are chosen between compiled chunks of steps from the runs' curriculum state (length,
streak, step; `reachable` is exact), the chunks short enough (`chunk_steps`: one doubling at
most) that a run whose length is about to grow does not send its group to the cap.
"""
from __future__ import annotations

import numpy as np

SMALLEST = 8  # below this a step is mostly not the sequence (and each bucket is a compile)


def buckets(cfg, backend: str) -> tuple[int, ...]:
  """The lengths a group of cfg's shape compiles its training step at: powers of two from
  SMALLEST up to half of train_length (each bucket is a compile, worth it only where it at least
  halves the step), then train_length; (train_length,) when off. `auto` is on for a CPU, where
  a compile costs a few seconds and a step is slow, and off elsewhere: untimed on a GPU, where
  a group's program compiles in 5-28 s (H200) and its longest run mostly reaches the cap within
  300 steps (BUILD_NOTES)."""
  on = cfg.length_buckets == "on" or (cfg.length_buckets == "auto" and backend == "cpu")
  cap = cfg.train_length
  if not on or cfg.curriculum_start >= cap:
    return (cap,)
  out, b = [], SMALLEST
  while b <= cap // 2:
    out.append(b)
    b *= 2
  return tuple(out) + (cap,)


def chunk_steps(cfg, lengths: tuple[int, ...]) -> int:
  """Steps per compiled chunk: log_every with one bucket; with several, the largest divisor of
  log_every that spans at most patience checks, so one doubling at most: a run one check from
  doubling needs a bucket of twice its length, not four times."""
  if len(lengths) == 1:
    return cfg.log_every
  span = cfg.curriculum_every * cfg.curriculum_patience
  return max(d for d in range(1, cfg.log_every + 1) if cfg.log_every % d == 0 and d <= span)


def reachable(cfg, length, streak, step, diverged_at, steps: int) -> np.ndarray:
  """Per run, the longest curriculum length any of its next `steps` steps can train at. Step i
  checks at its end when (i + 1) is a multiple of curriculum_every, and a doubling there
  reaches step i + 1 on: only the checks of the chunk's first steps - 1 steps count. The first
  doubling comes after patience - streak checks in a row, each next one after patience more;
  a diverged run is frozen."""
  length, streak, step = (np.asarray(v, np.int64) for v in (length, streak, step))
  checks = (step + steps - 1) // cfg.curriculum_every - step // cfg.curriculum_every
  first = cfg.curriculum_patience - streak
  doublings = np.where(checks >= first, 1 + (checks - first) // cfg.curriculum_patience, 0)
  doublings = np.where(np.asarray(diverged_at) >= 0, 0, doublings)
  return np.minimum(length << np.minimum(doublings, 30), cfg.train_length)


def pick(lengths: tuple[int, ...], reach) -> int:
  """The shortest bucket that holds every run's reachable length."""
  longest = int(np.max(reach))
  return next(b for b in lengths if b >= longest)
