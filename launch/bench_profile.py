"""Where a training step's time goes: a jax profiler trace of a few chunks, summarised by kind.

    python -m launch.bench --sections=profile --models=mamba,aussm --profile_k=1,27

For each model and group size K, a compiled chunk of training steps is run under
`jax.profiler.trace` (Perfetto JSON), and the trace's op events are summed per kind: the scan
kernels (Pallas/Triton custom calls), matmuls, fusions, copies, reductions, the optimizer update
(ops under the `optimizer` name scope, where the trace names scopes) and the rest, per training
step, with the host gap = wall time (of the same chunks untraced) - device time. The scan's
other ops (a plain-JAX scan's, a kernel's preparation) are a kind of their own, found by the
source file their instructions name (ssm_bench/scan/). Then the costliest ops outside the
scan by name, each with where it comes from: the jax op path
and Python line of its instruction in the compiled program's HLO (`hlo.sources`; the GPU trace
itself names no scopes), which is also how the optimizer's ops are found there. Each kind and
op also has the GB it reads and writes per step (`hlo.bytes_moved`: operand and result sizes in the
same HLO), so its ms say how near it ran to the device's bandwidth. On a GPU the
ops are the device's; on a CPU the XLA thunks on the host threads (which may overlap: their sum
can exceed the wall time).
Each row also counts the matmul work of one run's step (from its jaxpr, so the same on every
backend) and the rate the traced matmuls reached: float32 (TF32-free) matmuls near the device's
FP32 peak, or far below it, tell where a step's floor is.
"""
from __future__ import annotations

import collections
import glob
import gzip
import json
import os
import re
import tempfile
import time

import jax
import jax.extend
import numpy as np

from launch import hlo
from ssm_bench import train

# The host runtime's own events (not ops): dispatch, buffers, threads, Python frames.
_RUNTIME = re.compile(r"^(\$|end: |PjitFunction|Threadpool|CommonPjRt|Handle |Wait for|Allocate|"
                      r"ParseArguments|PythonRefManager|ThunkExecutor|TfrtCpu|PjRt|Execute)")
# (kind, pattern on the op name or its scope), first match wins; containers are not ops.
KINDS = (("scan kernel (custom call)", re.compile(r"pallas|triton|custom.?call|_kernel", re.I)),
         ("optimizer update", re.compile(r"optimizer", re.I)),
         ("matmul", re.compile(r"dot|gemm|cublas|matmul|convolution", re.I)),
         ("copy / transpose", re.compile(r"copy|transpose|memcpy|dynamic.?(update.?)?slice|"
                                         r"concatenate|pad\b", re.I)),
         ("reduction", re.compile(r"reduce", re.I)),
         ("fusion", re.compile(r"fusion", re.I)))
_CONTAINERS = re.compile(r"^(while|conditional|call)(\.|$)", re.I)
# The scan's own XLA ops (a plain-JAX scan's every op, a kernel's preparation of its factors):
# by where the program says they come from, so a CPU step, with no kernel, still says its share.
SCAN_OPS = "scan (XLA ops)"
SCAN_KINDS = (KINDS[0][0], SCAN_OPS)


def _events(trace_dir: str):
  paths = glob.glob(os.path.join(trace_dir, "**", "perfetto_trace.json.gz"), recursive=True)
  if not paths:
    return [], {}
  with gzip.open(sorted(paths)[-1]) as f:
    data = json.load(f)
  events = data["traceEvents"] if isinstance(data, dict) else data
  procs = {e["pid"]: e.get("args", {}).get("name", "") for e in events
           if e.get("ph") == "M" and e.get("name") == "process_name"}
  return [e for e in events if e.get("ph") == "X"], procs


def kind_of(name: str, scope: str = "") -> str | None:
  """The kind of an op event (None for containers such as while loops)."""
  if _CONTAINERS.match(name):
    return None
  for kind, pattern in KINDS:
    if pattern.search(name) or (scope and pattern.search(scope)):
      return kind
  return "other op"


