"""`launch.bench --sections=compiled`: a training step's bytes from its compiled program."""
import jax
import pytest

from bench_flags import TINY, small_flags  # noqa: F401 (the module's flags)
from launch import bench_compiled, hlo

# A chunk of 5 steps whose body runs one 8-iteration loop and calls a computation: the step's
# bytes are the body's fusion (2 x 4 x 4 floats in, 4 x 4 out), the called one's (4 x 4 in and
# out) and 8 times the inner loop's.
_PROGRAM = """HloModule chunk

%inner (p: (s32[], f32[4,4])) -> (s32[], f32[4,4]) {
  %p = (s32[], f32[4,4]) parameter(0)
  %x = f32[4,4]{1,0} get-tuple-element(%p), index=1
  %inner_fusion = f32[4,4]{1,0} fusion(%x), kind=kLoop, calls=%f
  %i = s32[] get-tuple-element(%p), index=0
  ROOT %t = (s32[], f32[4,4]) tuple(%i, %inner_fusion)
}

%callee (r: f32[4,4]) -> f32[4,4] {
  %r = f32[4,4]{1,0} parameter(0)
  ROOT %called_fusion = f32[4,4]{1,0} fusion(%r), kind=kLoop, calls=%k
}

%body (q: (s32[], f32[4,4])) -> (s32[], f32[4,4]) {
  %q = (s32[], f32[4,4]) parameter(0)
  %y = f32[4,4]{1,0} get-tuple-element(%q), index=1
  %step_fusion = f32[4,4]{1,0} fusion(%y, %y), kind=kLoop, calls=%g
  %called = f32[4,4]{1,0} call(%y), to_apply=%callee
  %inner_loop = (s32[], f32[4,4]) while(%q), condition=%c, body=%inner, backend_config={"known_trip_count":{"n":"8"}}
  %j = s32[] get-tuple-element(%q), index=0
  ROOT %u = (s32[], f32[4,4]) tuple(%j, %step_fusion)
}

ENTRY %main (a: (s32[], f32[4,4])) -> (s32[], f32[4,4]) {
  %a = (s32[], f32[4,4]) parameter(0)
  %before = f32[4,4]{1,0} fusion(%a), kind=kLoop, calls=%h
  ROOT %training = (s32[], f32[4,4]) while(%a), condition=%d, body=%body, backend_config={"known_trip_count":{"n":"5"}}
}
"""


def test_a_steps_bytes_are_its_loops_body_with_inner_loops_times_their_trips():
  moved = hlo.loop_body_bytes(_PROGRAM, steps=5)
  assert moved == {"step_fusion": 3 * 64, "called_fusion": 2 * 64, "inner_fusion": 8 * 2 * 64}, (
      f"expected the body's and the called fusion once, the inner loop's 8 times, nothing "
      f"outside: {moved}")
  # a loop whose trip count XLA does not know (a data-dependent condition) counts once
  unknown = _PROGRAM.replace(', backend_config={"known_trip_count":{"n":"8"}}', "")
  assert hlo.loop_body_bytes(unknown, steps=5)["inner_fusion"] == 2 * 64
  with pytest.raises(ValueError, match="no loop of 10 iterations"):
    hlo.loop_body_bytes(_PROGRAM, steps=10)


def test_compiled_section_sums_a_steps_bytes_by_kind_on_this_machine():
  rows = bench_compiled.bench_compiled(lambda model, method: TINY.replace(model=model),
                                       ["negmamba"], [1, 2])
  assert [(r["model"], r["k"]) for r in rows] == [("negmamba", 1), ("negmamba", 2)], rows
  for r in rows:
    assert r["gb_by_kind"]["matmul"] > 0 and r["top_ops"], f"an empty row: {r}"
    assert abs(sum(r["gb_by_kind"].values()) - r["gb_per_step"]) < 1e-3 * r["gb_per_step"], r
    assert abs(r["gb_per_run_step"] * r["k"] - r["gb_per_step"]) < 1e-3 * r["gb_per_step"], r
    top = [o["gb"] for o in r["top_ops"]]
    # the costliest ops, largest first: the largest of a tiny step's ops moved 3% (negmamba, K = 1)
    assert top == sorted(top, reverse=True) and top[0] > 0.01 * r["gb_per_step"], (
        f"the costliest ops should be listed, largest first: {top} of {r['gb_per_step']} GB")
  ratio = rows[1]["gb_per_step"] / rows[0]["gb_per_step"]
  assert 1.8 < ratio < 2.2, f"two runs' step should move about twice one run's, not {ratio:.2f}x"
  assert 0 < rows[0]["memory_gb"] < rows[1]["memory_gb"], (
      f"XLA's memory estimate should grow with the runs: {[r['memory_gb'] for r in rows]}")
  text = bench_compiled.render(rows)
  assert "negmamba (auto) K=2, compiled for cpu" in text and "costliest ops" in text, text
  assert f"XLA's memory estimate {rows[1]['memory_gb']:.4g} GB" in text, text


def test_a_gpu_target_is_named_and_needs_the_cuda_plugin(monkeypatch):
  names = ", ".join(bench_compiled.TARGETS)
  assert "a100" in names and "h200" in names, names
  with pytest.raises(bench_compiled.TargetError, match=f"unknown h300; choose from {names}$"):
    bench_compiled.target_device("h300")
  from jax.experimental import topologies

  def no_plugin(*args, **kw):
    raise NotImplementedError("topology not implemented for cuda")
  monkeypatch.setattr(topologies, "get_topology_desc", no_plugin)
  with pytest.raises(bench_compiled.TargetError, match="pip install --no-deps jax-cuda13-plugin"):
    bench_compiled.target_device("h200")


