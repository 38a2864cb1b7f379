"""Test plugin: a module that exists but imports one that does not (its own dependency)."""
import ssm_bench_no_such_dependency  # noqa: F401
