"""Every benchmarked variant computes what its reference computes (times are not asserted)."""
from absl import flags
import pytest

import jax

from bench_flags import TINY, run_section_per_models, small_flags  # noqa: F401 (the module's flags)
from launch import bench
from launch import bench_eval
from launch import bench_projection
from launch import bench_step
from launch import bench_train_many
from launch import common
from ssm_bench import scan
import launcher

pytestmark = pytest.mark.heavy  # a minute or more in all: scheduled first (conftest.py)


def test_step_timings_are_checked_across_scan_methods(monkeypatch):
  """...and each model's default is what its own "auto" runs: the diagonal AUTO for negmamba,
  the delta rule's HOUSEHOLDER_AUTO for deltanet (set to a method not timed here)."""
  monkeypatch.setattr(scan, "HOUSEHOLDER_AUTO", "associative")
  rows = {r["model"]: r for r in bench_step.bench_step(
      ["negmamba", "deltanet"], 1, bench.step_config, bench.methods_for, bench._auto_method,
      methods=("sequential", "chunked"))}
  for name, row in rows.items():
    assert row["all_match"], f"{name}: scan methods give different gradients: {row['methods']}"
  assert list(rows["negmamba"]["methods"]) == ["sequential", "chunked"]
  assert (rows["negmamba"]["default"], rows["deltanet"]["default"]) == (
      scan.default_method(), "associative"), "a model's default is not what its auto runs"
  assert "chunked" in bench.methods_for("negmamba") and "chunked" not in bench.methods_for("ids4")
  assert bench.methods_for("rnn") == ("sequential",), "rnn has one program: one column"


def test_step_marks_a_method_whose_gradients_are_off_and_times_the_default_against_the_fastest(
    monkeypatch):
  """Gradients 1% off the first method's fail the step's check (relative L2 <= 1e-3), and the
  row then does not say all match; with a clock of 2 ms for sequential and 1 ms for chunked,
  chunked is fastest and a sequential default runs 2.0x its time."""
  import numpy as np
  monkeypatch.setattr(bench_step, "prepare", lambda chunk, state, hp: (
      lambda state, hp: None, 0.0, None, {}))
  monkeypatch.setattr(bench_step, "reference_grads", lambda trainer, state: [
      np.full(4, 1.01 if trainer.cfg.scan_method == "chunked" else 1.0)])
  monkeypatch.setattr(bench_step, "interleaved", lambda calls, reps: [0.002, 0.001])
  (row,) = bench_step.bench_step(["negmamba"], 1, bench.step_config, bench.methods_for,
                                 lambda name: "sequential", methods=("sequential", "chunked"))
  assert [row["methods"][m]["matches_reference"] for m in ("sequential", "chunked")] == [
      True, False] and not row["all_match"], row
  assert (row["fastest"], row["default_over_fastest"]) == ("chunked", 2.0), row


def test_on_a_gpu_the_chunked_kernel_is_timed_for_the_families_it_has_kernels_for(monkeypatch):
  monkeypatch.setattr(bench.jax, "default_backend", lambda: "gpu")
  timed = {m: "pallas_chunked" in bench.methods_for(m) for m in ("mamba", "aussm", "s4d")}
  assert timed == {"mamba": True, "aussm": True, "s4d": False}, timed


def test_scan_section_checks_every_method_against_float64(monkeypatch):
  scan_negmamba = lambda: bench_step.bench_scan(1, bench.sizes(), bench.methods_for("negmamba"))
  out = scan_negmamba()
  assert [m["method"] for m in out["methods"]] == list(bench.methods_for("negmamba"))
  for m in out["methods"]:
    assert m["matches_reference"], m
    assert m["fraction_of_floor"] == pytest.approx(m["floor_ms"] / m["fwd_bwd_ms"], rel=0.05, abs=1e-4)
  real = scan.diagonal_scan
  monkeypatch.setattr(scan, "diagonal_scan", lambda f, m: real(f, m) * 1.001)
  assert not any(m["matches_reference"] for m in scan_negmamba()["methods"]), (
      "the check (1e-4) passes a scan that is off by 0.1%")


