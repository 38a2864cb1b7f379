"""The profile section (`launch/bench_profile.py`): a traced step's device time by kind of op,
where each op comes from, and the matmuls' flops (times are not asserted)."""
from absl import flags

import jax
import jax.numpy as jnp

from bench_flags import TINY, small_flags  # noqa: F401 (the module's flags)
from launch import bench


def test_profile_section_traces_a_step_and_sums_time_by_kind():
  from launch import bench_profile
  rows = bench_profile.bench_profile(lambda model, method: TINY.replace(model=model),
                                     ["negmamba"], [1, 2], reps=1)
  assert [(r["model"], r["method"], r["k"]) for r in rows] == [("negmamba", "auto", 1),
                                                                ("negmamba", "auto", 2)]
  for r in rows:
    assert r["device_ms_per_step"] > 0 and r["ms_per_step"], f"an empty profile: {r}"
    assert abs(sum(r["ms_per_step"].values()) - r["device_ms_per_step"]) < 1e-2
  assert "negmamba (auto) K=2" in bench_profile.render(rows)
  assert rows[0]["top_ops"] and "costliest ops" in bench_profile.render(rows), rows[0]
  assert rows[0]["matmul_gflop_per_run_step"] == rows[1]["matmul_gflop_per_run_step"] > 0
  for r in rows:  # the bytes each kind read and wrote, from the traced program's HLO
    gb = r["gb_per_step"]
    assert set(gb) == set(r["ms_per_step"]) and gb["matmul"] > 0 and gb["fusion"] > 0, gb
    assert any(o.get("gb", 0) > 0 for o in r["top_ops"]), f"no op's bytes found: {r['top_ops']}"
  assert rows[1]["gb_per_step"]["matmul"] > rows[0]["gb_per_step"]["matmul"], "K=2 moves more"
  for r in rows:  # the CPU's chunked scan has no kernel: its ops are a kind by their source
    assert r["ms_per_step"].get("scan (XLA ops)", 0) > 0, r["ms_per_step"]
    assert not any("ssm_bench/scan/" in o["detail"] for o in r["top_ops"]), r["top_ops"]
  for r in rows:  # the rate of all K runs' matmul work in the traced matmuls' time
    want = float(f"{r['matmul_gflop_per_run_step'] * r['k'] / r['ms_per_step']['matmul']:.3g}")
    assert r["matmul_tflops"] == want > 0, (r["k"], r["matmul_tflops"], want)
  assert " GB " in bench_profile.render(rows) and "TB/s" in bench_profile.render(rows)


def test_profile_traces_each_method_asked_for(monkeypatch):
  """`--methods` picks the scan methods the profile traces (a kernel against another in one
  call), each model keeping only those it has; without it, the one auto picks."""
  from launch import bench_profile
  traced = []
  monkeypatch.setattr(bench_profile, "profile_one", lambda cfg, k, reps: traced.append(
      (cfg.model, cfg.scan_method, k)) or {"k": k})
  monkeypatch.setattr(bench, "render", lambda section, result: "")
  try:
    for name, value in (("out", ""), ("sections", "profile"), ("models", "negmamba,rnn"),
                        ("profile_k", "2"), ("methods", "sequential,chunked")):
      flags.FLAGS[name].parse(value)
    bench.main([])
    flags.FLAGS["methods"].unparse()
    bench.main([])
  finally:
    for name in ("out", "sections", "models", "profile_k", "methods"):
      flags.FLAGS[name].unparse()
  assert traced == [("negmamba", "sequential", 2), ("negmamba", "chunked", 2),
                    ("rnn", "sequential", 2), ("negmamba", "auto", 2), ("rnn", "auto", 2)], traced


def test_a_method_that_fails_is_a_profile_row_not_a_crash(monkeypatch):
  """A kernel Triton rejects on the GPU must not take the other methods' rows with it."""
  from launch import bench_profile

  def profile_one(cfg, k, reps):
    if cfg.scan_method == "chunked":
      raise RuntimeError("triton: out of resources")
    return {"k": k, "wall_ms_per_step": 1.0, "device_ms_per_step": 1.0, "source": "device",
            "host_gap_ms_per_step": 0.0, "matmul_gflop_per_run_step": 1.0, "ms_per_step": {}}
  monkeypatch.setattr(bench_profile, "profile_one", profile_one)
  rows = bench_profile.bench_profile(
      lambda model, method: TINY.replace(model=model, scan_method=method), ["negmamba"], [2],
      methods=lambda m: ("chunked", "sequential"))
  assert [(r["method"], "error" in r) for r in rows] == [("chunked", True), ("sequential", False)]
  assert "negmamba (chunked) K=2: RuntimeError: triton" in bench_profile.render(rows)


