"""The tile sweeps (tiles, parallel_tiles, chunked_tiles, eval_tiles): each tile is checked
against its reference before it is timed, a tile 1% off is never best, the best is what
`--apply_tiles` makes the defaults, and off a GPU a sweep says it needs one (interpret mode here;
the kernels themselves: test_pallas*.py)."""
from absl import flags
import pytest

import jax

from bench_flags import run_section_per_models, small_flags  # noqa: F401 (the module's flags)
from launch import bench
from launch import bench_train_many
from launch import bench_tiles_result
from launch import common

pytestmark = pytest.mark.heavy  # a minute or more in all: scheduled first (conftest.py)

ONE_TILE = {"forward": [(4, 1)], "backward": [(4, 1)]}


def keep_defaults(monkeypatch, *modules):
  """`apply` writes the kernels' defaults (the upper-case dicts of their modules): each is
  replaced by a copy that monkeypatch puts back after the test, so no sweep's choice (a PASS
  timed fastest in interpret mode) leaks into a later test in the same worker."""
  for module in modules:
    for name, value in vars(module).items():
      if name.isupper() and isinstance(value, dict):
        monkeypatch.setattr(module, name, dict(value))


def each_row_faster(monkeypatch):
  """A clock under the tile sweeps that times each row faster than the one before (0.1 s, then
  0.099 s, ...): the last rows of a sweep win wherever they match the reference."""
  from launch import bench_tiles
  clock, timed = iter(range(100, 0, -1)), bench_tiles.timed
  monkeypatch.setattr(bench_tiles, "timed", lambda fn, f, reps: (
      lambda t: (t[0], next(clock) / 1e3) + t[2:])(timed(fn, f, reps=reps)))


def rejects_a_one_percent_error(monkeypatch, module, sweep, rows=None, **kwargs):
  """The sweep again with `module.scan` 1% off: no row (of its first `rows`) matches and none
  is best; off a GPU, the sweep without need_gpu=False refuses to run."""
  real = module.scan
  monkeypatch.setattr(module, "scan", lambda f, **kw: real(f, **kw) * 1.01)
  out = sweep(reps=1, need_gpu=False, **kwargs)
  assert not any(r["matches_reference"] for r in out["rows"][:rows]), "a 1% error passed the check"
  assert out["best"] == {}, "a tile that does not match the reference was called best"
  if jax.default_backend() != "gpu":
    with pytest.raises(common.UsageError, match="needs a GPU"):
      sweep(reps=1, sizes=kwargs["sizes"])


def test_tiles_section_sweeps_each_kernel_checks_each_tile_and_needs_a_gpu(monkeypatch):
  from launch import bench_tiles
  from ssm_bench.scan import pallas
  grid = {"forward": [(4, 2), (8, 1)], "backward": [(4, 1)], "chunk": (8,)}
  tiny = dict(batch=2, length=12, d_model=8, d_state=4)
  real, asked = pallas.scan, []
  monkeypatch.setattr(pallas, "scan", lambda f, **kw: asked.append(kw) or real(f, **kw))
  out = bench_tiles.bench_tiles(reps=1, sizes=tiny, k=2, models=("mamba", "negmamba", "s4d", "rnn"),
                                grid=grid, need_gpu=False)  # interpret mode
  asked_for = lambda want: any(want(kw) for kw in asked)
  assert (asked_for(lambda kw: kw.get("join")) and asked_for(lambda kw: kw.get("prefetch") and
          "backward" in kw) and asked_for(lambda kw: kw.get("prefetch") and "backward" not in kw)
          ), f"joined or prefetched kernels were not asked for: {asked}"
  fastest_fwd = lambda kind: min((r for r in out["rows"] if r["kind"] == kind
                                  and r["kernel"] == "forward"), key=lambda r: r["ms_per_run"])
  assert [(r["kind"], r["kernel"], r["tile"]) for r in out["rows"]] == [
      ("real", "forward", [4, 2]), ("real", "forward", [8, 1]), ("real", "backward", [4, 1]),
      ("real", "backward+join", [4, 1]),  # the real kind's best, reductions joined
      # the best forward tile and the best backward, inputs prefetched
      ("real", "forward+prefetch", fastest_fwd("real")["tile"]),
      ("real", "backward+join+prefetch" if out["best"]["real"]["join"] else "backward+prefetch",
       [4, 1]),
      ("const", "forward", [4, 2]), ("const", "forward", [8, 1]), ("const", "backward", [4, 1]),
      ("const", "forward+prefetch", fastest_fwd("const")["tile"]),
      ("const", "backward+prefetch", [4, 1])]
  assert all(r["matches_reference"] for r in out["rows"]), out["rows"]
  assert set(out["best"]) == {"real", "const"} and out["best"]["real"]["backward"] == [4, 1]
  assert {k: type(b["prefetch"]) for k, b in out["best"].items()} == {"real": bool, "const": bool}
  text = bench_tiles_result.render(out)
  assert "best real (decay): FORWARD" in text and "PREFETCH" in text, text
  rejects_a_one_percent_error(monkeypatch, pallas, bench_tiles.bench_tiles, sizes=tiny, k=2,
                              models=("aussm",), grid=grid)


