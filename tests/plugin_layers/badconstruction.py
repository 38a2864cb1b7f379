"""Test plugin: a layer whose hand-built construction fails: its `applies` raises on S3, its
`build` raises wherever it applies (C4), and it declares kwargs its layer does not take."""
import flax.linen as nn

from ssm_bench import analytic
from ssm_bench.registry import register_layer


class Plain(nn.Module):
  cfg: object

  @nn.compact
  def __call__(self, v):
    return nn.Dense(v.shape[-1], name="mix")(v)


def _applies(task):
  if task == "S3":
    raise KeyError("no answer for S3")
  return task == "C4"


def _build(task, d_model, d_state):
  raise RuntimeError("weights not written")


register_layer("badcons", Plain, theory_class="unknown",
               constructions=(analytic.Construction("a construction that fails", _applies,
                                                    _build, kwargs=lambda task: '{"nope": 1}'),))