def test_profile_wall_time_leaves_out_the_profilers_start_and_stop(monkeypatch):
  import contextlib
  import time
  from launch import bench_profile
  real_trace, pause_s = jax.profiler.trace, 2.0

  @contextlib.contextmanager
  def slow_trace(*args, **kwargs):  # a profiler that takes seconds to write its trace
    with real_trace(*args, **kwargs):
      yield
    time.sleep(pause_s)

  monkeypatch.setattr(jax.profiler, "trace", slow_trace)
  [row] = bench_profile.bench_profile(lambda model, method: TINY.replace(model=model),
                                      ["rnn"], [1], reps=1, steps_per_chunk=5)
  assert row["wall_ms_per_step"] * 5 < pause_s * 1e3, (
      f"the profile's wall time ({row['wall_ms_per_step']} ms per step) counts the profiler "
      "writing its trace: it must time the chunks untraced")


def test_profile_wall_time_is_the_untraced_chunks_per_step(monkeypatch):
  """The host gap is wall time minus device time: the wall time is the untraced chunks' alone
  (a clock that ticks 1 s a reading: 1 s over 2 chunks of 5 steps, 100 ms a step)."""
  import types
  from launch import bench_profile
  ticks = iter(range(10 ** 6))
  monkeypatch.setattr(bench_profile, "time", types.SimpleNamespace(
      perf_counter=lambda: float(next(ticks))))
  [row] = bench_profile.bench_profile(lambda model, method: TINY.replace(model=model),
                                      ["rnn"], [1], reps=2, steps_per_chunk=5)
  assert row["wall_ms_per_step"] == 100.0, row


def test_matmul_flops_count_every_dot_nested_and_each_scan_iteration():
  from launch import bench_profile
  a, b = jnp.ones((4, 5)), jnp.ones((5, 5))
  fn = lambda a, b: jax.jit(lambda a: jax.lax.scan(lambda c, _: (c @ b, None), a, None,
                                                   length=3)[0])(a) @ b.T
  want = 4 * 2 * 4 * 5 * 5  # three products in the scan, one after it: (4, 5) @ (5, 5) each
  got = bench_profile.matmul_flops(jax.make_jaxpr(fn)(a, b).jaxpr)
  assert got == want, f"counted {got} matmul flops, want {want}"


def test_profile_kinds_of_gpu_ops():
  from launch import bench_profile
  procs = {1: "/device:GPU:0", 2: "/host:CPU"}
  ev = [{"ph": "X", "pid": 1, "name": n, "dur": 1000.0} for n in
        ("pallas_scan_fwd", "custom-call.3", "loop_gemm_fusion", "fusion.12", "copy.4",
         "while.1", "reduce.7")]
  ev += [{"ph": "X", "pid": 1, "name": "fusion.9", "dur": 500.0, "args": {"tf_op": "jit(chunk)/optimizer/mul"}},
         {"ph": "X", "pid": 2, "name": "PjitFunction(chunk)", "dur": 9000.0}]
  out = bench_profile.summarize(ev, procs, steps=1, wall_s=0.01)
  assert out["ms_per_step"] == {"scan kernel (custom call)": 2.0, "matmul": 1.0, "fusion": 1.0,
                                "copy / transpose": 1.0, "reduction": 1.0,
                                "optimizer update": 0.5}, out
  assert out["device_ms_per_step"] == 6.5 and out["host_gap_ms_per_step"] == 3.5
  # the non-scan part by op, costliest first, an op's events summed across the trace
  ev += [{"ph": "X", "pid": 1, "name": "copy.4", "dur": 2500.0,
          "args": {"long_name": "%copy.4 = f32[27,256,60,128]{3,2,1,0} copy(%p)"}}]
  top = bench_profile.summarize(ev, procs, steps=1, wall_s=0.01)["top_ops"]
  assert [(o["op"], o["ms"]) for o in top[:2]] == [("copy.4", 3.5), ("loop_gemm_fusion", 1.0)], top
  assert top[0]["detail"].startswith("%copy.4 = f32[27,256,60,128]"), top[0]
  ev += [{"ph": "X", "pid": 1, "name": "copy.4", "dur": 100.0}]  # a later event says nothing
  top = bench_profile.summarize(ev, procs, steps=1, wall_s=0.01)["top_ops"]
  assert top[0]["detail"].startswith("%copy.4 = f32[27,256,60,128]"), (
      f"a later event without a description erased the op's: {top[0]}")
  assert not any(o["kind"].startswith("scan kernel") for o in top), "the kernel is not 'the rest'"


def test_profile_times_and_bytes_are_per_training_step():
  """The trace spans `steps` training steps: each kind's ms, GB and the host gap are per step;
  the ms of ops the HLO gives no bytes for are reported apart (`ms_without_bytes`)."""
  from launch import bench_profile
  procs = {1: "/device:GPU:0"}
  ev = [{"ph": "X", "pid": 1, "name": n, "dur": d} for n, d in (
      ("fusion.1", 4000.0), ("copy.2", 2000.0), ("nvjet_gemm", 1000.0))]
  out = bench_profile.summarize(ev, procs, steps=4, wall_s=0.008,
                                moved={"fusion.1": 8e9, "copy.2": 4e9})
  assert out["ms_per_step"] == {"fusion": 1.0, "copy / transpose": 0.5, "matmul": 0.25}, out
  assert (out["device_ms_per_step"], out["wall_ms_per_step"], out["host_gap_ms_per_step"]) == (
      1.75, 2.0, 0.25), out
  assert out["gb_per_step"] == {"fusion": 2.0, "copy / transpose": 1.0, "matmul": 0.0}, out
  assert out["ms_without_bytes"] == 0.25, f"only the gemm has no bytes in the HLO: {out}"


