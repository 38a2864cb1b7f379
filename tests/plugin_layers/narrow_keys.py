"""Test plugin: DeltaProduct's layer (two reflections per token) declared with keys a quarter of
d_state wide, as a layer whose keys split another width would be (`state_width`)."""
from ssm_bench.layers import deltanet
from ssm_bench.registry import module_kwargs, register_layer

register_layer("narrow_keys", deltanet.DeltaProduct, theory_class="householder:2",
               kwargs=module_kwargs(deltanet.DeltaProduct, n_h=2),
               state_width=lambda config, kwargs: max(1, config["d_state"] // 4))
