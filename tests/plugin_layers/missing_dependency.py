"""Test plugin: a module that exists but imports one that does not (its own dependency)."""
import importlib

importlib.import_module("ssm_bench_no_such_dependency")
