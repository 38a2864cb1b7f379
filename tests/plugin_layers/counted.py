"""Test plugin: register() counts its calls (a researcher's may do work worth doing once: a
table computed, a line printed)."""
from ssm_bench.registry import register_layer
from plugin_layers._mix import Mix

CALLS = 0


def register():
  global CALLS
  CALLS += 1
  register_layer("counted", Mix, theory_class="nonlinear_or_dense")