def test_parallel_tiles_section_checks_each_tile_and_times_pallas_beside_it(monkeypatch):
  """One kind per pass (the kernels themselves: test_pallas_parallel.py): the phase kind's
  sweep, then the real kind's with a 1% error that no tile may pass."""
  from launch import bench_tiles
  from ssm_bench.scan import pallas, pallas_parallel
  grid = {"forward": [(4, 1), (8, 1)], "backward": [(4, 1)]}
  tiny = dict(batch=2, length=12, d_model=8, d_state=4)
  out = bench_tiles.bench_parallel_tiles(reps=1, sizes=tiny, k=2, kinds=("phase",), grid=grid,
                                         need_gpu=False)
  assert [(r["kind"], r["kernel"], r["tile"]) for r in out["rows"]] == [
      ("phase", "forward", [4, 1]), ("phase", "forward", [8, 1]), ("phase", "backward", [4, 1]),
      ("phase", "pallas (step by step)", list(pallas.BACKWARD["phase"])),
      ("phase", "backward, rows time-major", [4, 1]), ("phase", "backward, time-major", [4, 1]),
      ("phase", "backward, 2 blocks", [4, 1]),  # 4 blocks of 4 channels: more than 8
      ("phase", "backward, channels first", [4, 1])], out["rows"]
  assert all(r["matches_reference"] for r in out["rows"]), out["rows"]
  best = out["best"]["parallel"]
  assert set(best) == {"phase"} and best["phase"]["backward"] == [4, 1], best
  assert best["phase"]["pallas_fwd_bwd_ms_per_run"] > 0, best
  per_layout = {False: best["phase"]["fwd_bwd_ms_per_run"],
                "rows": best["phase"]["rows_time_major_fwd_bwd_ms_per_run"],
                True: best["phase"]["time_major_fwd_bwd_ms_per_run"]}
  assert all(ms > 0 for ms in per_layout.values()), f"a layout was not timed: {per_layout}"
  assert best["phase"]["time_major"] == min(per_layout, key=per_layout.get), best
  two_blocks = best["phase"]["blocks_fwd_bwd_ms_per_run"][2]
  assert best["phase"]["blocks"] == (2 if two_blocks < min(per_layout.values()) else 1), best
  assert out["rows"][-2]["blocks"] == 2, "the blocks row did not run with 2 blocks"
  assert best["phase"]["channels_first_matches"], best
  assert "best parallel phase (rotation): pallas_parallel.FORWARD" in bench_tiles_result.render(out)
  rejects_a_one_percent_error(monkeypatch, pallas_parallel, bench_tiles.bench_parallel_tiles,
                              rows=2, sizes=tiny, k=2, kinds=("real",), grid=ONE_TILE)