TOP_OPS = 8  # the costliest ops by name outside the scan: what the non-scan part is
def _refine(kind: str | None, source: str) -> str | None:
  """An op's kind given where it comes from: a custom call is the scan kernel only if jax
  made it a `pallas_call` (cuBLAS's are matmuls); the optimizer's name scope makes an op the
  update (the GPU trace carries no scopes); an op the name left unclassified takes the kind of
  its jax primitive. Only the scope and the primitive: the op path's `transpose(jvp(..))` is
  autodiff, not a copy."""
  if not kind or not source:
    return kind
  path = source.split(" @ ")[0]
  by_primitive = kind_of(path.rsplit("/", 1)[-1])
  if kind == KINDS[0][0]:
    if "pallas_call" in path or by_primitive == "other op":
      return kind
    kind = by_primitive
  if re.search(r"(^|/)optimizer/", path):
    return "optimizer update"
  if " @ ssm_bench/scan/" in source:
    return SCAN_OPS
  return by_primitive if kind == "other op" else kind


def summarize(events, procs, steps: int, wall_s: float, sources: dict | None = None,
              moved: dict | None = None) -> dict:
  """{kind: ms per step} of the op events, plus device time, wall time, the host gap, and the
  TOP_OPS costliest ops by name outside the scan kernel, each with its kind and where it comes
  from (`sources`: `hlo.sources` of the traced program), else the op's own description where
  the trace gives one (XLA's HLO text: the shapes). With `moved` (`hlo.bytes_moved` of the program),
  the GB per step each kind and op reads and writes: GB over ms is the bandwidth it reached.
  Bytes go with an event whose op the HLO names (a kernel in a GPU command buffer is found by
  its own name, a fusion's; one without, e.g. a cuBLAS kernel there, adds its ms to
  `ms_without_bytes`); an op launched as several kernels counts once per kernel."""
  sources, moved = sources or {}, moved or {}
  device = {pid for pid, n in procs.items() if n.startswith("/device:")}
  per_kind, per_op, about = collections.Counter(), collections.Counter(), {}
  kind_bytes, op_bytes, unsized = collections.Counter(), collections.Counter(), 0.0
  for e in events:
    name = e.get("name", "")
    if device and e.get("pid") not in device:
      continue
    if not device and _RUNTIME.match(name):
      continue
    args = e.get("args", {})
    of_op = lambda table, none: table.get(str(args.get("hlo_op", ""))) or table.get(name, none)
    source, nbytes = of_op(sources, ""), of_op(moved, 0)
    kind = kind_of(name, " ".join(str(args.get(k, "")) for k in ("long_name", "tf_op", "hlo_op",
                                                                    "name_scope")))
    kind = _refine(kind, source)
    if kind:
      ms = float(e.get("dur", 0.0)) / 1e3 / steps  # microseconds -> ms per step
      per_kind[kind] += ms
      kind_bytes[kind] += nbytes / steps
      unsized += 0.0 if nbytes else ms
      if kind not in SCAN_KINDS:  # the scan's own time is its rows; the rest by op
        per_op[name] += ms
        op_bytes[name] += nbytes / steps
        detail = source or str(args.get("long_name") or args.get("hlo_op") or "")
        if not about.get(name, ("", ""))[1]:  # until an event describes the op
          about[name] = (kind, detail)
  busy = sum(per_kind.values())
  wall = wall_s * 1e3 / steps
  return {"ms_per_step": {k: round(v, 4) for k, v in per_kind.most_common()},
          "device_ms_per_step": round(busy, 4), "wall_ms_per_step": round(wall, 4),
          "host_gap_ms_per_step": round(max(wall - busy, 0.0), 4),
          "gb_per_step": {k: float(f"{kind_bytes[k] / 1e9:.4g}") for k in per_kind if moved},
          **({"ms_without_bytes": round(unsized, 4)} if moved else {}),
          "top_ops": [{"op": n, "kind": about[n][0], "ms": round(ms, 4),
                       **({"gb": float(f"{op_bytes[n] / 1e9:.4g}")} if moved else {}),
                       "detail": about[n][1][:200]} for n, ms in per_op.most_common(TOP_OPS)],
          "source": "device" if device else "host threads (CPU)"}


def matmul_flops(jaxpr, times: int = 1) -> int:
  """Floating-point operations of the dot_generals in a jaxpr (2 per multiply-add), nested
  jaxprs included; a scan's body counts once per iteration."""
  total = 0
  for e in jaxpr.eqns:
    if e.primitive.name == "dot_general":
      (contract, _), _ = e.params["dimension_numbers"]
      lhs = e.invars[0].aval.shape
      total += 2 * int(np.prod(e.outvars[0].aval.shape)) * int(np.prod([lhs[i] for i in contract]))
    reps = e.params.get("length", 1) if e.primitive.name == "scan" else 1
    for sub in jax.extend.core.jaxprs_in_params(e.params):
      total += matmul_flops(sub, reps)
  return total * times


