"""The honest layer several test plugins register: one dense mix of the channels (no recurrence,
no claimed transitions). Registers nothing itself."""
import flax.linen as nn


class Mix(nn.Module):
  cfg: object

  @nn.compact
  def __call__(self, v):
    return nn.Dense(v.shape[-1], name="mix")(v)