def test_each_gpu_target_names_its_compute_capability(tmp_path, monkeypatch):
  """What Triton and ptxas compile a target's kernels for: major and minor of its
  cuda_compute_capability (sm_89 is major 8, minor 9; a minor left out is 0)."""
  got = {t: bench_compiled.compute_capability(t) for t in ("a100", "rtx_4090", "h100", "h200",
                                                          "b200")}
  assert got == {"a100": 80, "rtx_4090": 89, "h100": 90, "h200": 90, "b200": 100}, got
  assert set(bench_compiled.TARGETS) == set(got), "a target without its capability checked here"
  broken = tmp_path / "broken.txtpb"
  broken.write_text("gpu_device_info {\n  core_count: 1\n}\n")
  monkeypatch.setitem(bench_compiled.TARGETS, "broken", broken)
  with pytest.raises(bench_compiled.TargetError, match="names no cuda_compute_capability"):
    bench_compiled.compute_capability("broken")


def test_registers_for_a_target_count_at_its_capability_without_the_cuda_plugin(monkeypatch):
  """`--sections=registers --target=a100` compiles the kernels for sm_80 (only the triton
  package needed); `--sections=compiled` with a target still needs jax's CUDA plugin."""
  from absl import flags
  from jax.experimental import topologies
  from launch import bench, bench_registers

  def no_plugin(*args, **kw):
    raise NotImplementedError("topology not implemented for cuda")
  monkeypatch.setattr(topologies, "get_topology_desc", no_plugin)
  seen = {}

  def counted(sizes, arch=90, **kw):
    seen.update(arch=arch, backend=jax.default_backend())
    return {"arch": f"sm_{arch}", "sizes": sizes, "triton": "-", "rows": []}
  monkeypatch.setattr(bench_registers, "bench_registers", counted)
  saved = [flags.FLAGS[n].value for n in ("target", "sections")]
  try:
    flags.FLAGS["sections"].value = ["registers"]
    for target, arch in (("a100", 80), ("", 90)):
      flags.FLAGS["target"].value = target
      result = bench.checked_flags()[1]["registers"]()
      assert seen == {"arch": arch, "backend": "gpu"}, (target, seen)
      assert result.get("target") == (target or bench_registers.TARGET), result
    flags.FLAGS["target"].value = "a100"
    flags.FLAGS["sections"].value = ["compiled"]
    with pytest.raises(bench.common.UsageError, match="jax-cuda13-plugin"):
      bench.checked_flags()
  finally:
    for name, value in zip(("target", "sections"), saved):
      flags.FLAGS[name].value = value
  assert jax.default_backend() == "cpu", "the registers' GPU lowering outlived the section"


def test_a_gpu_targets_backend_choices_hold_only_while_its_program_is_compiled():
  assert jax.default_backend() == "cpu"
  with pytest.raises(RuntimeError, match="inside"):
    with bench_compiled.as_gpu("h200"):
      assert jax.default_backend() == "gpu", "the suite's GPU choices while traced for a GPU"
      raise RuntimeError("inside")
  assert jax.default_backend() == "cpu", "the backend was left patched after the target"
  with bench_compiled.as_gpu(None):
    assert jax.default_backend() == "cpu", "this machine's device is compiled as it is"


def test_a_gpu_target_takes_the_gpus_methods_and_the_paper_cell():
  """With --target the bench plans as on that GPU: its fused kernels are methods to compile
  (`--methods=pallas_chunked` names one), and the cell is the paper's."""
  from absl import flags
  from launch import bench
  saved = [flags.FLAGS[name].value for name in ("target", "batch", "d_model")]
  try:
    flags.FLAGS["batch"].value = flags.FLAGS["d_model"].value = None
    flags.FLAGS["target"].value = "h200"
    assert "pallas_chunked" in bench.methods_for("mamba"), bench.methods_for("mamba")
    assert bench.sizes()["d_model"] == 128 and bench.sizes()["batch"] == 256, bench.sizes()
    flags.FLAGS["target"].value = ""
    assert "pallas_chunked" not in bench.methods_for("mamba"), "this CPU is no GPU"
  finally:
    for name, value in zip(("target", "batch", "d_model"), saved):
      flags.FLAGS[name].value = value


def test_the_ops_outside_the_kernels_are_timed_at_the_rate_measured_on_that_gpu():
  """A GPU target measured before gets the time of its ops outside the scan kernels at the rate
  they ran at there (bandwidth-bound); the kernels' bytes are not time, and an unmeasured target
  or this machine get none."""
  kinds = {bench_compiled.KERNELS: 6e9, "matmul": 4.07e9, "fusion": 4.07e9}
  rate = bench_compiled.MEASURED_TB_S["h200"]
  got = bench_compiled.outside_kernels_ms(kinds, "h200")
  want = {"outside_kernels_gb": 8.14, "outside_kernels_ms_per_step": round(8.14 / rate, 3)}
  assert got == want, got
  assert bench_compiled.outside_kernels_ms(kinds, "h100") == {}, "the H100 was never measured so"
  assert bench_compiled.outside_kernels_ms(kinds, None) == {}