def test_chunked_tiles_section_checks_each_tile_and_times_pallas_parallel_beside_it(monkeypatch):
  """The phase kind's sweep (the const kind has no chunked kernel: skipped), its best applied
  to pallas_chunked's defaults; then the real kind with a 1% error that no tile may pass."""
  from launch import bench_chunked_tiles
  from ssm_bench.scan import pallas_chunked, pallas_parallel
  grid = {"forward": [(8, 1)], "backward": [(16, 1), (16, 2)]}  # none alike: apply's order
  tiny = dict(batch=2, length=36, d_model=16, d_state=4)
  out = bench_chunked_tiles.bench_chunked_tiles(reps=1, sizes=tiny, k=2, kinds=("phase", "const"),
                                                grid=grid, need_gpu=False)
  timed = {tuple(r["tile"]): r["ms_per_run"] for r in out["rows"][1:3]}
  fastest = min(timed, key=timed.get)  # no 2 blocks of it: more than the 16 channels hold
  best = out["best"]["chunked"]
  at_eight = best["phase"]["steps"] == [8, 9]  # the forward then timed again at L = 8
  assert [(r["kind"], r["kernel"], r["tile"]) for r in out["rows"]] == [
      ("phase", "forward", [8, 1]), ("phase", "backward", [16, 1]), ("phase", "backward", [16, 2]),
      ("phase", "backward, channels first", list(fastest)),
      ("phase", "backward, L = 8", list(fastest)),  # 36 steps: 4 chunks of 9 (2 or 4 fill the
      # warps of either tile), or 8 of 8
      *[("phase", "forward, per pass: one", [8, 1])] * at_eight,
      ("phase", "forward, per pass: ahead", [8, 1]), ("phase", "forward, per pass: two", [8, 1]),
      *[("phase", "backward, per pass: one", list(fastest))] * (
          best["phase"]["per_pass"][0] != "one"),  # its baseline with a faster forward
      ("phase", "backward, per pass: ahead", list(fastest)),
      ("phase", "backward, per pass: two", list(fastest)),
      ("phase", "pallas_parallel", list(pallas_parallel.BACKWARD["phase"]))], out["rows"]
  assert all(r["matches_reference"] for r in out["rows"]), out["rows"]
  assert set(best) == {"phase"} and best["phase"]["pallas_parallel_fwd_bwd_ms_per_run"] > 0, best
  eight = best["phase"]["steps_8_fwd_bwd_ms_per_run"]  # faster: STEPS (8, 9), L = 8
  assert (best["phase"]["steps_per_chunk"], best["phase"]["steps"]) == (
      (8, [8, 9]) if eight < min(timed.values()) else (9, [8, 16])), best
  assert tuple(best["phase"]["backward"]) == fastest, (best, timed)
  two = best["phase"]["blocks_fwd_bwd_ms_per_run"].get(2)
  assert best["phase"]["blocks"] == (2 if two and two < timed[fastest] else 1), best
  assert "best chunked phase (rotation): pallas_chunked.FORWARD" in bench_tiles_result.render(out)
  assert f"STEPS {tuple(best['phase']['steps'])}; L = 8: {eight}" in bench_tiles_result.render(out)
  keep_defaults(monkeypatch, pallas_chunked)
  best["phase"]["blocks"], best["phase"]["steps"] = 2, [8, 9]  # as if they had won: applied
  applied = bench_tiles_result.apply(out)["pallas_chunked"]["phase"]
  assert (pallas_chunked.FORWARD["phase"], pallas_chunked.BACKWARD["phase"],
          pallas_chunked.CHANNEL_BLOCKS["phase"], pallas_chunked.STEPS["phase"]) == (
      tuple(applied["forward"]), tuple(applied["backward"]), applied["blocks"],
      applied["steps"]) == (
      tuple(best["phase"]["forward"]), tuple(best["phase"]["backward"]), 2, [8, 9]), applied
  assert pallas_chunked.steps_for(36, "phase") == 8, "STEPS (8, 9) applied: L = 8 at 36 steps"
  rejects_a_one_percent_error(monkeypatch, pallas_chunked, bench_chunked_tiles.bench_chunked_tiles,
                              rows=2, sizes=tiny, k=2, kinds=("real",), grid=ONE_TILE)


def test_chunked_tiles_sweeps_the_complex_kind_of_a_plugins_layer_with_no_kernel_to_beat(
    monkeypatch):
  """examples/decaying_aussm runs the complex family, which only the chunked kernel reads: its
  models' kind is `complex`, its tiles are checked against the reference and its best rendered,
  with no time-parallel row (that kernel does not read the family)."""
  from launch import bench_chunked_tiles
  from launch import bench_tiles
  from ssm_bench import plugins
  from ssm_bench.scan import pallas_chunked
  plugins.load("examples.decaying_aussm")
  kinds = bench_tiles.kinds_of(["decaying_aussm", "aussm"])
  assert kinds == {"complex": "complex", "phase": "rotation"}, kinds
  keep_defaults(monkeypatch, pallas_chunked)
  tiny = dict(batch=2, length=12, d_model=8, d_state=4)
  out = bench_chunked_tiles.bench_chunked_tiles(reps=1, sizes=tiny, k=2, kinds={"complex":
                                                "complex"}, grid=ONE_TILE, need_gpu=False)
  assert out["rows"] and all(r["kind"] == "complex" and r["matches_reference"]
                             for r in out["rows"]), out["rows"]
  assert "pallas_parallel" not in {r["kernel"] for r in out["rows"]}, out["rows"]
  text = bench_tiles_result.render(out)
  assert "best chunked complex (complex): pallas_chunked.FORWARD" in text, text
  assert "pallas_parallel" not in text.split("best chunked complex")[1], text


