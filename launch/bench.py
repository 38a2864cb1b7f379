"""Benchmarks on the current backend, in one process, inputs generated once.

  python -m launch.bench                      # the cell for this backend (CPU: a small one)
  python -m launch.bench --cell=paper         # batch 256, length 60, d_model 128, d_state 64
  python -m launch.bench --json --models=mamba,negmamba --reps=5
  python -m launch.bench --cell=paper --sections=train_many --methods=pallas --train_many_k=1,27
                                              # per-run cost of a 27-run group (GPU)
  python -m launch.bench --cell=paper --sections=tiles      # the fused kernel's tiles (GPU)

Each timing: compile measured separately, one warm-up, then the median of --reps runs; the
methods of one model's step are timed in turn within each repetition, so their ratio is fair. Every
variant is first checked against a reference (the sequential scan, a float64 NumPy loop,
separate runs, per-length evaluation) and the check's result is part of the output. Memory is
XLA's own estimate for the compiled program (`memory_analysis`, any backend) and, where the
device reports it, the measured peak. Writes results/bench/<backend>.json after every section.
"""
from __future__ import annotations

import json
import os

from absl import flags
import jax

from launch import bench_chunked_tiles
from launch import bench_compiled
from launch import bench_eval
from launch import bench_eval_tiles
from launch import bench_projection
from launch import bench_registers
from launch import bench_step
from launch import bench_tiles
from launch import bench_tiles_result
from launch import bench_train_many
from launch import bench_precision
from launch import bench_profile
from launch import bench_workers
from launch import common
from ssm_bench import evaluation
from ssm_bench import models
from ssm_bench import scan
from ssm_bench import train
from ssm_bench.config import PRESETS, TrainConfig

# The paper's cell, and one a 2-core CPU times in a few minutes.
CELLS = {"paper": dict(batch=256, length=60, d_model=128, d_state=64),
         "cpu": dict(batch=64, length=60, d_model=32, d_state=16)}
_CELL = flags.DEFINE_enum("cell", None, list(CELLS), "Sizes to time (default: cpu on CPU, "
                          "paper elsewhere); --batch etc. override single sizes.")
_MODELS = flags.DEFINE_string("models", None, "Comma list of models to time (default: the "
                              "built-in layers).")
_BATCH = flags.DEFINE_integer("batch", None, "Batch size for the step timings.", lower_bound=1)
_LENGTH = flags.DEFINE_integer("length", None, "Sequence length for the step timings.", lower_bound=1)
_D_MODEL = flags.DEFINE_integer("d_model", None, "Width for the step timings.", lower_bound=1)
_D_STATE = flags.DEFINE_integer("d_state", None, "State size for the step timings.", lower_bound=1)
_REPS = flags.DEFINE_integer("reps", 5, "Timed repetitions (median reported).", lower_bound=1)
_SECTIONS = flags.DEFINE_list("sections", ["step", "scan", "train_many", "eval", "sampling"],
                              "Which benchmarks to run; also 'projection' (device-hours of "
                              "table2 and table2_lite; minutes on a CPU), 'tiles' (the fused "
                              "kernel's tile sizes; GPU only), 'parallel_tiles' (the same for "
                              "the time-parallel kernel, against pallas, for the kernel kinds "
                              "of --models; GPU only), 'chunked_tiles' (the same for the "
                              "chunked kernel, against pallas_parallel), 'eval_tiles' (the "
                              "step-by-step kernel's forward where it runs: evaluation, one "
                              "run, eval_chunk x eval_length, or --batch x --length), 'registers' "
                              "(each Triton kernel's registers and spills per tile, compiled "
                              "by the triton package for --target's compute capability, "
                              "default sm_90; no GPU needed), 'profile' "
                              "(a profiler trace of training steps by kind of op, at "
                              "--profile_k), 'eval_profile' (the same for one run's "
                              "evaluation as a sweep scores it), 'precision' "
                              "(a step in float32 and tf32x3 vs TF32 matmuls, with their "
                              "gradients), 'compiled' (the GB a training step reads and writes, by "
                              "kind of op, from its compiled program at --profile_k; --target: "
                              "compiled for that GPU without one) and 'workers' (a CPU sweep "
                              "in one process vs --bench_workers processes).")
