"""What a training step reads and writes, from its compiled program: for this machine's device,
or for a GPU compiled here without one (`--target`):

    python -m launch.bench --sections=compiled --target=h200 --models=mamba --profile_k=27

XLA compiles for a GPU from a description of it (SMs, bandwidth, caches, compute capability:
`launch/gpu_targets/<name>.txtpb`) through jax's CUDA plugin with no GPU attached, so the
program is the one a lent GPU would build, with that XLA's fusions, the Pallas kernels lowered
through Triton, and cuBLAS calls where autotuning would have chosen among gemms (the one part
that differs: results/bench/README.md, "A GPU's step compiled without a GPU"). The section sums
the bytes each instruction of one training step reads and writes (`hlo.loop_body_bytes`:
the training loop's body, a loop inside it once per iteration) by kind of op, names the
costliest ops, and gives XLA's memory estimate of the program (whether a group fits that GPU).
Outside the scan kernels a 27-run step ran at the H200's bandwidth (4.07 TB/s: "The bytes of
a 27-run step"), so these bytes say, before a GPU minute is spent, what a change
to the layers does to that part of a step; the kernels' own time is the instruction counts'
(`--sections=registers`) or a GPU's.

A GPU target needs jax's CUDA plugin at jax's version, without CUDA's libraries (nothing runs):
`pip install --no-deps jax-cuda13-plugin==V jax-cuda13-pjrt==V` and
`JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1` (the README gives the Python 3.12 environment that has
the lent GPUs' jax 0.11.2).
"""
from __future__ import annotations

import collections
import contextlib
import json
import pathlib
import re
import time

import jax

from launch import bench_profile, hlo
from ssm_bench import memory, train

TARGETS = {p.stem: p for p in sorted((pathlib.Path(__file__).parent / "gpu_targets")
                                     .glob("*.txtpb"))}
TOP_OPS = 12
# TB/s that a target's ops outside the scan kernels ran at in a measured step: the seventh H200
# session's 27-run mamba step, 30.5 GB in 7.48 ms (results/bench/README.md, "The bytes of a
# 27-run step"), 85% of the part's 4.8. A target without one gets no time.
MEASURED_TB_S = {"h200": 4.07}
KERNELS = bench_profile.KINDS[0][0]  # the scan kernels, as bench_profile names them


class TargetError(Exception):
  """A GPU target that cannot be compiled for here: one line saying what to install or pick."""


def _known(target: str) -> pathlib.Path:
  if target not in TARGETS:
    raise TargetError(f"--target: unknown {target}; choose from {', '.join(TARGETS)}")
  return TARGETS[target]


def _number(text: str, field: str) -> int | None:
  m = re.search(rf"\b{field}:\s*(\d+)", text)
  return int(m.group(1)) if m else None


def compute_capability(target: str) -> int:
  """A target's compute capability as Triton and ptxas name it (sm_80: 80, sm_89: 89)."""
  block = re.search(r"cuda_compute_capability\s*\{([^}]*)\}", _known(target).read_text())
  major = _number(block.group(1), "major") if block else None
  if major is None:
    raise TargetError(f"{TARGETS[target]} names no cuda_compute_capability major")
  return 10 * major + (_number(block.group(1), "minor") or 0)


def device_memory(target: str) -> float:
  """A target's device memory in bytes (its `device_memory_size`)."""
  size = _number(_known(target).read_text(), "device_memory_size")
  if size is None:
    raise TargetError(f"{TARGETS[target]} names no device_memory_size")
  return float(size)


def target_device(target: str | None):
  """The device to compile for: this machine's first, or a compile-only GPU `target`."""
  if not target:
    return jax.devices()[0]
  config = _known(target).read_text()
  from jax.experimental import topologies
  try:
    topology = topologies.get_topology_desc(target, "cuda", topology="1x1x1",
                                            target_config=config)
  except (NotImplementedError, RuntimeError) as e:
    raise TargetError(
        f"--target={target} needs jax's CUDA plugin ({type(e).__name__}: {str(e)[:120]}): "
        f"pip install --no-deps jax-cuda13-plugin=={jax.__version__} "
        f"jax-cuda13-pjrt=={jax.__version__}; export JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1") from None
  return topology.devices[0]


@contextlib.contextmanager
def as_gpu(target: str | None):
  """While a GPU target's program is traced, the suite's choices by backend (`auto`'s method,
  channels-first layers, the kernels compiled rather than interpreted) are the GPU's: they ask
  `jax.default_backend()`, which here is the CPU. Pallas asks the attached GPU for its compute
  capability (jax 0.11); the target's name gives it."""
  if not target:
    yield
    return
  saved = jax.default_backend
  patched = []
  try:
    from jax._src.pallas.triton import gpu_info
    version = getattr(gpu_info, "GpuVersion", None)
    by_name = {v.name.lower(): v for v in version} if version else {}
    if target in by_name:
      patched.append((gpu_info, gpu_info.get_gpu_info))
      gpu_info.get_gpu_info = lambda: gpu_info.get_gpu_info_from_version(by_name[target])
  except ImportError:  # jax 0.10 asks nothing
    pass
  jax.default_backend = lambda: "gpu"
  try:
    yield
  finally:
    jax.default_backend = saved
    for module, fn in patched:
      module.get_gpu_info = fn