def step_matmul_gflop(trainer) -> float:
  """GFLOP of matmuls in one training step of one run."""
  hp = jax.tree.map(lambda x: x[0], train.hparams([trainer.cfg]))
  jaxpr = jax.make_jaxpr(trainer.step)(jax.eval_shape(trainer.init, hp), hp)
  return matmul_flops(jaxpr.jaxpr) / 1e9


def profile_one(cfg, k: int, reps: int) -> dict:
  """Trace `reps` chunks of cfg's training program vmapped over k runs."""
  trainer = train.Trainer(cfg)
  init_many, chunk_many = trainer.compiled()
  hp = train.hparams([cfg.replace(seed=i) for i in range(k)])
  state = init_many(hp)
  state, m = chunk_many(state, hp)  # compile and warm up outside the trace
  jax.block_until_ready(m)
  # The wall time comes from the same chunks untraced: starting the profiler and writing its
  # trace cost about 200 ms on the H100, which read as a 20 ms "host gap" per step.
  t0 = time.perf_counter()
  for _ in range(reps):
    state, m = chunk_many(state, hp)
    jax.block_until_ready(m)
  wall = time.perf_counter() - t0
  text = chunk_many.lower(state, hp).compile().as_text()  # in-memory cache hit
  with tempfile.TemporaryDirectory(prefix="ssm-bench-trace-") as tmp:
    with jax.profiler.trace(tmp, create_perfetto_trace=True):
      for _ in range(reps):
        state, m = chunk_many(state, hp)
        jax.block_until_ready(m)
    events, procs = _events(tmp)
  steps = reps * cfg.log_every
  row = {"k": k, **summarize(events, procs, steps, wall, hlo.sources(text), hlo.bytes_moved(text)),
         "matmul_gflop_per_run_step": round(step_matmul_gflop(trainer), 4)}
  matmul_ms = row["ms_per_step"].get("matmul")
  if matmul_ms:
    # three significant digits: a CPU's rate at a small cell rounds to 0.0 at two decimals
    row["matmul_tflops"] = float(f"{row['matmul_gflop_per_run_step'] * k / matmul_ms:.3g}")
  return row


def bench_profile(step_config, models, ks, reps: int = 2, steps_per_chunk: int = 5,
                  methods=lambda model: ("auto",)) -> list:
  """Rows per (model, scan method, K): the step's time by kind. step_config(model, method)
  gives the cell; methods(model) the scan methods to profile (default: the one auto picks)."""
  return rows_per_cell(lambda cfg, k: profile_one(cfg, k, reps), step_config, models, ks,
                       methods, steps_per_chunk)


def rows_per_cell(one, step_config, models, ks, methods, steps_per_chunk: int) -> list:
  """`one(cfg, k)`'s row for each model, scan method and K, on step_config(model, method) made
  a chunk of `steps_per_chunk` steps; a failure is an error row."""
  rows = []
  for model in models:
    for method in methods(model):
      cfg = step_config(model, method).replace(steps=steps_per_chunk, log_every=steps_per_chunk,
                                               checkpoint_every=steps_per_chunk)
      for k in ks:
        try:
          rows.append({"model": model, "method": method, **one(cfg, k)})
        except Exception as e:  # a kernel Triton rejects, out of memory: a result, not a crash
          rows.append({"model": model, "method": method, "k": k,
                       "error": f"{type(e).__name__}: {str(e)[:200]}"})
  return rows