_WORKERS = flags.DEFINE_list("bench_workers", ["1", "2"], "workers: the worker counts to "
                             "time (1: in this process, as a sweep's default).")
_WORKERS_STEPS = flags.DEFINE_integer("bench_workers_steps", 1000, "workers: steps per run.",
                                      lower_bound=1)
_PROFILE_K = flags.DEFINE_list("profile_k", ["1", "27"], "profile, compiled: vmapped group "
                               "sizes.")
_TARGET = common.TARGET  # compiled, registers: a GPU of launch/gpu_targets
_JSON = flags.DEFINE_bool("json", False, "Print JSON instead of tables.")
_K_SAMPLE = flags.DEFINE_integer("projection_k", None, "projection: runs per timed group (default "
                                 "27 on accelerators, 1 on CPU), scaled linearly to the group.",
                                 lower_bound=1)
_OUT = flags.DEFINE_string("out", "results/bench", "Directory for <backend>.json, or "
                           "target_<name>.json with --target ('' for none).")
_APPLY_TILES = flags.DEFINE_bool("apply_tiles", False, "The tile sections (tiles, "
                                 "parallel_tiles, chunked_tiles, eval_tiles): "
                                 "make the best tiles found the kernel's defaults for the "
                                 "sections after it in this run (e.g. then train_many), so one "
                                 "device call sweeps and times the result; the source's "
                                 "defaults are unchanged.")
_REHEARSE = flags.DEFINE_bool("rehearse", False, "Run the GPU's sections and scan methods off a "
                              "GPU, the Triton kernels in interpret mode: a check that a GPU "
                              "plan's commands run through (bash .ci/gpu_plan --rehearse STEP) "
                              "before device minutes go to them; its numbers are no timings.")
# rendered and applied alike
TILE_SECTIONS = ("tiles", "parallel_tiles", "chunked_tiles", "eval_tiles")
_METHODS = flags.DEFINE_list("methods", [], "step, train_many, profile, registers: only these "
                             "scan methods (default: step times every method the model has "
                             "here, train_many and profile the one auto picks, registers every "
                             "Triton kernel).")


def sizes() -> dict:
  """The cell's sizes, with any size flag given on the command line taking precedence."""
  here = "cpu" if jax.default_backend() == "cpu" and not _TARGET.value else "paper"
  cell = CELLS[_CELL.value or here]
  given = {"batch": _BATCH.value, "length": _LENGTH.value, "d_model": _D_MODEL.value,
           "d_state": _D_STATE.value}
  return {k: given[k] if given[k] is not None else v for k, v in cell.items()}


def as_on_a_gpu() -> bool:
  """On a GPU, rehearsing a GPU's commands (--rehearse) or compiling for one (--target)."""
  return jax.default_backend() == "gpu" or (flags.FLAGS.is_parsed() and
                                            (_REHEARSE.value or bool(_TARGET.value)))


def methods_for(model: str) -> tuple:
  """The scan methods a model's layer can use here: rnn has one program; the fused kernel is
  timed only on a GPU (elsewhere it runs in interpret mode, correct but not a timing)."""
  from ssm_bench import registry
  spec = registry.get(model)
  if not spec.uses_scan_method:  # one program whatever the method
    return ("sequential",)
  if spec.scan_family is None:  # only the reference methods apply
    return scan.REFERENCE
  if not as_on_a_gpu():
    return scan.REFERENCE + ("chunked",)
  from ssm_bench.scan import pallas_chunked  # its own kernels only for its FAMILIES
  return tuple(m for m in scan.METHODS if m != "auto" and (
      m != "pallas_chunked" or spec.scan_family in pallas_chunked.FAMILIES))


