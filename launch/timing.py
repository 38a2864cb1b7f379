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


def timed(fn, *args, reps: int):
  """(compile seconds, median run seconds, output, memory): fn is jitted, compiled once here."""
  t = time.perf_counter()
  compiled = fn.lower(*args).compile()
  compile_s = time.perf_counter() - t
  out = jax.block_until_ready(compiled(*args))  # warm-up
  times = []
  for _ in range(reps):
    t = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    times.append(time.perf_counter() - t)
  return compile_s, statistics.median(times), out, memory(compiled)
