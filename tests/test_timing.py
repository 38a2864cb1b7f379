"""launch/timing.py: interleaved timings, on a fake clock (no timing is asserted against the
machine's own: benchmarks compare ratios, tests check the arithmetic)."""
from launch import timing


def test_interleaved_times_the_calls_in_turn_and_takes_each_ones_median(monkeypatch):
  """Two calls, three repetitions: the order is a b a b a b (a machine slowing down mid-way
  falls on both), and each call's result is the median of its three durations, not its first
  or its mean."""
  order = []
  durations = {"a": iter([5, 1, 2]), "b": iter([7, 30, 3])}
  now = [0.0]

  def perf_counter():
    return now[0]

  def call(name):
    def run():
      order.append(name)
      now[0] += next(durations[name])
    return run
  monkeypatch.setattr(timing.time, "perf_counter", perf_counter)
  assert timing.interleaved([call("a"), call("b")], reps=3) == [2, 7]
  assert order == ["a", "b"] * 3, order
