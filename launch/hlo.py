"""What a compiled program's HLO text says about each instruction: where it comes from (the jax
op path and Python line: `sources`) and how many bytes it reads and writes (`bytes_moved`). The
profile section names and weighs a trace's ops by them, the compiled section a step's
(`loop_body_bytes`: the training loop's body, nested loops by their trip counts)."""
from __future__ import annotations

import collections
import os
import re

import numpy as np

_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = [^\n]*?metadata=\{([^}\n]*)\}", re.M)
# Segments of an op path that say nothing about the op: the jit and run-axis wrappers, loops.
_NOISE = re.compile(r"^jit\([^)]*\)/|vmap\(\)/|(?<=/)(while/body|closed_call|body|cond)/|"
                    r"^(while/body|closed_call)/")


def _table(text: str, header: str, pattern: str) -> dict:
  """Rows `<id> <pattern>` of one of the HLO text's trailing tables (FileNames, StackFrames...)."""
  start = text.find("\n" + header + "\n")
  if start < 0:
    return {}
  rows = {}
  for line in text[start + len(header) + 2:].splitlines():
    m = re.match(r"(\d+) " + pattern, line)
    if not m:
      break
    rows[m.group(1)] = m.groups()[1:]
  return rows


def sources(text: str) -> dict:
  """{instruction name: where it comes from} of a compiled program's HLO text: the jax op path
  from its metadata (`transpose(jvp(...))` is the backward pass, `optimizer` the update's name
  scope) and the Python line of its innermost stack frame. The GPU trace names no scopes, so
  this is how its ops are told apart; kernel names spell the instruction's dots as underscores,
  so both spellings are keys."""
  files = _table(text, "FileNames", r'"(.*)"')
  functions = _table(text, "FunctionNames", r'"(.*)"')
  locations = _table(text, "FileLocations",
                     r"\{file_name_id=(\d+) function_name_id=(\d+) line=(\d+)")
  frames = _table(text, "StackFrames", r"\{file_location_id=(\d+)")
  out = {}
  for name, meta in _INSTRUCTION.findall(text):
    op = re.search(r'op_name="([^"]*)"', meta)
    if not op:
      continue
    where = _NOISE.sub("", op.group(1).split(";")[0])  # ';' joins the op names of merged ops
    frame = re.search(r"stack_frame_id=(\d+)", meta)
    loc = locations.get(frames.get(frame.group(1), ("",))[0]) if frame else None
    if loc and loc[0] in files:
      path = files[loc[0]][0]
      path = path[path.rfind("ssm_bench/"):] if "ssm_bench/" in path else os.path.basename(path)
      where += f" @ {path}:{loc[2]} ({functions.get(loc[1], ('?',))[0]})"
    out[name] = out[name.replace(".", "_")] = where
  return out


_SHAPE = re.compile(r"\b(pred|[suf]\d+|bf16|c64|c128)\[([\d,]*)\]")
_BITS = {"pred": 8, "bf16": 16, "c64": 64, "c128": 128}
_MOVES_NOTHING = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "while",
                  "conditional", "call", "after-all", "partition-id", "replica-id"}
