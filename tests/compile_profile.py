"""Where the tests' time goes in jax: compilation, lowering, tracing and cache hits per test.

    SSM_BENCH_COMPILE_PROFILE=/tmp/prof python -m pytest -q    # each process writes its JSON
    python tests/compile_profile.py /tmp/prof                   # the table, by module

Active only when SSM_BENCH_COMPILE_PROFILE names a directory (tests/conftest.py calls
`register`; elsewhere `-p compile_profile`): jax's monitoring events are summed per test in each
process that runs tests (the xdist workers, not their controller; entry points that tests launch
are not counted), with each test's wall time beside them. Measure before cutting tests:
results/bench/README.md, "CI time".
"""
import collections
import glob
import json
import os
import sys
import time

ENV = "SSM_BENCH_COMPILE_PROFILE"
# jax's event names -> the table's columns
EVENTS = {"/jax/core/compile/backend_compile_duration": "compile",
          "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
          "/jax/core/compile/jaxpr_trace_duration": "trace",
          "/jax/compilation_cache/cache_retrieval_time_sec": "cache_read"}


class Recorder:
  """A pytest plugin: seconds per (test, column), and each test's wall time."""

  def __init__(self, out_dir: str):
    self.out_dir, self.test = out_dir, "<collection>"
    self.seconds = collections.defaultdict(collections.Counter)
    self.wall = collections.Counter()

  def listen(self, event, duration, **_):
    if event in EVENTS:
      self.seconds[self.test][EVENTS[event]] += duration

  def pytest_configure(self, config):
    import jax.monitoring
    jax.monitoring.register_event_duration_secs_listener(self.listen)

  def pytest_runtest_logstart(self, nodeid, location):
    self.test, self.start = nodeid, time.time()

  def pytest_runtest_logfinish(self, nodeid, location):
    self.wall[nodeid] += time.time() - self.start

  def pytest_unconfigure(self, config):
    os.makedirs(self.out_dir, exist_ok=True)
    name = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.path.join(self.out_dir, f"{name}-{os.getpid()}.json"), "w") as f:
      json.dump({"seconds": self.seconds, "wall": self.wall}, f)


def register(config):
  """Records this process's tests if the variable names a directory and this process runs them."""
  out_dir = os.environ.get(ENV)
  controller = getattr(config.option, "numprocesses", None) and (
      "PYTEST_XDIST_WORKER" not in os.environ)
  if out_dir and not controller:
    config.pluginmanager.register(Recorder(out_dir), "compile_profile_recorder")


pytest_configure = register  # as a plugin of its own (-p compile_profile)


def by_module(out_dir: str) -> dict:
  """{module: {"wall": s, column: s, ...}} summed over every process's file in out_dir."""
  table = collections.defaultdict(collections.Counter)
  for path in glob.glob(os.path.join(out_dir, "*.json")):
    with open(path) as f:
      data = json.load(f)
    for test, seconds in data["seconds"].items():
      table[test.split("::")[0]].update(seconds)
    for test, wall in data["wall"].items():
      table[test.split("::")[0]]["wall"] += wall
  return table


def render(table: dict) -> str:
  cols = ["wall", *EVENTS.values()]
  lines = [" ".join(f"{c:>10}" for c in cols) + "  module"]
  total = collections.Counter()
  for module, row in sorted(table.items(), key=lambda kv: -kv[1]["wall"]):
    total.update(row)
    lines.append(" ".join(f"{row[c]:10.1f}" for c in cols) + f"  {module}")
  lines.append(" ".join(f"{total[c]:10.1f}" for c in cols) + "  (all)")
  return "\n".join(lines)


if __name__ == "__main__":
  if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
    sys.exit(f"usage: python {sys.argv[0]} DIR (the {ENV} directory of a test run)")
  print(render(by_module(sys.argv[1])))