def test_train_many_matches_separate_runs():
  # one method: every method's equality with the reference is tested in tests/test_diagonal_scan.py
  out = bench_train_many.bench_train_many(reps=1, base=TINY, methods=("chunked",), ks=(1, 4))
  for method, rows in out["methods"].items():
    assert [r["K"] for r in rows] == [1, 4], method
    assert all(r["matches_separate"] for r in rows), (method, rows)
    assert rows[0]["max_rel_diff"] == 0.0, "run 0 alone differs from itself"
    assert all(r["max_rel_diff"] < 1e-4 for r in rows), (method, rows)
    assert all(r["estimate_MB"] > 0 for r in rows), "no memory estimate"
    assert all(r["repeat_bit_identical"] for r in rows), "one group run twice on CPU differs"
  assert "K=4" in bench.render("train_many", [out]) and "twice" in bench.render("train_many", [out])


def test_train_many_divides_a_programs_time_by_its_runs_and_steps(monkeypatch):
  """With a clock that reads 1 s a program: K runs of log_every steps cost 1000 / K / log_every
  ms per run-step, and `vs_alone` is that against K = 1's; the group's runs differ in seed as
  well as in learning rate, so run 0 is checked against a group that trains otherwise."""
  seeds, hparams = [], bench_train_many.train.hparams
  monkeypatch.setattr(bench_train_many.train, "hparams", lambda cfgs: seeds.append(
      [c.seed for c in cfgs]) or hparams(cfgs))
  monkeypatch.setattr(bench_train_many, "interleaved", lambda calls, reps: [1.0] * len(calls))
  out = bench_train_many.bench_train_many(reps=1, base=TINY, methods=("chunked",), ks=(1, 2))
  rows = out["methods"]["chunked"]
  steps = TINY.log_every
  assert [(r["ms_per_run_step"], r["vs_alone"]) for r in rows] == [
      (1000 / steps, 1.0), (500 / steps, 0.5)], (
      f"1 s a program over K runs of {steps} steps: {rows}")
  assert [0, 1] in seeds, f"the 2-run group's runs share a seed: {seeds}"


def test_train_many_reports_a_program_that_ends_elsewhere_when_run_again(monkeypatch):
  """`repeat_bit_identical` compares the group's program run twice on one state: a program
  whose second run moves a parameter by 1e-6 is reported as not bit-identical."""
  prepare = bench_train_many.prepare

  def drifting(fn, *args):
    program, compile_s, out, mem = prepare(fn, *args)
    moved = lambda state: dict(state, params=jax.tree.map(lambda x: x + 1e-6, state["params"]))
    return (lambda *a: (lambda r: (moved(r[0]),) + tuple(r[1:]))(program(*a))), compile_s, out, mem

  monkeypatch.setattr(bench_train_many, "prepare", drifting)
  out = bench_train_many.bench_train_many(reps=1, base=TINY, methods=("chunked",), ks=(2,))
  assert [r["repeat_bit_identical"] for r in out["methods"]["chunked"]] == [False], out


def test_transposes_are_counted_outside_the_kernels_only():
  """`transposed_mb` counts what XLA transposes around the Pallas kernels: a transpose inside
  a kernel's body is the kernel's own work (its registers), not a pass over memory."""
  import jax.numpy as jnp
  from jax.experimental import pallas as pl

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...].T

  inside = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((4, 8), jnp.float32),
                          interpret=True)
  jaxpr = jax.make_jaxpr(lambda x: inside(x) + x.T)(jnp.ones((8, 4))).jaxpr
  names = [e.primitive.name for e in bench_train_many.outside_kernels(jaxpr)]
  assert "pallas_call" in names and names.count("transpose") == 1, (
      f"expected the one transpose outside the kernel: {names}")


def test_train_many_without_a_group_of_one_does_not_claim_run_0_matches_itself_alone():
  """Without K = 1 no run was trained alone: the rows say so rather than compare a group with
  itself (which printed 0.0 for every 27-run group of the fifth GPU session)."""
  out = bench_train_many.bench_train_many(reps=1, base=TINY, methods=("chunked",), ks=(2,))
  (row,) = out["methods"]["chunked"]
  assert row["max_rel_diff"] is None and row["matches_separate"] is None, row
  assert "not trained alone" in bench.render("train_many", [out])


