"""Test plugin: a layer whose class function fails for some of its kwargs (not its defaults,
which registration checks): an invalid class for mode "bad", an exception for mode "boom"; its
state_width fails for mode "widthless". It sizes itself at the tiny preset."""
import flax.linen as nn

from ssm_bench.registry import module_kwargs, register_layer


class ClassFn(nn.Module):
  cfg: object
  mode: str = "ok"

  @nn.compact
  def __call__(self, v):
    return nn.Dense(v.shape[-1], name="mix")(v)


def _class(kw):
  if kw["mode"] == "boom":
    raise RuntimeError("no class for boom")
  return {"ok": "nonlinear_or_dense", "widthless": "nonlinear_or_dense",
          "bad": "householder:x"}[kw["mode"]]


def _width(config, kw):
  return config["d_state"] // (kw["mode"] != "widthless")  # 1 // 0 for "widthless"


register_layer("classfn", ClassFn, theory_class=_class, kwargs=module_kwargs(ClassFn),
               state_width=_width, presets={"tiny": {"d_model": 12}})  # tiny's is 8