def step_config(model: str, method: str, **kw) -> TrainConfig:
  z = sizes()
  return TrainConfig(task="C2", model=model, scan_method=method, d_model=z["d_model"],
                     d_state=z["d_state"], batch_size=z["batch"], train_length=z["length"],
                     steps=1, log_every=1, checkpoint_every=1, curriculum_start=z["length"], **kw)


def eval_config(model: str) -> TrainConfig:
  """The eval_profile section's config: table2_lite's (padded to order 60) at the cell's width
  and states and evaluation's sizes (`bench_eval_tiles.regime`: --batch sequences per chunk,
  --length steps, at least the grid's first length)."""
  z = bench_eval_tiles.regime(sizes(), _BATCH.value, _LENGTH.value)
  cfg = TrainConfig(task="C2", model=model, **PRESETS["table2_lite"])
  length = max(z["length"], evaluation.GRID[0])
  return cfg.replace(d_model=z["d_model"], d_state=z["d_state"], eval_chunk=z["batch"],
                     eval_length=length, eval_seqs=z["eval_seqs"],
                     train_length=min(cfg.train_length, length))


def train_many_base(model: str) -> TrainConfig:
  """The train_many section's config: the cell's step config, 5-step programs, a short
  curriculum start so the 5 steps train on the cell's length."""
  return step_config(model, "auto").replace(steps=5, log_every=5, checkpoint_every=5,
                                            curriculum_start=2)


def render(section: str, result) -> str:
  """A compact text table for the sections people read most; JSON for the rest."""
  if section in TILE_SECTIONS:
    return bench_tiles_result.render(result)
  if section == "profile":
    return bench_profile.render(result)
  if section == "eval_profile":
    return bench_profile.render_eval(result)
  if section == "compiled":
    return bench_compiled.render(result)
  if section == "registers":
    return bench_registers.render(result)
  if section == "step":
    return bench_step.render(result)
  if section == "train_many":
    return bench_train_many.render(result)
  return f"{section} {json.dumps(result, indent=1)}"



_TM_MODELS = flags.DEFINE_list("train_many_models", ["negmamba"], "train_many: the models to time "
                                "at K = 1, 9, 27 runs per program.")
_LAYER_LAYOUTS = flags.DEFINE_list("layer_layouts", [], "train_many: time a method that runs the "
                                   "time-parallel kernel once per layout the layers build its "
                                   f"factors in ({', '.join(bench_train_many.LAYER_LAYOUTS)}; "
                                   "default: as set in pallas_parallel.CHANNELS_FIRST_LAYERS); "
                                   "with --apply_tiles the faster is kept for later sections.")


_TM_K = flags.DEFINE_list("train_many_k", [], "train_many: the group sizes K (default 1, 9, 27; "
                          "1, 9 on CPU); K = 1 comes first (the runs alone that the groups are "
                          "checked against).")


def train_many_ks() -> list[int]:
  """--train_many_k, else 1, 9, 27; on a CPU 1, 9: 27 runs of the CPU cell compile for minutes
  and cost 17x the per-run time of 9 there (results/bench/README.md), so the default bench would not end in
  a few minutes."""
  given = _TM_K.value or (["1", "9"] if jax.default_backend() == "cpu" else ["1", "9", "27"])
  return [int(k) for k in given]


_PROJ_SWEEPS = flags.DEFINE_list("projection_sweeps", ["table2", "table2_lite"],
                                 "projection: the sweeps to project.")


def _methods(model: str):
  """The model's methods here, narrowed to --methods when given (possibly to none)."""
  return [m for m in methods_for(model) if not _METHODS.value or m in _METHODS.value]