def test_train_many_times_each_layer_layout_where_the_kernel_runs_and_counts_its_transposes():
  """`--layer_layouts`: the time-parallel kernel's method is timed once per layout, keyed by
  it (a method that never runs the kernel once), and each row counts what one run-step
  transposes outside the kernels: less with channels-first layers."""
  out = bench_train_many.bench_train_many(reps=1, base=TINY, methods=("pallas_parallel", "chunked"),
                                          ks=(1,), layer_layouts=("batch", "channels"))
  rows = out["methods"]
  assert list(rows) == ["pallas_parallel, batch layers", "pallas_parallel, channels layers",
                        "chunked"], list(rows)
  mb = {k: r[0]["transposed_MB_per_run_step"] for k, r in rows.items()}
  assert mb["pallas_parallel, channels layers"] < mb["pallas_parallel, batch layers"], mb
  assert all(r[0]["matches_separate"] for r in rows.values())
  vs = rows["pallas_parallel, channels layers"][0]["vs_first_layout"]
  assert vs["max_rel_diff"] < 1e-3 and vs["loss_max_rel_diff"] < 1e-5, (
      f"the two layer layouts trained the same runs to other numbers: {vs}")
  assert "vs_first_layout" not in rows["pallas_parallel, batch layers"][0]
  text = bench.render("train_many", [out])
  assert "transposes outside the kernels" in text and "against the first layout" in text


def test_apply_keeps_the_layer_layout_with_the_smaller_summed_step_time(monkeypatch):
  """After train_many timed both layouts, `--apply_tiles` keeps the one whose ms per run-step,
  summed over models at the largest K both timed, is smaller; nothing without a pair."""
  from ssm_bench.scan import pallas_parallel
  monkeypatch.setattr(pallas_parallel, "CHANNELS_FIRST_LAYERS", False)
  row = lambda k, ms: {"K": k, "ms_per_run_step": ms}
  result = [{"methods": {"pallas_parallel, batch layers": [row(1, 2.0), row(27, 1.0)],
                         "pallas_parallel, channels layers": [row(1, 1.0), row(27, 0.9)]}},
            {"methods": {"pallas_parallel, batch layers": [row(27, 0.5)],
                         "pallas_parallel, channels layers": [row(27, 0.7)],
                         "chunked": [row(27, 0.1)]}}]
  applied = bench_train_many.apply_layer_layout(result)
  assert applied["layers"] == "batch" and not pallas_parallel.CHANNELS_FIRST_LAYERS, applied
  assert applied["ms_per_run_step_summed"] == {"batch": 1.5, "channels": 1.6}, applied
  result[1]["methods"]["pallas_parallel, channels layers"] = [row(27, 0.3)]
  assert bench_train_many.apply_layer_layout(result)["layers"] == "channels"
  assert pallas_parallel.CHANNELS_FIRST_LAYERS
  assert bench_train_many.apply_layer_layout([{"methods": {"chunked": [row(1, 1.0)]}}, {}]) is None
  # a method timed in one layout only (the other failed to compile) weighs on neither
  result[1]["methods"] = {"pallas_chunked, batch layers": [row(27, 5.0)]}
  applied = bench_train_many.apply_layer_layout(result)
  assert applied["ms_per_run_step_summed"] == {"batch": 1.0, "channels": 0.9}, applied


def test_group_against_alone_names_the_leaf_that_differs_most():
  """The GPU's group-vs-alone gap is read by its leaf: the relative difference is per leaf, and
  the worst one is named (run 1 of the stack is not compared)."""
  import numpy as np
  alone = {"dense": {"kernel": np.ones((2, 3)), "bias": np.full((2, 3), 1e-3)}}
  group = {"dense": {"kernel": np.ones((2, 3)) + 1e-5, "bias": np.array([[1e-3, 1e-3, 2e-3]] * 2)}}
  same, diff, leaf = bench_train_many.run0_difference(alone, group)
  assert (same, leaf) == (False, "['dense']['bias']") and diff == pytest.approx(1.0), (same, diff, leaf)
  group["dense"]["bias"] = np.array([[1e-3] * 3, [5.0] * 3])  # run 1 only
  assert bench_train_many.run0_difference(alone, group)[2] == "['dense']['kernel']"