def test_profile_kinds_take_the_optimizer_scope_and_the_primitive_from_the_program():
  """On the GPU the trace has no scopes: an op whose instruction sits under the optimizer's
  scope is the update, an op its name leaves unclassified takes its primitive's kind, and an
  op of the backward pass (`transpose(jvp(..))`) is not a transpose for it."""
  from launch import bench_profile
  procs = {1: "/device:GPU:0"}
  ev = [{"ph": "X", "pid": 1, "name": n, "dur": 1000.0, "args": args} for n, args in (
      ("loop_multiply_fusion_3", {}), ("nvjet_tst_128x64", {}),
      ("cutlass_gemm", {"hlo_op": "custom-call.4"}), ("fusion.7", {}),
      ("pallas_scan_fwd", {"hlo_op": "custom-call.9"}), ("fusion.8", {}))]
  sources = {"loop_multiply_fusion_3": "optimizer/mul @ ssm_bench/train.py:1 (step)",
             "nvjet_tst_128x64": "jvp(StateTracker)/layer0/B/dot_general @ m.py:2 (f)",
             "custom-call.4": "jvp(StateTracker)/layer0/in_u/dot_general @ m.py:2 (f)",
             "fusion.7": "transpose(jvp(StateTracker))/layer0/mul @ m.py:3 (g)",
             "custom-call.9": "optimizer/custom_vjp_call/pallas_call",
             # a kernel's preparation of its factors: the scan's, not the rest of the step
             "fusion.8": "jvp(StateTracker)/layer0/mul @ ssm_bench/scan/pallas_chunked.py:9 (h)"}
  out = bench_profile.summarize(ev, procs, steps=1, wall_s=0.01, sources=sources)
  assert out["ms_per_step"] == {"optimizer update": 1.0, "matmul": 2.0, "fusion": 1.0,
                                "scan kernel (custom call)": 1.0, "scan (XLA ops)": 1.0}, (
      out["ms_per_step"])
  details = {o["op"]: o["detail"] for o in out["top_ops"]}
  assert details["fusion.7"] == sources["fusion.7"], f"the op's source is not shown: {details}"
  assert "fusion.8" not in details, f"the scan's own op listed outside the scan: {details}"


def test_eval_profile_traces_one_runs_evaluation_as_a_sweep_scores_it(monkeypatch):
  """The section times and traces `runs.score` (every stream, the curves, the declaration
  check) with the group's correctness program, after one call that compiles; its config is
  table2_lite's at the cell's width and evaluation's sizes."""
  from launch import bench_profile
  from ssm_bench import runs
  from tasks import registry
  scored, real = [], runs.score
  monkeypatch.setattr(runs, "score", lambda *a: scored.append(a[4]) or real(*a))
  programs, real_program = [], runs.evaluation_program
  monkeypatch.setattr(runs, "evaluation_program",
                      lambda trainer, c: programs.append(c) or real_program(trainer, c))
  cfg = TINY.replace(model="negmamba", eval_seqs=8, eval_chunk=4, eval_length=40, pad_order=6)
  rows = bench_profile.bench_eval_profile(lambda model: cfg.replace(model=model),
                                          ["negmamba", "rnn"], reps=2)
  assert programs == [cfg, cfg.replace(model="rnn")], f"not the sweep's program: {programs}"
  assert [r["model"] for r in rows] == ["negmamba", "rnn"] and len(scored) == 2 * (1 + 2 + 2), (
      f"not one compiling call, then the timed and the traced ones: {len(scored)} calls")
  for r in rows:
    assert "error" not in r, r
    assert r["device_ms_per_step"] > 0 and r["ms_per_step"], f"an empty profile: {r}"
    assert (r["eval_seqs"], r["eval_length"], r["eval_chunk"]) == (8, 40, 4), r
    assert r["streams"] == list(registry.get_task(cfg.task).eval_streams), r
    assert r["program_ms_per_run"] > 0 and r["first_s"] > 0, r
  assert "negmamba evaluation: one run (8 x 40" in bench_profile.render_eval(rows)
  monkeypatch.setattr(bench_profile, "profile_eval", lambda cfg, reps: 1 / 0)
  assert "ZeroDivisionError" in bench_profile.bench_eval_profile(lambda m: cfg, ["rnn"])[0]["error"]
  # the bench's config (the module's flags: --batch=4 --length=12 --d_model=8 --d_state=2):
  # table2_lite's at the cell's width, evaluation's sizes, at least the grid's first length
  from ssm_bench.config import PRESETS, TrainConfig
  assert bench.eval_config("mamba") == TrainConfig(
      task="C2", model="mamba", **PRESETS["table2_lite"]).replace(
      d_model=8, d_state=2, eval_chunk=4, eval_length=20, train_length=20,
      eval_seqs=TrainConfig().eval_seqs), bench.eval_config("mamba")