def test_chunked_tiles_times_the_channel_loop_and_applies_it_where_it_is_fastest(monkeypatch):
  """The real kind's backward looping over channels (`BACKWARD_LOOP`), each tile checked: with
  the clock making it the fastest, it is best (its tile, 1 block, the channels-first check run
  on it) and `--apply_tiles` makes it the default; so is a forward tile with its own steps per
  chunk, timed after the plain one."""
  from launch import bench_chunked_tiles
  from ssm_bench.scan import pallas_chunked
  tiny = dict(batch=2, length=12, d_model=8, d_state=4)
  grid = dict(ONE_TILE, forward=[(4, 1), (4, 1, 16)], channel_loop=[(8, 2)])
  real, loops = pallas_chunked.scan, []
  monkeypatch.setattr(pallas_chunked, "scan", lambda f, **kw: loops.append(kw.get("loop")) or
                      real(f, **kw))
  each_row_faster(monkeypatch)
  out = bench_chunked_tiles.bench_chunked_tiles(reps=1, sizes=tiny, k=2, kinds=("real",),
                                                grid=grid, need_gpu=False)
  rows = [(r["kernel"], r["tile"], r.get("loop")) for r in out["rows"]]
  assert ("backward, channel loop", [8, 2], "channels") in rows, rows
  assert all(r["matches_reference"] for r in out["rows"]), out["rows"]
  best = out["best"]["chunked"]["real"]
  assert ("forward", [4, 1, 16], None) in rows, rows
  assert (best["loop"], best["backward"], best["blocks"], best["forward"]) == (
      "channels", [8, 2], 1, [4, 1, 16]), best
  assert best["channels_first_matches"] and loops[-2:] == ["channels"] * 2, (best, loops[-4:])
  assert "BACKWARD_LOOP 'channels'" in bench_tiles_result.render(out)
  # timed last, so fastest: two states a pass in the forward, and (the channel loop has no
  # "two") the next channel's inputs read ahead in the backward, after its baseline with that
  # forward
  assert rows[-5:-1] == [("forward, per pass: ahead", [4, 1, 16], None),
                         ("forward, per pass: two", [4, 1, 16], None),
                         ("backward, per pass: one", [8, 2], None),
                         ("backward, per pass: ahead", [8, 2], None)], rows
  assert best["per_pass"] == ["two", "ahead"], best
  assert best["fwd_bwd_ms_per_run"] == best["per_pass_fwd_bwd_ms_per_run"]["ahead"], best
  assert "PASS ('two', 'ahead')" in bench_tiles_result.render(out)
  keep_defaults(monkeypatch, pallas_chunked)
  bench_tiles_result.apply(out)
  assert (pallas_chunked.BACKWARD_LOOP["real"], pallas_chunked.BACKWARD["real"]) == (
      "channels", (8, 2)), "the fastest channel loop was not applied"
  assert tuple(pallas_chunked.PASS["real"]) == ("two", "ahead"), (
      "the faster passes of the kernels' loops were not applied")
  assert pallas_chunked.FORWARD["real"] == (4, 1, 16), "the fastest forward's steps were lost"