def test_one_pass_eval_matches_per_length_eval():
  out = bench_eval.bench_eval(reps=1, cfg=TINY, num_seqs=4, grid=(20, 500, 1000))
  assert out["matches_per_length"]


def test_sampling_section_runs():
  out = bench_eval.bench_sampling(1, bench.sizes(), bench.step_config)
  assert out["sample_ms"] > 0 and out["smallest_step_ms"] > 0
  ratio = out["sample_ms"] / out["smallest_step_ms"]  # the cell's batch, not the long one's
  assert abs(out["sampling_over_step"] - ratio) <= 1e-3 + 0.01 * ratio, (out, ratio)


def test_projection_sums_measured_step_times_over_a_sweep():
  out = bench_projection.bench_projection(reps=1, sweep_names=("tiny",), k_sample=1)
  tiny = out["sweeps"]["tiny"]
  assert (tiny["runs"], tiny["groups"]) == (4, 2)
  assert out["shapes_timed"] == 2 and tiny["device_seconds"] > 0
  assert tiny["device_hours"] == pytest.approx(tiny["train_hours"] + tiny["compile_hours"], abs=0.01)
  assert tiny["device_seconds"] == pytest.approx(3600 * tiny["device_hours"], abs=40)


def test_the_memory_estimate_counts_a_donated_buffer_once():
  """XLA's estimate is arguments + outputs + temporaries less what aliases (a donated input
  reused as the output): 1 MiB in, 1 MiB out is 2 MiB, or 1 MiB when the output reuses it."""
  import jax.numpy as jnp
  from launch import timing
  x = jnp.zeros((2 ** 18,), jnp.float32)
  kept = jax.jit(lambda x: x + 1).lower(x).compile()
  donated = jax.jit(lambda x: x + 1, donate_argnums=0).lower(x).compile()
  assert (timing.memory(kept)["estimate_MB"], timing.memory(donated)["estimate_MB"]) == (2.0, 1.0)


@pytest.mark.parametrize("k_sample", [1, 2])
def test_projection_scales_each_sampled_step_to_its_groups_runs(monkeypatch, k_sample):
  """tiny: 2 groups of 2 runs, 20 steps. A step of K sampled runs timed at 10 ms (and a 2 s
  compile) projects 20 x 10 ms x 2 / K per group, compilation once per group."""
  from ssm_bench.config import PRESETS
  monkeypatch.setattr(bench_projection, "timed", lambda *a, reps: (2.0, 0.01, None, {}))
  out = bench_projection.bench_projection(reps=1, sweep_names=("tiny",), k_sample=k_sample)
  steps = PRESETS["tiny"]["steps"]
  want = 2 * steps * 0.01 * 2 / k_sample + 2 * 2.0
  assert out["sweeps"]["tiny"]["device_seconds"] == pytest.approx(want), (out, want)


def test_projection_narrowed_to_models_counts_only_their_groups():
  out = bench_projection.bench_projection(reps=1, sweep_names=("tiny",), k_sample=1, models={"negmamba"})
  assert (out["sweeps"]["tiny"]["runs"], out["sweeps"]["tiny"]["groups"]) == (2, 1), out


def test_each_finished_section_is_written_before_the_next_starts(tmp_path, monkeypatch):
  """A GPU call cut off by its time limit must keep the sections it finished: the file is
  written after every section, not once at the end. A bad section name fails before any runs."""
  import json

  def killed(reps):
    raise RuntimeError("the call's time limit")

  monkeypatch.setattr(bench_eval, "bench_eval", killed)
  try:
    flags.FLAGS["out"].parse(str(tmp_path))
    flags.FLAGS["sections"].parse("sampling,eval")
    with pytest.raises(RuntimeError, match="time limit"):
      bench.main([])
    path = tmp_path / f"{jax.default_backend()}.json"
    assert path.exists(), "nothing written: the finished section was lost"
    assert "sampling" in json.loads(path.read_text()), "the finished section was lost"
    flags.FLAGS["sections"].parse("sampling,evl")
    with pytest.raises(common.UsageError, match="unknown section 'evl'"):
      bench.main([])
  finally:
    flags.FLAGS["out"].unparse()
    flags.FLAGS["sections"].unparse()