def _train_many_methods(model: str):
  """--methods when given, else the one method `auto` runs for the model here: 27 runs through
  every method is minutes of compilation on a CPU (associative alone took more than 5)."""
  if _METHODS.value:
    return _methods(model)
  return [_auto_method(model)]


def _profiled_methods(model: str):
  """profile, compiled: --methods when given, else the one method `auto` runs."""
  return _methods(model) if _METHODS.value else ("auto",)


def _none_here(model: str) -> dict:
  """train_many's row for a model none of whose --methods runs on this backend."""
  return {"config": model, "methods": {}, "skipped": (
      f"none of --methods={','.join(_METHODS.value)} runs here; {model} can use "
      f"{', '.join(methods_for(model))} (the fused kernels are timed on a GPU only)")}


def _auto_method(model: str) -> str:
  """The method the model's `auto` runs here (its first layer's; a layer without a scan: its
  one program, 'sequential')."""
  auto = models.scan_auto(train.model_config(step_config(model, "auto")))
  return auto.split(", ")[0] if auto else methods_for(model)[0]


def checked_flags() -> tuple[list, dict]:
  """(the models to time, {section: its benchmark}) after every flag value is checked: a wrong
  one is one UsageError naming the choices, before anything runs."""
  from launch import sweeps
  from ssm_bench import registry
  common.load_plugins()
  builtin = [s.name for s in registry.specs() if s.builtin]
  names = [n for n in (_MODELS.value or ",".join(builtin)).split(",") if n]
  for flag, given, valid in (("models", names, registry.names()),
                             ("train_many_models", _TM_MODELS.value, registry.names()),
                             ("methods", _METHODS.value, bench_step.METHOD_COLUMNS),
                             ("layer_layouts", _LAYER_LAYOUTS.value,
                              list(bench_train_many.LAYER_LAYOUTS)),
                             ("projection_sweeps", _PROJ_SWEEPS.value, sweeps.SWEEPS)):
    unknown = [v for v in given if v not in valid]
    if unknown:
      raise common.UsageError(f"--{flag}: unknown {', '.join(map(repr, unknown))}; choose from "
                              f"{', '.join(valid)}")
  bad_k = [k for k in _TM_K.value + _PROFILE_K.value + _WORKERS.value
           if not (k.isdigit() and int(k) >= 1)]
  if bad_k:
    raise common.UsageError("--train_many_k, --profile_k, --bench_workers: "
                            f"{', '.join(map(repr, bad_k))}; choose from positive integers")
  gpu = {"need_gpu": not _REHEARSE.value}  # the Triton kernels' sections
  benches = {"step": lambda: bench_step.bench_step(
                 names, _REPS.value, step_config, methods_for, _auto_method,
                 methods=_METHODS.value or None),
             "scan": lambda: bench_step.bench_scan(_REPS.value, sizes(), methods_for("negmamba")),
             "train_many": lambda: [bench_train_many.bench_train_many(
                 _REPS.value, train_many_base(n), methods=_train_many_methods(n),
                 ks=train_many_ks(), layer_layouts=_LAYER_LAYOUTS.value)
                 if _train_many_methods(n) else _none_here(n) for n in _TM_MODELS.value],
             "eval": lambda: bench_eval.bench_eval(_REPS.value),
             "sampling": lambda: bench_eval.bench_sampling(_REPS.value, sizes(), step_config),
             "tiles": lambda: bench_tiles.bench_tiles(_REPS.value, sizes(), models=names,
                                                    **gpu),
             "parallel_tiles": lambda: bench_tiles.bench_parallel_tiles(
                 _REPS.value, sizes(), kinds=bench_tiles.kinds_of(names), **gpu),
             "chunked_tiles": lambda: bench_chunked_tiles.bench_chunked_tiles(
                 _REPS.value, sizes(), kinds=bench_tiles.kinds_of(names), **gpu),
             "eval_tiles": lambda: bench_eval_tiles.bench_eval_tiles(
                 _REPS.value, bench_eval_tiles.regime(sizes(), _BATCH.value, _LENGTH.value),
                 models=names, **gpu),
             "registers": lambda: bench_registers.for_target(
                 _TARGET.value or bench_registers.TARGET, sizes(),
                 kernels=[m for m in bench_registers.KERNELS
                          if not _METHODS.value or m in _METHODS.value],
                 **({"kinds": bench_tiles.kinds_of(names)} if flags.FLAGS["models"].present
                    else {})),
             "precision": lambda: bench_precision.bench_precision(step_config, names,
                                                                  _REPS.value),
             "profile": lambda: bench_profile.bench_profile(
                 step_config, names, [int(k) for k in _PROFILE_K.value], reps=_REPS.value,
                 methods=_profiled_methods),
             "compiled": lambda: bench_compiled.bench_compiled(
                 step_config, names, [int(k) for k in _PROFILE_K.value], target=_TARGET.value,
                 methods=_profiled_methods),
             "eval_profile": lambda: bench_profile.bench_eval_profile(eval_config, names,
                                                                     reps=_REPS.value),
             "workers": lambda: bench_workers.bench_workers(
                 names if flags.FLAGS["models"].present else ["mamba"],
                 [int(n) for n in _WORKERS.value], steps=_WORKERS_STEPS.value),
             "projection": lambda: bench_projection.bench_projection(
                 _REPS.value, _PROJ_SWEEPS.value, k_sample=_K_SAMPLE.value,
                 models=set(names) if flags.FLAGS["models"].present else None)}
  unknown = [s for s in _SECTIONS.value if s not in benches]
  if unknown:
    raise common.UsageError(f"unknown section {unknown[0]!r}; choose from {', '.join(benches)}")
  if _TARGET.value:  # unknown, or no CUDA plugin to compile with: one line, before anything runs
    try:
      bench_compiled.compute_capability(_TARGET.value)
      if "compiled" in _SECTIONS.value:  # the registers section needs only the triton package
        bench_compiled.target_device(_TARGET.value)
    except bench_compiled.TargetError as e:
      raise common.UsageError(str(e)) from None
  return names, benches