def test_chunked_tiles_times_the_forward_that_loops_over_time_and_applies_it(monkeypatch):
  """A forward tile marked "time" (`GRID["forward"]`, the real kind's only) runs the forward
  that loops over time, checked as every tile; with the clock making it the fastest it is best
  (its (channels, warps) and `FORWARD_LOOP` "time", its passes timed as the state loop's are)
  and `--apply_tiles` sets `FORWARD_BY_TIME`, leaving the state loop's tile."""
  from launch import bench_chunked_tiles
  from ssm_bench.scan import pallas_chunked
  time = bench_chunked_tiles.TIME
  assert all(t[-1] != time for t in bench_chunked_tiles.forward_tiles(
      bench_chunked_tiles.GRID, "phase")), "the phase kind was given the time loop's tiles"
  assert (8, 1) in bench_chunked_tiles.forward_tiles(bench_chunked_tiles.GRID, "phase")
  assert any(t[-1] == time for t in bench_chunked_tiles.forward_tiles(
      bench_chunked_tiles.GRID, "real"))
  tiny = dict(batch=2, length=12, d_model=8, d_state=4)
  real, loops = pallas_chunked.scan, []
  monkeypatch.setattr(pallas_chunked, "scan", lambda f, **kw: loops.append(
      kw.get("forward_loop")) or real(f, **kw))
  each_row_faster(monkeypatch)
  grid = dict(ONE_TILE, forward=[(4, 1), (8, 1, time)])
  out = bench_chunked_tiles.bench_chunked_tiles(reps=1, sizes=tiny, k=2, kinds=("real",),
                                                grid=grid, need_gpu=False)
  rows = [(r["kernel"], r["tile"]) for r in out["rows"]]
  assert ("forward", [8, 1, time]) in rows and "time" in loops, (rows, loops)
  assert all(r["matches_reference"] for r in out["rows"]), out["rows"]
  assert [r for r in rows if r[0].startswith("forward, per pass: ")] == [
      ("forward, per pass: ahead", [8, 1, time]), ("forward, per pass: two", [8, 1, time])], rows
  best = out["best"]["chunked"]["real"]
  assert (best["forward"], best["forward_loop"], best["per_pass"][0]) == ([8, 1], time, "two"), best
  text = bench_tiles_result.render(out)
  assert "pallas_chunked.FORWARD_BY_TIME (8, 1), BACKWARD" in text and (
      "FORWARD_LOOP 'time'" in text), text
  keep_defaults(monkeypatch, pallas_chunked)
  state_tile = pallas_chunked.FORWARD["real"]
  bench_tiles_result.apply(out)
  assert (pallas_chunked.FORWARD_LOOP["real"], pallas_chunked.FORWARD_BY_TIME["real"],
          pallas_chunked.FORWARD["real"]) == (time, (8, 1), state_tile), (
      "the time loop's forward was not applied as FORWARD_LOOP and FORWARD_BY_TIME")


def test_a_faster_pass_that_is_wrong_is_never_chosen(monkeypatch):
  """The passes of the kernels' loops (`pallas_chunked.PASS`) are timed after the tiles: with
  every pass but one state 1% off and the clock making them the fastest, their rows say
  MISMATCH and the best keeps one state a pass."""
  from launch import bench_chunked_tiles
  from ssm_bench.scan import pallas_chunked
  tiny = dict(batch=2, length=12, d_model=8, d_state=4)
  real = pallas_chunked.scan

  def wrong(kw):  # per_pass is one pass for both kernels, or a (forward, backward) pair
    passes = kw.get("per_pass") or ()
    return bool(({passes} if isinstance(passes, str) else set(passes)) & {"ahead", "two"})

  monkeypatch.setattr(pallas_chunked, "scan", lambda f, **kw: real(f, **kw) * (
      1.01 if wrong(kw) else 1.0))
  each_row_faster(monkeypatch)
  out = bench_chunked_tiles.bench_chunked_tiles(reps=1, sizes=tiny, k=2, kinds=("real",),
                                                grid=ONE_TILE, need_gpu=False)
  assert out["rows"][0]["ms_per_run"] == 50.0, "0.1 s for 2 runs: 50 ms per run"
  checked = {r["kernel"]: r["matches_reference"] for r in out["rows"]
             if r["kernel"].endswith((": ahead", ": two"))}
  assert {"forward, per pass: ahead", "backward, per pass: two"} <= set(checked), checked
  assert not any(checked.values()), checked
  best = out["best"]["chunked"]["real"]
  assert best["per_pass"] == ["one", "one"], f"a pass 1% off was chosen: {best}"


def test_a_best_pair_wrong_only_on_channels_first_factors_is_reported_and_not_applied(monkeypatch):
  """The sweeps read batch-major factors; the layers hand channels-first ones to the kernels
  (`CHANNELS_FIRST_LAYERS`). A kernel 1% off on those alone passes every batch-major row, and
  the best pair's channels-first check must catch it: reported, and kept out of the defaults."""
  from launch import bench_chunked_tiles
  from ssm_bench.scan import pallas_chunked
  tiny = dict(batch=2, length=12, d_model=8, d_state=4)
  real = pallas_chunked.scan
  monkeypatch.setattr(pallas_chunked, "scan", lambda f, **kw: real(f, **kw) * (
      1.01 if f.channels_first else 1.0))
  out = bench_chunked_tiles.bench_chunked_tiles(reps=1, sizes=tiny, k=2, kinds=("real",),
                                                grid=ONE_TILE, need_gpu=False)
  checked = {r["kernel"]: r["matches_reference"] for r in out["rows"]}
  assert checked["forward"] and checked["backward"] and not checked["backward, channels first"], (
      f"the channels-first check did not catch a kernel wrong on those factors alone: {checked}")
  best = out["best"]["chunked"]["real"]
  assert best["channels_first_matches"] is False, best
  assert "WRONG on channels-first factors" in bench_tiles_result.render(out)
  keep_defaults(monkeypatch, pallas_chunked)
  for name in ("FORWARD", "BACKWARD", "CHANNEL_BLOCKS"):
    monkeypatch.setattr(pallas_chunked, name, {"real": (99, 9), "phase": (99, 9)})
  assert "not applied" in bench_tiles_result.apply(out)["pallas_chunked"]["real"]
  assert pallas_chunked.FORWARD["real"] == (99, 9), "a pair wrong as the layers read it was applied"