def test_a_gpu_targets_sections_go_to_a_file_of_their_own(tmp_path):
  """What was compiled for a GPU without one (`--target`) is kept apart from this machine's
  own measurements: target_<name>.json, never merged into <backend>.json."""
  import json
  ours = {"backend": "cpu", "sizes": {"d_model": 8}, "step": ["ours"]}
  bench.write_out(ours, str(tmp_path))
  bench.write_out({"backend": "cpu", "target": "a100", "sizes": {"d_model": 128},
                   "compiled": ["a100's"]}, str(tmp_path))
  assert json.loads((tmp_path / "cpu.json").read_text()) == ours, "the target's rows went in"
  target = json.loads((tmp_path / "target_a100.json").read_text())
  assert target["compiled"] == ["a100's"] and target["sizes"] == {"d_model": 128}, target


def test_a_later_bench_keeps_an_earlier_ones_other_sections_and_replaces_its_own(tmp_path):
  """Two bench calls into one --out (a GPU plan's steps): the file holds both calls' sections,
  a section run again replaced by its new rows."""
  import json
  bench.write_out({"backend": "cpu", "step": ["first"], "scan": ["first"]}, str(tmp_path))
  bench.write_out({"backend": "cpu", "scan": ["second"], "eval": ["second"]}, str(tmp_path))
  got = json.loads((tmp_path / "cpu.json").read_text())
  assert (got.get("step"), got.get("scan"), got.get("eval")) == (["first"], ["second"], ["second"]), got


def test_the_cells_sizes_give_way_to_each_size_flag_given():
  """--batch, --length, --d_model, --d_state each replace the cell's value (the rehearsal's tiny
  cell, a GPU session's other widths); the others stay the cell's."""
  assert bench.sizes() == {"batch": 4, "length": 12, "d_model": 8, "d_state": 2}, bench.sizes()
  try:
    flags.FLAGS["d_state"].unparse()
    assert bench.sizes() == {"batch": 4, "length": 12, "d_model": 8,
                             "d_state": bench.CELLS["cpu"]["d_state"]}, bench.sizes()
  finally:
    flags.FLAGS["d_state"].parse("2")


def test_registers_compiles_the_families_of_the_models_asked_for(monkeypatch):
  """`--sections=registers --models=mamba` compiles mamba's time-parallel backward (decay, two
  scans per state), not negmamba's; without --models every kind on its representative."""
  from launch import bench_registers
  asked = []
  monkeypatch.setattr(bench_registers, "bench_registers",
                      lambda sizes, kernels, **kw: asked.append((kw.get("kinds"), kernels)) or {})
  monkeypatch.setattr(bench_registers, "render", lambda result: "")
  run_section_per_models("registers", ["mamba,aussm", None])
  every = list(bench_registers.KERNELS)
  assert asked == [({"real": "decay", "phase": "rotation"}, every), (None, every)], asked
  # --methods narrows the kernels compiled to the Triton kernels it names
  asked.clear()
  try:
    flags.FLAGS["methods"].parse("pallas_chunked,chunked")
    run_section_per_models("registers", [None])
  finally:
    flags.FLAGS["methods"].unparse()
  assert asked == [(None, ["pallas_chunked"])], asked


@pytest.mark.skipif(jax.default_backend() == "gpu", reason="the fused kernels run on a GPU")
def test_train_many_says_when_none_of_the_methods_asked_for_runs_here(capsys):
  """--methods=pallas_parallel on a CPU: train_many times nothing for the model and says so,
  with the methods it can use, instead of printing nothing."""
  try:
    for name, value in (("out", ""), ("sections", "train_many"), ("train_many_models", "mamba"),
                        ("methods", "pallas_parallel")):
      flags.FLAGS[name].parse(value)
    bench.main([])
  finally:
    for name in ("out", "sections", "train_many_models", "methods"):
      flags.FLAGS[name].unparse()
  printed = capsys.readouterr().out
  assert "none of --methods=pallas_parallel runs here" in printed and "chunked" in printed, printed


