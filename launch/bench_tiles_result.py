"""What a tile section found (launch.bench_tiles, bench_chunked_tiles, bench_eval_tiles): its
best tiles made the kernels' defaults for the rest of the process (`--apply_tiles`), and its
rows and best lines rendered as the bench prints them."""
from __future__ import annotations

import importlib

from launch import bench_eval_tiles
from ssm_bench.scan import pallas


# The time-parallel kernels' entries in a result's "best": their module, and each setting the
# sweep chose besides the tiles as (the module's dict it goes into, its default)
TIME_PARALLEL = {"parallel": ("pallas_parallel", {"time_major": ("TIME_MAJOR", False),
                                                  "blocks": ("CHANNEL_BLOCKS", 1)}),
                 "chunked": ("pallas_chunked", {"blocks": ("CHANNEL_BLOCKS", 1),
                                                "forward_loop": ("FORWARD_LOOP", "states"),
                                                "loop": ("BACKWARD_LOOP", "states"),
                                                "steps": ("STEPS", (8, 16)),
                                                "per_pass": ("PASS", ("one", "one"))})}


def apply(result: dict) -> dict:
  """Make the best tiles of a tile section's result (`TILE_SECTIONS` in launch.bench) the
  kernels' defaults for the rest of this process (`--apply_tiles`: the sections after it time
  what the sweep found, in the same device call); returns what was set, per module and kind."""
  applied = {}
  for kind, b in result["best"].items():
    if kind == "evaluation":
      applied.update(bench_eval_tiles.apply(b))
      continue
    if kind in TIME_PARALLEL:
      name, settings = TIME_PARALLEL[kind]
      module = importlib.import_module(f"ssm_bench.scan.{name}")
      for k, p in b.items():
        if not p.get("channels_first_matches", True):  # wrong as the layers read it: kept out
          applied.setdefault(name, {})[k] = "not applied: wrong on channels-first factors"
          continue
        # a chunked forward that loops over time keeps its tile apart from the state loop's
        forward = "FORWARD_BY_TIME" if p.get("forward_loop") == "time" else "FORWARD"
        getattr(module, forward)[k], module.BACKWARD[k] = (tuple(p["forward"]),
                                                           tuple(p["backward"]))
        chosen = applied.setdefault(name, {})[k] = {"forward": p["forward"],
                                                    "backward": p["backward"]}
        for field, (attr, default) in settings.items():
          getattr(module, attr)[k] = chosen[field] = p.get(field, default)
      continue
    pallas.FORWARD[kind], pallas.BACKWARD[kind] = tuple(b["forward"]), tuple(b["backward"])
    pallas.CHUNK[kind], pallas.PREFETCH[kind] = b["chunk"], b["prefetch"]
    if kind == "real":  # the joined reductions exist in the real kind's backward only
      pallas.JOIN_REDUCTIONS = b["join"]
    applied.setdefault("pallas", {})[kind] = {k: b[k] for k in ("forward", "backward", "chunk",
                                                                 "prefetch", "join")}
  return applied


def _of(best: dict) -> str:
  """The family a best tile was timed on (results before 2026-11-26 do not say)."""
  return f" ({best['family']})" if "family" in best else ""


def _cf(best: dict) -> str:
  """The best pair on channels-first factors (results before 2026-11-27 were not checked)."""
  if "channels_first_matches" not in best:
    return ""
  return (f"; channels first {best['channels_first_rel_err']}" if best["channels_first_matches"]
          else f"; WRONG on channels-first factors ({best['channels_first_rel_err']}): not applied")


def render(result: dict) -> str:
  lines = [result.get("regime") or f"tiles (ms per run, {result['k']} runs under vmap; tile = "
           "channels per program, warps)"]
  width = max((len(r["kernel"]) for r in result["rows"]), default=0)
  for r in result["rows"]:
    what = r.get("ms_per_run", r.get("error"))
    ok = "" if r.get("matches_reference", True) else f"  MISMATCH {r['rel_err']}"
    chunk = "" if r["chunk"] is None else f" chunk {r['chunk']}"
    lines.append(f"  {r['kind']:5s} {r['kernel']:{width}s} {tuple(r['tile'])}{chunk}: {what}{ok}")
  for kind, b in result["best"].items():
    if kind == "evaluation":
      lines += bench_eval_tiles.render_best(b)
      continue
    if kind == "chunked":
      for k, p in b.items():
        by_time = p.get("forward_loop") == "time"  # its tile goes to FORWARD_BY_TIME
        lines.append(f"  best chunked {k}{_of(p)}: pallas_chunked.FORWARD"
                     f"{'_BY_TIME' if by_time else ''} {tuple(p['forward'])}, "
                     f"BACKWARD {tuple(p['backward'])}"
                     + (f", CHANNEL_BLOCKS {p['blocks']}" if p.get("blocks", 1) > 1 else "")
                     + (", FORWARD_LOOP 'time'" if by_time else "")
                     + (f", BACKWARD_LOOP {p['loop']!r}" if "loop" in p else "")
                     + f" ({p['fwd_bwd_ms_per_run']} ms per run, forward + backward; blocks "
                     f"per program {p.get('blocks_fwd_bwd_ms_per_run')}"
                     + (f"; channel loop {p['channel_loop_fwd_bwd_ms_per_run']}"
                        if p.get("channel_loop_fwd_bwd_ms_per_run") else "")
                     + (f", STEPS {tuple(p['steps'])}" if "steps" in p else "")
                     + (f"; L = 8: {p['steps_8_fwd_bwd_ms_per_run']}"
                        if "steps_8_fwd_bwd_ms_per_run" in p else "")
                     + (f"; per pass, forward {p['per_pass_fwd_ms_per_run']}, forward + "
                        f"backward {p['per_pass_fwd_bwd_ms_per_run']}: PASS "
                        f"{tuple(p['per_pass'])}" if "per_pass" in p else "")
                     + (f"; pallas_parallel {p['pallas_parallel_fwd_bwd_ms_per_run']}"
                        if "pallas_parallel_fwd_bwd_ms_per_run" in p else "") + f"{_cf(p)})")
      continue
    if kind == "parallel":
      for k, p in b.items():
        lines.append(f"  best parallel {k}{_of(p)}: pallas_parallel.FORWARD "
                     f"{tuple(p['forward'])}, BACKWARD {tuple(p['backward'])} "
                     + (f", TIME_MAJOR {p['time_major']!r}" if p.get("time_major") else "")
                     + (f", CHANNEL_BLOCKS {p['blocks']}" if p.get("blocks", 1) > 1 else "")
                     + f" ({p['fwd_bwd_ms_per_run']} ms per run, forward + backward; rows "
                     f"time-major {p.get('rows_time_major_fwd_bwd_ms_per_run')}; time-major "
                     f"{p.get('time_major_fwd_bwd_ms_per_run')}; blocks per program "
                     f"{p.get('blocks_fwd_bwd_ms_per_run')}; "
                     f"pallas {p['pallas_fwd_bwd_ms_per_run']}{_cf(p)})")
      continue
    lines.append(f"  best {kind}{_of(b)}: FORWARD {tuple(b['forward'])}, "
                 f"BACKWARD {tuple(b['backward'])}, CHUNK {b['chunk']}"
                 + (", JOIN_REDUCTIONS" if b["join"] else "")
                 + f", PREFETCH {b['prefetch']} ({b['fwd_bwd_ms_per_run']} ms per run, "
                 "forward + backward)")
  if result.get("applied"):
    lines.append(f"  applied for the rest of this run: {result['applied']}")
  return "\n".join(lines)