def main(argv):
  del argv
  names, benches = checked_flags()
  out = {"backend": jax.default_backend(), "device": jax.devices()[0].device_kind,
         "jax": jax.__version__, "reps": _REPS.value, "sizes": sizes(),
         **({"target": _TARGET.value} if _TARGET.value else {})}
  if _REHEARSE.value:
    out["rehearsal"] = "interpret mode off a GPU: checks that the commands run, no timings"
  for section in _SECTIONS.value:
    out[section] = benches[section]()
    if _APPLY_TILES.value and section in TILE_SECTIONS:
      out[section]["applied"] = bench_tiles_result.apply(out[section])
    if _APPLY_TILES.value and section == "train_many":
      out["train_many_applied"] = bench_train_many.apply_layer_layout(out[section])
    if not _JSON.value:
      print(render(section, out[section]), flush=True)
    # after every section: a command cut off by a time limit keeps the sections it finished
    write_out(out, _OUT.value)
  if _JSON.value:
    common.print_json(out)


def write_out(out: dict, directory: str):
  """Merge `out` into <directory>/<backend>.json, or target_<name>.json for a GPU compiled for
  without one (its cell and sections are that GPU's, not this machine's): sections run now
  replace the same sections of an earlier file ('' writes nothing)."""
  if not directory:
    return
  os.makedirs(directory, exist_ok=True)
  name = f"target_{out['target']}" if "target" in out else out["backend"]
  path = os.path.join(directory, f"{name}.json")
  try:
    with open(path) as f:
      merged = json.load(f)
  except (OSError, ValueError):
    merged = {}
  merged.update(out)
  with open(path, "w") as f:
    json.dump(merged, f, indent=1)


if __name__ == "__main__":
  common.run_main(main)
