"""Describe a group: its theory, its Cayley table and (optionally) a sampled batch.

  python -m launch.info --group=A4 --json
  python -m launch.info --group=S3 --sample=2x8 --seed=0 --json
"""
from __future__ import annotations

import re

from absl import flags

from launch import common
from tasks import groups
from tasks import registry

_GROUP = flags.DEFINE_string("group", "C2", "Group name. " + groups.GRAMMAR)
_JSON = flags.DEFINE_bool("json", False, "Print one JSON object instead of a summary.")
_SAMPLE = flags.DEFINE_string("sample", None, "BxT: also draw B sequences of length T.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed for --sample.", lower_bound=0)
MAX_SAMPLE = 1_000_000  # tokens printed as text: more is not a sample anyone reads


def describe(name: str, sample: str | None = None, seed: int = 0) -> dict:
  try:
    g = groups.get_group(name)
  except groups.GroupError as e:
    raise common.UsageError(str(e)) from None
  out = g.theory()
  out["cayley"] = g.table.tolist()
  if sample:
    m = re.fullmatch(r"(\d+)x(\d+)", sample)
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
      raise common.UsageError(f"--sample must be BxT with positive integers, got {sample!r}")
    if int(m.group(1)) * int(m.group(2)) > MAX_SAMPLE:
      raise common.UsageError(f"--sample={sample} asks for {int(m.group(1)) * int(m.group(2))} "
                              f"tokens; print at most {MAX_SAMPLE} (B x T)")
    import jax  # deferred: the plain theory query needs no JAX start-up

    task = registry.get_task(name)
    sample_fn = jax.jit(task.sample, static_argnums=(1, 2))
    tokens, labels = sample_fn(jax.random.PRNGKey(seed), int(m.group(1)), int(m.group(2)))
    out["inputs"], out["labels"] = tokens.tolist(), labels.tolist()
  return out


def main(argv):
  del argv
  info = describe(_GROUP.value, _SAMPLE.value, _SEED.value)
  if _JSON.value:
    common.print_json(info)
    return
  dl = info["derived_length"]
  e2 = info["elementary2_length"]
  print(f"{info['name']}: order {info['order']}, "
        f"{'abelian' if info['abelian'] else 'non-abelian'}, "
        f"{'solvable, derived length ' + str(dl) if info['solvable'] else 'not solvable'}, "
        f"elementary-2 series length {e2 if e2 is not None else 'none (not a 2-group)'}")
  for key in ("inputs", "labels"):
    if key in info:
      for row in info[key]:
        print(f"  {key[:-1]}: {' '.join(map(str, row))}")


if __name__ == "__main__":
  common.run_main(main)