def test_eval_tiles_section_times_the_step_by_step_forward_in_evaluations_regime(monkeypatch):
  """One run (no run axis), forward only, evaluation's sizes unless given: every forward tile
  at the kind's chunk, then the fastest with each chunk, prefetched or not (the pair already
  timed once); the fastest matching row is best and `--apply_tiles` makes it the default."""
  from launch import bench_eval_tiles, bench_tiles
  from ssm_bench.config import TrainConfig
  from ssm_bench.scan import pallas
  cfg = TrainConfig()
  assert bench_eval_tiles.regime(dict(batch=256, length=60, d_model=128, d_state=64)) == dict(
      batch=cfg.eval_chunk, length=cfg.eval_length, d_model=128, d_state=64,
      eval_seqs=cfg.eval_seqs), "the eval regime took the training cell's batch or length"
  tiny = bench_eval_tiles.regime(dict(d_model=8, d_state=4), batch=2, length=12)
  keep_defaults(monkeypatch, pallas)
  pallas.FORWARD["real"], pallas.PREFETCH["real"] = (4, 2), False  # the defaults: a timed row
  real, asked = pallas.scan, []
  monkeypatch.setattr(pallas, "scan", lambda f, **kw: asked.append((f.x.shape, kw)) or real(f, **kw))
  clock = iter(range(100, 0, -1))  # each configuration timed is faster than the one before
  monkeypatch.setattr(bench_tiles, "timed", lambda fn, f, reps: (None, next(clock) / 1e3,
                                                                  fn(f), None))
  grid = {"forward": [(4, 2), (8, 1)]}
  out = bench_eval_tiles.bench_eval_tiles(reps=1, sizes=tiny, models=("negmamba",), grid=grid,
                                          chunks=(4, 8), need_gpu=False)  # interpret mode
  assert [shape for shape, _ in asked].count((cfg.eval_seqs, 12, 8)) == 1 and {
      shape for shape, _ in asked} == {(2, 12, 8), (cfg.eval_seqs, 12, 8)} and not any(
      "backward" in kw for _, kw in asked), f"not one run's forward at the eval sizes: {asked}"
  rows, whole = out["rows"][:-1], out["rows"][-1]
  fastest, chunk = [8, 1], pallas.CHUNK["real"]
  assert [(r["kernel"], r["tile"], r["chunk"]) for r in rows] == [
      ("forward", [4, 2], chunk), ("forward", [8, 1], chunk)] + [
      ("forward" + "+prefetch" * p, fastest, c) for c in (4, 8) for p in (False, True)
      if (c, p) != (chunk, False)], rows
  assert all(r["matches_reference"] for r in out["rows"]), out["rows"]
  assert all(r["ms_per_run_layer"] == round(r["ms_per_run"] * cfg.eval_seqs / 2, 3)
             for r in rows), "ms per evaluated run is not the calls per run's worth"
  win = rows[-1]  # the last timed, so the fastest
  best = out["best"]["evaluation"]["real"]
  assert (best["forward"], best["chunk"], best["prefetch"], best["family"]) == (
      win["tile"], win["chunk"], win["kernel"].endswith("prefetch"), "signed_decay"), best
  assert best["default_ms_per_call"] == rows[0]["ms_per_run"], (
      f"the defaults' time is not their row's: {best}")
  assert [kw for shape, kw in asked if shape[0] == cfg.eval_seqs] == [dict(
      forward=tuple(win["tile"]), chunk=win["chunk"], prefetch=best["prefetch"])], asked
  # the best once more, on the whole evaluation set in one call
  assert (whole["kernel"].startswith("forward, whole set"), whole["tile"], whole["chunk"],
          whole["batch"], whole["ms_per_run_layer"], best["whole_set_ms_per_run_layer"]) == (
      True, win["tile"], win["chunk"], cfg.eval_seqs, whole["ms_per_run"],
      whole["ms_per_run"]), whole
  assert "best eval real (signed_decay): pallas.FORWARD" in bench_tiles_result.render(out)
  keep_defaults(monkeypatch, pallas)
  bench_tiles_result.apply(out)
  assert (pallas.FORWARD["real"], pallas.CHUNK["real"], pallas.PREFETCH["real"]) == (
      tuple(win["tile"]), win["chunk"], best["prefetch"]), "the best was not applied"
  # the whole set in one call 1% off: the best stays, its whole-set time is not reported
  monkeypatch.setattr(pallas, "scan", lambda f, **kw: real(f, **kw) * (
      1.01 if f.x.shape[0] == cfg.eval_seqs else 1.0))
  out = bench_eval_tiles.bench_eval_tiles(reps=1, sizes=tiny, models=("negmamba",), grid=grid,
                                          chunks=(4,), need_gpu=False)
  best = out["best"]["evaluation"]["real"]
  assert not out["rows"][-1]["matches_reference"] and best["whole_set_ms_per_run_layer"] is None, (
      f"a whole-set call that missed the reference was timed: {best}")
  rejects_a_one_percent_error(monkeypatch, pallas, bench_eval_tiles.bench_eval_tiles,
                              sizes=tiny, models=("aussm",), grid=grid)


