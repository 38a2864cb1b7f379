"""Evaluate a hand-built construction on the fixed evaluation stream.

  python -m launch.analytic --task=S3 --length=10000 --json
  python -m launch.analytic --task=S3 --model=aussm --length=10000 --json
"""
from __future__ import annotations

from absl import flags
import jax

from launch import common
from ssm_bench import analytic
from ssm_bench import evaluation
from ssm_bench import models
from tasks import registry

_TASK = flags.DEFINE_string("task", "S3", "A task with a hand-built construction "
                             "(python -m launch.info --group=G lists a group's).")
_LENGTH = flags.DEFINE_integer("length", 10000, "Sequence length to evaluate at.", lower_bound=1)
_NUM = flags.DEFINE_integer("num_seqs", 64, "Evaluation sequences.", lower_bound=1)
_CHUNK = flags.DEFINE_integer("chunk", 16, "Sequences per forward pass.", lower_bound=1)
_MODEL = flags.DEFINE_string("model", "", "Layer type of the construction where a task has several "
                             "(S3: simple_aussm, aussm or deltaproduct); default: the task's first.")
_JSON = flags.DEFINE_bool("json", False, "Print one JSON object.")


def evaluate(task_name: str, length: int, num_seqs: int = 64, chunk: int = 16,
             model: str = "") -> dict:
  try:
    task = registry.get_task(task_name)
    cfg, params = analytic.build(task_name, model=model)
  except (registry.TaskError, analytic.NoConstruction) as e:
    raise common.UsageError(str(e)) from None
  chunk = min(chunk, num_seqs)
  num_seqs -= num_seqs % chunk
  tokens, labels = evaluation.eval_set(task, num_seqs, length)
  model = models.StateTracker(cfg)
  correct = evaluation.make_correctness_fn(model.apply, chunk)(params, tokens, labels)
  # a layer repeated is its name, a hybrid its layers bottom first
  return {"task": task_name, "model": ",".join(dict.fromkeys(cfg.layers)), "depth": cfg.depth,
          "layer_kwargs": cfg.layer_kwargs, "length": length, **evaluation.at_length(correct),
          "num_seqs": num_seqs, "backend": jax.default_backend()}


def main(argv):
  del argv
  common.load_plugins()
  out = evaluate(_TASK.value, _LENGTH.value, _NUM.value, _CHUNK.value, _MODEL.value)
  if _JSON.value:
    common.print_json(out)
  else:
    kwargs = f" {out['layer_kwargs']}" if out["layer_kwargs"] else ""
    times = "" if "," in out["model"] else f" x{out['depth']}"
    print(f"{out['task']}: {out['model']}{kwargs}{times} at length {out['length']}: "
          f"sequence accuracy {out['accuracy']:.4f}, accuracy at L {out['acc_at_length']:.4f}")


if __name__ == "__main__":
  common.run_main(main)