def profile_eval(cfg, reps: int) -> dict:
  """Trace `reps` evaluations of one run as a sweep scores it (`runs.score`: the group's
  correctness program over every stream, the curves on the host, the declaration check), its
  parameters as initialized, after one that compiles; and the correctness program alone."""
  from ssm_bench import runs
  from tasks import registry
  trainer = train.Trainer(cfg)
  params = trainer.init(jax.tree.map(lambda x: x[0], train.hparams([cfg])))["params"]
  task = registry.get_task(cfg.task)
  sets = runs.eval_sets(task, cfg)
  program, extra = runs.evaluation_program(trainer, cfg)
  correct = lambda p, tokens, labels: program(p, tokens, labels, *extra(cfg))
  score = lambda: runs.score(trainer, params, task, sets, correct, cfg.train_length)
  t0 = time.perf_counter()
  score()
  first = time.perf_counter() - t0
  t0 = time.perf_counter()
  for _ in range(reps):
    score()
  wall = time.perf_counter() - t0
  t0 = time.perf_counter()
  for _ in range(reps):
    jax.block_until_ready([correct(params, *s) for s in sets.values()])
  program_s = time.perf_counter() - t0
  tokens = next(iter(sets.values()))[0]
  text = program.lower(params, tokens, tokens, *extra(cfg)).compile().as_text()
  with tempfile.TemporaryDirectory(prefix="ssm-bench-trace-") as tmp:
    with jax.profiler.trace(tmp, create_perfetto_trace=True):
      for _ in range(reps):
        score()
    events, procs = _events(tmp)
  return {"first_s": round(first, 3), "program_ms_per_run": round(program_s * 1e3 / reps, 3),
          "streams": list(sets), "eval_seqs": cfg.eval_seqs, "eval_length": cfg.eval_length,
          "eval_chunk": cfg.eval_chunk,
          **summarize(events, procs, reps, wall, hlo.sources(text), hlo.bytes_moved(text))}


def bench_eval_profile(eval_config, models, reps: int = 2) -> list:
  """Rows per model: where one run's evaluation goes (`profile_eval`); eval_config(model) gives
  the config (the bench's cell at evaluation's sizes)."""
  rows = []
  for model in models:
    try:
      rows.append({"model": model, **profile_eval(eval_config(model), reps)})
    except Exception as e:  # a kernel Triton rejects, out of memory: a result, not a crash
      rows.append({"model": model, "error": f"{type(e).__name__}: {str(e)[:200]}"})
  return rows


def render_eval(rows) -> str:
  return _render(rows, lambda r: f"{r['model']} evaluation", lambda r: (
      f"one run ({r['eval_seqs']} x {r['eval_length']}, chunks of at most {r['eval_chunk']}, "
      f"streams {', '.join(r['streams'])}): wall {r['wall_ms_per_step']:.3f} ms per run, the "
      f"correctness program alone {r['program_ms_per_run']:.3f}, ops "
      f"{r['device_ms_per_step']:.3f} ({r['source']}), host gap "
      f"{r['host_gap_ms_per_step']:.3f}; the first (compiling) {r['first_s']:.2f} s"))


def _moved(gb, ms) -> str:
  """`  x GB  y TB/s`: what an op kind read and wrote per step, and the rate (GB per ms)."""
  return "" if gb is None else f"  {gb:9.3g} GB" + (f" {gb / ms:7.3g} TB/s" if ms > 0 else "")


def _render(rows, name, head) -> str:
  """Per row `name: head` (or `name: error`), then its time by kind and costliest ops."""
  out = []
  for r in rows:
    if "error" in r:
      out.append(f"{name(r)}: {r['error']}")
      continue
    out.append(f"{name(r)}: {head(r)}")
    total = r["device_ms_per_step"] or 1.0
    gb = r.get("gb_per_step", {})
    out += [f"  {kind:<28} {ms:9.4f} ms  {100 * ms / total:5.1f}%" + _moved(gb.get(kind), ms)
            for kind, ms in r["ms_per_step"].items()]
    if r.get("ms_without_bytes"):
      out.append(f"  (no bytes for {r['ms_without_bytes']:.4f} ms of ops: not named in the HLO)")
    if r.get("top_ops"):
      out.append("  costliest ops outside the scan:")
      out += [f"    {o['op'][:40]:<40} {o['ms']:9.4f} ms{_moved(o.get('gb'), o['ms'])}  {o['kind']}"
              + (f"  {o['detail'][:110]}" if o["detail"] not in ("", o["op"]) else "")
              for o in r["top_ops"]]
  return "\n".join(out)


def render(rows) -> str:
  name = lambda r: f"{r['model']} ({r.get('method', 'auto')}) K={r['k']}"
  return _render(rows, name, lambda r: (
      f"wall {r['wall_ms_per_step']:.3f} ms per step, ops {r['device_ms_per_step']:.3f} ms "
      f"({r['source']}), host gap {r['host_gap_ms_per_step']:.3f} ms; matmuls "
      f"{r['matmul_gflop_per_run_step']:.3f} GFLOP per run-step"
      + (f", {r['matmul_tflops']} TFLOP/s in the traced matmuls" if "matmul_tflops" in r
         else "")))