_LINE = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = (.*?) ([a-z][\w\-]*)\(([^)]*)\)", re.M)
_ROOT = re.compile(r"^\s*ROOT %([\w.\-]+) = ", re.M)
_CALLS = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = [^\n]*?calls=%([\w.\-]+)", re.M)
# A computation of the HLO text: its name and its instructions
_WHILE = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = .*? while\(.*?body=%([\w.\-]+)(.*)$", re.M)
_CALL = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = .*? call\(.*?to_apply=%([\w.\-]+)", re.M)
_NAME = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = ", re.M)
COMPUTATION = re.compile(r"^(?:ENTRY )?%([\w.\-]+) .*?\{\n(.*?)\n\}$", re.M | re.S)


def _shape_bytes(shape: str) -> int:
  return sum(int(np.prod([int(d) for d in dims.split(",") if d])) *
             (_BITS.get(t) or int(t[1:])) // 8
             for t, dims in _SHAPE.findall(shape))


def bytes_moved(text: str) -> dict:
  """{instruction name: bytes it reads and writes} of a compiled program's HLO text: its
  operands' sizes plus its result's, what XLA's own cost model starts from, except where a
  fusion slices: an operand its fused computation only reads through dynamic slices counts
  those slices, and a buffer it updates in place (a dynamic-update-slice of a parameter, as a
  scan stores each step's state) counts the update written, not the buffer (a scan of 60 steps
  that stores a (256, 64, 128) state each step moves 8 MB a step, not its 500 MB buffer twice);
  so do unfused dynamic slices and updates. An async pair counts once, at its start. Still an
  upper bound for the rest (a fusion that reads part of an operand otherwise counts all of
  it). Both spellings of a name, as `sources`."""
  lines = _LINE.findall(text)
  size = {name: _shape_bytes(shape) for name, shape, _, _ in lines}
  fused = {name: body for name, body in COMPUTATION.findall(text)}
  calls = dict(_CALLS.findall(text))
  out = {}
  for name, shape, opcode, operands in lines:
    if opcode in _MOVES_NOTHING or opcode.endswith("-done"):
      continue
    args = [size.get(a, 0) for a in re.findall(r"%([\w.\-]+)", operands)]
    if opcode in ("fusion", "fusion-start") and calls.get(name) in fused:
      moved = _fusion_bytes(fused[calls[name]], args)
    elif opcode == "dynamic-slice":  # the slice read and written, and its indices
      moved = 2 * size[name] + sum(args[1:])
    elif opcode == "dynamic-update-slice":  # in place: the update read and written
      moved = 2 * args[1] + sum(args[2:])
    else:  # an async start's result holds its operands again: its output is counted as them
      moved = (size[name] if not opcode.endswith("-start") else sum(args)) + sum(args)
    out[name] = out[name.replace(".", "_")] = moved
  return out


def _fusion_bytes(body: str, operand_bytes: list) -> int:
  """What a fusion moves, from its fused computation (`bytes_moved`): each parameter's size, or
  the slices it is only read through, or nothing for a buffer updated in place; and its
  result's size, an in-place update counting the update it writes."""
  lines = _LINE.findall(body)
  size = {name: _shape_bytes(shape) for name, shape, _, _ in lines}
  args = {name: re.findall(r"%([\w.\-]+)", operands) for name, _, _, operands in lines}
  opcode = {name: op for name, _, op, _ in lines}
  alias = {name: args[name][0] for name in args  # a bitcast of a parameter is the parameter
           if opcode[name] == "bitcast" and opcode.get(args[name][0]) == "parameter"}
  real = lambda n: alias.get(n, n)
  uses = collections.defaultdict(list)
  for name, operand_names in args.items():
    if name not in alias:
      for position, a in enumerate(operand_names):
        uses[real(a)].append((name, position))
  in_place = {real(args[n][0]) for n in args if opcode[n] == "dynamic-update-slice"
              and opcode.get(real(args[n][0])) == "parameter"}
  moved = 0
  for name, _, op, operands in lines:
    if op != "parameter" or name in in_place:  # in place: only the update is written
      continue
    if uses[name] and all(opcode[u] == "dynamic-slice" and p == 0 for u, p in uses[name]):
      moved += sum(size[u] for u, _ in uses[name])
    else:
      index = int(operands)
      moved += operand_bytes[index] if index < len(operand_bytes) else size[name]
  root = _ROOT.search(body).group(1)
  for w in args[root] if opcode[root] == "tuple" else [root]:
    update = (opcode[w] == "dynamic-update-slice" and real(args[w][0]) in in_place)
    moved += size[args[w][1]] if update else size[w]
  return moved


def _trips(attrs: str) -> int:
  m = re.search(r'"known_trip_count":\{"n":"(\d+)"\}', attrs)
  return int(m.group(1)) if m else 1


def loop_body_bytes(text: str, steps: int) -> dict:
  """{instruction: bytes per training step} of a compiled chunk's HLO text: the instructions of
  the training loop's body (the entry's while that runs `steps` iterations), with each loop
  nested in it counted by its body's instructions times its known trip count, and each call
  by its computation's."""
  bodies = dict(COMPUTATION.findall(text))
  loops = {name: (body, _trips(attrs)) for name, body, attrs in _WHILE.findall(text)}
  nested = {**loops, **{name: (computation, 1) for name, computation in _CALL.findall(text)}}
  entry = re.search(r"^ENTRY %([\w.\-]+) ", text, re.M).group(1)
  outer = [body for name, (body, n) in loops.items()
           if n == steps and re.search(r"%" + re.escape(name) + r" = ", bodies[entry])]
  if not outer:
    raise ValueError(f"no loop of {steps} iterations in the compiled program's entry")
  moved, out = bytes_moved(text), collections.Counter()

  def add(computation: str, times: int):
    for name in _NAME.findall(bodies[computation]):
      if name in nested:
        body, n = nested[name]
        add(body, times * n)
      elif name in moved:
        out[name] += moved[name] * times
  add(outer[0], 1)
  return dict(out)