def test_parallel_tiles_sweeps_the_kinds_of_the_models_asked_for(monkeypatch):
  """One kind per GPU call: `--models=negmamba` sweeps the real kind only, on negmamba's
  factors, `--models=mamba` on mamba's (its backward is another kernel), no --models all."""
  from launch import bench_tiles
  asked = []
  monkeypatch.setattr(bench_tiles, "bench_parallel_tiles", lambda reps, sizes, kinds, need_gpu:
                      asked.append(kinds) or {"rows": [], "best": {}})
  monkeypatch.setattr(bench_tiles_result, "render", lambda result: "")
  run_section_per_models("parallel_tiles", ["negmamba,rnn", "mamba", None])
  assert asked[:2] == [{"real": "signed_decay"}, {"real": "decay"}], asked
  assert list(asked[2]) == ["real", "phase", "const"], asked


def test_apply_tiles_makes_the_best_tiles_the_defaults_for_the_next_sections(monkeypatch):
  """`--apply_tiles`: a section after a tile sweep (here train_many) runs with the tiles the
  sweep found, both kernels; without the flag the defaults stay."""
  from launch import bench_tiles
  from ssm_bench.scan import pallas, pallas_parallel
  keep_defaults(monkeypatch, pallas, pallas_parallel)
  monkeypatch.setattr(pallas, "JOIN_REDUCTIONS", False)
  parallel_best = {"best": {"parallel": {"real": {"forward": [8, 2], "backward": [4, 8],
                                                  "time_major": True, "blocks": 4}}},
                   "rows": []}
  tiles_best = {"best": {"real": {"forward": [32, 8], "backward": [8, 2], "chunk": 4,
                                  "prefetch": True, "join": True, "fwd_bwd_ms_per_run": 1.0}},
                "rows": []}
  seen = []
  monkeypatch.setattr(bench_tiles, "bench_parallel_tiles",
                      lambda reps, sizes, kinds, need_gpu: parallel_best)
  monkeypatch.setattr(bench_tiles, "bench_tiles", lambda reps, sizes, models, need_gpu: tiles_best)
  monkeypatch.setattr(bench_train_many, "bench_train_many", lambda *a, **kw: seen.append((
      pallas_parallel.FORWARD["real"], pallas_parallel.BACKWARD["real"], pallas.FORWARD["real"],
      pallas.BACKWARD["real"], pallas.CHUNK["real"], pallas.PREFETCH["real"],
      pallas.JOIN_REDUCTIONS, pallas_parallel.FORWARD["phase"],
      pallas_parallel.TIME_MAJOR["real"], pallas_parallel.CHANNEL_BLOCKS["real"])) or {})
  monkeypatch.setattr(bench, "render", lambda section, result: "")
  defaults = (pallas_parallel.FORWARD["real"], pallas_parallel.BACKWARD["real"],
              pallas.FORWARD["real"], pallas.BACKWARD["real"], pallas.CHUNK["real"],
              pallas.PREFETCH["real"], pallas.JOIN_REDUCTIONS, pallas_parallel.FORWARD["phase"],
              pallas_parallel.TIME_MAJOR["real"], pallas_parallel.CHANNEL_BLOCKS["real"])
  try:
    flags.FLAGS["out"].parse("")
    flags.FLAGS["sections"].parse("parallel_tiles,tiles,train_many")
    flags.FLAGS["train_many_models"].parse("negmamba")
    flags.FLAGS["methods"].parse("sequential")  # one this backend times (train_many skips others)
    bench.main([])  # without the flag
    flags.FLAGS["apply_tiles"].parse("true")
    bench.main([])
  finally:
    for name in ("out", "sections", "train_many_models", "methods", "apply_tiles"):
      flags.FLAGS[name].unparse()
  assert seen[0] == defaults, f"tiles were applied without --apply_tiles: {seen[0]}"
  assert seen[1] == ((8, 2), (4, 8), (32, 8), (8, 2), 4, True, True, defaults[-3], True, 4), (
      f"train_many did not run with the swept tiles: {seen[1]}")
  assert tiles_best["applied"]["pallas"]["real"]["chunk"] == 4, tiles_best
  assert "applied for the rest of this run" in bench_tiles_result.render({"k": 1, **tiles_best})
  # the joined reductions exist in the real kind's backward only: a phase best leaves them
  monkeypatch.setattr(pallas, "JOIN_REDUCTIONS", False)
  bench_tiles_result.apply({"best": {"phase": dict(tiles_best["best"]["real"])}})
  assert pallas.JOIN_REDUCTIONS is False, "the phase kind's best set the real kind's reductions"