def test_train_many_defaults_keep_the_cpu_bench_short(monkeypatch):
  """With no --methods and no --train_many_k, train_many times the method auto picks, at
  K = 1, 9 on a CPU (27 CPU-cell runs compile for minutes) and 1, 9, 27 elsewhere."""
  assert bench._train_many_methods("negmamba") == [scan.resolve("auto")]
  assert bench._train_many_methods("rnn") == ["sequential"]
  monkeypatch.setattr(scan, "HOUSEHOLDER_AUTO", "associative")  # what deltanet's auto runs
  assert bench._train_many_methods("deltanet") == ["associative"]
  want = [1, 9] if jax.default_backend() == "cpu" else [1, 9, 27]
  assert bench.train_many_ks() == want
  try:
    flags.FLAGS["methods"].parse("associative,chunked")
    flags.FLAGS["train_many_k"].parse("1,27")
    assert bench._train_many_methods("negmamba") == ["associative", "chunked"]
    assert bench.train_many_ks() == [1, 27], "an explicit --train_many_k was not used"
  finally:
    flags.FLAGS["methods"].parse("")
    flags.FLAGS["train_many_k"].parse("")


def test_json_output_is_only_json_and_progress_goes_to_stderr():
  import json
  out = launcher.run(["launch.bench", "--json", "--sections=step",
                      "--models=rnn", "--reps=1", "--out=", "--batch=4", "--length=12",
                      "--d_model=8", "--d_state=2"], timeout=600)
  assert out.returncode == 0, out.stderr[-2000:]
  json.loads(out.stdout)  # `launch.bench --json | jq` needs stdout to be the JSON alone
  assert "step: rnn" in out.stderr, "progress lines are gone, not moved"


def test_precision_section_times_float32_and_tf32x3_against_tf32_with_their_gradients(
    monkeypatch):
  """Each precision's step timed and its gradients set against float32's: on a CPU all three
  are float32 (errors 0); with gradients that differ by precision, each is paired with its own."""
  import numpy as np
  from launch import bench_precision
  rows = bench_precision.bench_precision(bench.step_config, ["negmamba"], reps=1)
  r = rows[0]
  assert min(r["float32_ms"], r["tensorfloat32_ms"], r["tf32x3_ms"]) > 0, r
  assert r["float32_over_tf32"] > 0 and r["tf32x3_over_tf32"] > 0, r
  assert r["grad_rel_err_vs_float32"] == {"tensorfloat32": 0.0, "tf32x3": 0.0}, r
  off = {"float32": 1.0, "tensorfloat32": 1.1, "tf32x3": 1.01}
  # the steps themselves checked above: from here on, no compiling them again
  monkeypatch.setattr(bench_precision, "prepare", lambda chunk, state, hp: (
      lambda state, hp: jax.block_until_ready(state["step"]), 0.0, None, {}))
  monkeypatch.setattr(bench_step, "reference_grads", lambda trainer, state: [
      np.full(4, off[trainer.cfg.matmul_precision])])
  r = bench_precision.bench_precision(bench.step_config, ["negmamba"], reps=1)[0]
  assert r["grad_rel_err_vs_float32"] == {"tensorfloat32": 0.1, "tf32x3": 0.01}, r
  # each precision's time is set against TF32's (a clock: float32 2 s, TF32 1 s, tf32x3 3 s)
  monkeypatch.setattr(bench_precision, "interleaved", lambda calls, reps: [2.0, 1.0, 3.0])
  r = bench_precision.bench_precision(bench.step_config, ["negmamba"], reps=1)[0]
  assert (r["float32_over_tf32"], r["tf32x3_over_tf32"], r["tensorfloat32_ms"]) == (
      2.0, 3.0, 1000.0), r
  # a precision the device cannot compile is a result beside the others, not a crash
  monkeypatch.setattr(bench_step, "reference_grads", lambda trainer, state: 1 / 0 if (
      trainer.cfg.matmul_precision == "tf32x3") else [np.full(4, 1.0)])
  r = bench_precision.bench_precision(bench.step_config, ["negmamba"], reps=1)[0]
  assert "ZeroDivisionError" in r["tf32x3_error"] and "tf32x3_ms" not in r, r
  assert r["float32_over_tf32"] > 0 and r["grad_rel_err_vs_float32"] == {"tensorfloat32": 0.0}
