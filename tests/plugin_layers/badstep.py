"""Test plugin: a theory class whose step rule misbehaves (it returns the subgroup without its
identity: no subgroup), and a layer declaring it. Registration cannot see this; it shows where
the theory is first read."""
from ssm_bench import theory
from ssm_bench.registry import register_layer
from plugin_layers._mix import Mix

theory.register_class("identityless", "a researcher's class with a broken rule", "none",
                      step=lambda group, subgroup, param: subgroup[1:])

register_layer("badstep", Mix, theory_class="identityless")