def compiled_one(cfg, k: int, target: str | None, device=None) -> dict:
  """One row: cfg's training chunk vmapped over k runs, compiled for `target` (on `device`, its
  `target_device`), its bytes per training step by kind and the costliest ops."""
  device = device or target_device(target)
  with as_gpu(target):
    trainer = train.Trainer(cfg)
    init_many, chunk_many = trainer.compiled(donate=False)
    hp = train.hparams([cfg.replace(seed=i) for i in range(k)])
    t0 = time.perf_counter()
    compiled = chunk_many.lower(*memory.placed((jax.eval_shape(init_many, hp), hp),
                                               device)).compile()
  compile_s = time.perf_counter() - t0
  text = compiled.as_text()
  moved, sources = hlo.loop_body_bytes(text, cfg.log_every), hlo.sources(text)
  per_kind, ops = collections.Counter(), []
  for name, nbytes in moved.items():
    source = sources.get(name, "")
    kind = bench_profile._refine(bench_profile.kind_of(name), source)
    per_kind[kind] += nbytes
    ops.append((nbytes, name, kind, source))
  gb = lambda b: float(f"{b / 1e9:.4g}")
  timed = outside_kernels_ms(per_kind, target)
  return {"k": k, "target": target or jax.devices()[0].device_kind, **timed,
          "compile_s": round(compile_s, 2),
          "memory_gb": gb(memory.executable_bytes(compiled)),
          "gb_per_step": gb(sum(per_kind.values())),
          "gb_per_run_step": gb(sum(per_kind.values()) / k),
          "gb_by_kind": {kind: gb(b) for kind, b in per_kind.most_common()},
          "top_ops": [{"op": n, "kind": kind, "gb": gb(b), "detail": s[:200]}
                      for b, n, kind, s in sorted(ops, reverse=True)[:TOP_OPS]]}


def outside_kernels_ms(bytes_by_kind: dict, target: str | None) -> dict:
  """The time of a step's ops outside the scan kernels at the rate such ops ran at on `target`
  (`MEASURED_TB_S`; they are bandwidth-bound there): {} for a target never measured. The
  kernels' own time is their instruction counts' or a GPU's, not their bytes'."""
  if target not in MEASURED_TB_S:
    return {}
  outside = sum(b for kind, b in bytes_by_kind.items() if kind != KERNELS)
  return {"outside_kernels_gb": float(f"{outside / 1e9:.4g}"),
          "outside_kernels_ms_per_step": round(outside / 1e9 / MEASURED_TB_S[target], 3)}


def bench_compiled(step_config, models, ks, target: str | None = None,
                   methods=lambda model: ("auto",), steps_per_chunk: int = 5) -> list:
  """Rows per (model, scan method, K): `compiled_one` at step_config(model, method)."""
  device = target_device(target)  # one that cannot be compiled for: one error, before any model
  return bench_profile.rows_per_cell(lambda cfg, k: compiled_one(cfg, k, target, device),
                                     step_config, models, ks, methods, steps_per_chunk)


def render(rows) -> str:
  out = []
  for r in rows:
    name = f"{r['model']} ({r['method']}) K={r['k']}"
    if "error" in r:
      out.append(f"{name}: {r['error']}")
      continue
    total = r["gb_per_step"] or 1.0
    out.append(f"{name}, compiled for {r['target']} in {r['compile_s']} s: {total:.4g} GB per "
               f"step ({r['gb_per_run_step']:.4g} per run-step); XLA's memory estimate "
               f"{r['memory_gb']:.4g} GB")
    out += [f"  {kind:<28} {gb:9.4g} GB  {100 * gb / total:5.1f}%"
            for kind, gb in r["gb_by_kind"].items()]
    if "outside_kernels_ms_per_step" in r:
      out.append(f"  outside the scan kernels {r['outside_kernels_gb']:.4g} GB: "
                 f"{r['outside_kernels_ms_per_step']:.3f} ms per step, "
                 f"{r['outside_kernels_ms_per_step'] / r['k']:.4f} per run-step at the "
                 f"{MEASURED_TB_S[r['target']]} TB/s such ops ran at on this GPU")
    out.append("  costliest ops:")
    out += [f"    {o['op'][:40]:<40} {o['gb']:9.4g} GB  {o['kind']}  {o['detail'][:100]}"
            for o in r["top_ops"]]
  return "\n".join(out) if out else json.dumps(rows)