def test_a_tile_matches_only_where_every_output_does():
  """A tile's error is its worst output's: a gradient right in one leaf and 1% off in another
  misses the reference (the best output's error would let it be timed as a candidate)."""
  import jax.numpy as jnp
  from launch import bench_tiles
  want = (jnp.ones(8), jnp.arange(1.0, 9.0))
  row = {}
  assert bench_tiles._matches(row, want, want) and row["rel_err"] == 0.0, row
  assert not bench_tiles._matches(row, (want[0], want[1] * 1.01), want), (
      f"a tile 1% off in one output matched: {row}")
  assert row["rel_err"] == pytest.approx(1e-2, rel=1e-3), row


def test_a_block_count_that_misses_the_reference_never_wins():
  """sweep_blocks keeps one block per program unless a count that matches the reference is
  faster: a faster count whose gradients are wrong is recorded as no time, never chosen."""
  from launch import bench_tiles
  rows = []
  results = {2: (0.5, False), 4: (0.8, True), 8: (0.9, True), 16: (2.0, True)}
  def run_blocks(n):
    ms, ok = results[n]
    rows.append({"ms_per_run": ms, "matches_reference": ok})
  per_blocks, blocks = bench_tiles.sweep_blocks(run_blocks, rows, (4, 1), d_model=64,
                                                fastest=1.0)
  assert per_blocks == {2: None, 4: 0.8, 8: 0.9, 16: 2.0}, per_blocks
  assert blocks == 4, f"{blocks} blocks chosen: only 4 and 8 match, and 4 is the faster"
  rows.clear()
  per_blocks, blocks = bench_tiles.sweep_blocks(run_blocks, rows, (32, 1), d_model=64,
                                                fastest=1.0)
  assert list(per_blocks) == [2] and blocks == 1, (per_blocks, blocks)  # 64 channels: 2 blocks


def test_every_kernel_kind_has_a_representative_family_of_that_kind():
  """The registers section and the sweeps without --models read `REPRESENTATIVE[kind]` for
  every kind the kernels have; a kind added without one failed only where Triton compiles (the
  sm_90 registers test, skipped in CI: KeyError 'complex', unseen for three sessions)."""
  from launch import bench_tiles
  from ssm_bench.scan import pallas, pallas_chunked, pallas_parallel
  kinds = (set(pallas_chunked.KIND.values()) | set(pallas.FORWARD) | set(pallas_parallel.FORWARD)
           | set(pallas_chunked.FORWARD))
  missing = kinds - set(bench_tiles.REPRESENTATIVE)
  assert not missing, f"kernel kinds without a representative scan family: {sorted(missing)}"
  wrong = {k: f for k, f in bench_tiles.REPRESENTATIVE.items() if pallas_chunked.KIND[f] != k}
  assert not wrong, f"representative families of another kind: {wrong}"
