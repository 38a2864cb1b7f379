"""Timing and memory of one compiled program: what every benchmark section reports."""
from __future__ import annotations

import statistics
import time

import jax


def memory(compiled) -> dict:
  """XLA's estimate of the compiled program's device memory, and the measured peak if any."""
  out = {}
  try:
    m = compiled.memory_analysis()
    out["estimate_MB"] = round((m.argument_size_in_bytes + m.output_size_in_bytes
                                + m.temp_size_in_bytes - m.alias_size_in_bytes) / 2 ** 20, 1)
  except Exception:  # a backend without the analysis
    pass
  stats = jax.devices()[0].memory_stats() or {}
  if "peak_bytes_in_use" in stats:
    out["peak_MB"] = round(stats["peak_bytes_in_use"] / 2 ** 20, 1)
  return out


def prepare(fn, *args):
  """(compiled program, compile seconds, warm-up output, memory) of jitted fn on args."""
  t = time.perf_counter()
  compiled = fn.lower(*args).compile()
  compile_s = time.perf_counter() - t
  out = jax.block_until_ready(compiled(*args))  # warm-up
  return compiled, compile_s, out, memory(compiled)


def interleaved(calls, reps: int) -> list[float]:
  """Median seconds of each zero-argument call, timed in turn within every repetition, so a
  change in the machine's speed during the measurement (another process, clocks) falls on every
  call alike and their ratios hold (timed one after the other, 5 reps each, two CPU methods of
  equal speed read 1.0 to 1.3 apart on this project's 2-core machine)."""
  times = [[] for _ in calls]
  for _ in range(reps):
    for ts, call in zip(times, calls):
      t = time.perf_counter()
      jax.block_until_ready(call())
      ts.append(time.perf_counter() - t)
  return [statistics.median(ts) for ts in times]


def timed(fn, *args, reps: int):
  """(compile seconds, median run seconds, output, memory): fn is jitted, compiled once here."""
  compiled, compile_s, out, mem = prepare(fn, *args)
  (run_s,) = interleaved([lambda: compiled(*args)], reps)
  return compile_s, run_s, out, mem
