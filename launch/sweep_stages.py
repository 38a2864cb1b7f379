"""The staged sweeps' rules: in which order a sweep's groups train (`stage`) and which runs of a
later stage are not needed once the earlier ones finished (`skip`).

Two kinds of rule: a deeper stack is not trained once a shallower one succeeded (illusion,
profile, languages), and a cell's extra seeds train only where its first runs could rest on luck
or go against the theory on too few runs (table2_cpu, table2_baselines, profile, languages).
`finished` is always [(config, summary)] of the runs of earlier stages. The grids themselves are
in launch/sweeps.py, which names each sweep's rules.
"""
from __future__ import annotations

import dataclasses

from ssm_bench import language_table
from ssm_bench import state_widths
from ssm_bench.config import TrainConfig
from ssm_bench.neighbours import illusion_solved
from ssm_bench.tables import EXTRAPOLATES, MIN_RUNS_AGAINST_THEORY, stack_prediction


def shallower_solved(cfg: TrainConfig, finished) -> bool:
  """Minimal-depth search (illusion): a depth is not trained once a shallower stack of the same
  run (every other field equal) solved its length; `finished` is [(config, summary)]. Paper 002
  reports the minimal depth, and its Fig. 3 takes a solved length to stay solved with depth."""
  return any(c.depth < cfg.depth and c.replace(depth=cfg.depth) == cfg and illusion_solved(s)
             for c, s in finished)


# The second stage of table2_cpu and table2_baselines: a cell whose verdict could rest on luck
# trains its learning rates again over these seeds, so that a lucky or unlucky seed on some
# machine does not decide it alone (results/pilots.md, "Table 2 at CPU scale"): exactly one of
# its runs extrapolates, or its verdict goes against the theory (below it or beyond it) on fewer
# than MIN_RUNS_AGAINST_THEORY runs (mamba and negmamba train 2 a cell; the other models 4).
TABLE2_CPU_MORE_SEEDS = (4, 5, 6, 7)


def more_seeds_stage(cfg: TrainConfig) -> int:
  return int(cfg.seed in TABLE2_CPU_MORE_SEEDS)


def _cell_runs(cfg: TrainConfig, finished, extra_seeds) -> list[dict]:
  """The summaries of the finished first-stage runs of cfg's cell (same config but lr, schedule
  and seed; seeds outside extra_seeds)."""
  return [s for c, s in finished if c.seed not in extra_seeds
          and c.replace(lr=cfg.lr, schedule=cfg.schedule, seed=cfg.seed) == cfg]


def _successes(cell) -> int:
  return sum(s.get("status") == "done" and s.get("max_len", 0) >= EXTRAPOLATES for s in cell)


def _group_expressible(cfg: TrainConfig) -> bool | None:
  width = state_widths.state_width(cfg.model, dataclasses.asdict(cfg), cfg.layer_kwargs)
  return stack_prediction(cfg.model, cfg.depth, cfg.task, cfg.layer_kwargs, width)["expressible"]


def _agrees_or_enough(cfg: TrainConfig, cell, successes: int,
                      expressible=_group_expressible) -> bool:
  """True unless the cell's first-stage runs (`successes` of them succeeded) go against the
  theory (none succeeds where `expressible(cfg)` allows the cell, or some do where it rules it
  out) on fewer than MIN_RUNS_AGAINST_THEORY runs. A cell with no finished first-stage run cannot
  be judged: its extra runs are wanted (so a --config.seed= override that lands on an extra seed
  still trains)."""
  if not cell:
    return False
  if len(cell) >= MIN_RUNS_AGAINST_THEORY:
    return True
  expected = expressible(cfg)
  return expected is None or (successes > 0) == expected


def verdict_settled(cfg: TrainConfig, finished) -> bool:
  """table2_cpu's skip rule: a second-stage run is not needed unless, among the finished
  first-stage runs of its cell (same config but lr, schedule and seed), exactly one extrapolates,
  or there are fewer than MIN_RUNS_AGAINST_THEORY and none extrapolates where the theory allows
  the cell, or some do where it rules the cell out."""
  if not more_seeds_stage(cfg):
    return False
  cell = _cell_runs(cfg, finished, TABLE2_CPU_MORE_SEEDS)
  successes = _successes(cell)
  return successes != 1 and _agrees_or_enough(cfg, cell, successes)


# The profile's second stage at each depth: a cell whose first-stage runs go against the theory
# on fewer than MIN_RUNS_AGAINST_THEORY runs (profile_cpu trains 2 a cell) trains its rates again
# over these seeds, 8 runs in all, so that "below theory" (or a claim against a theorem) does not
# rest on two seeds; a cell whose verdict rests on one success trains the first of them, as the
# languages do (both rates: 4 runs). Reason for the second: the one success is not one learning
# rate's doing, as assumed before 2026-12-07: of 8 such cells given another seed pair, 3 had
# no success at all (BUILD_NOTES, "Protocols").
PROFILE_MORE_SEEDS = {"profile_cpu": (1, 2, 3)}


def profile_extra_seeds(cfg: TrainConfig) -> tuple:
  return PROFILE_MORE_SEEDS.get(cfg.preset, ())


def profile_stage(cfg: TrainConfig) -> tuple:
  """(depth, 0 for the first runs of a cell or 1 for its extra seeds)."""
  return cfg.depth, int(cfg.seed in profile_extra_seeds(cfg))


def profile_skip(cfg: TrainConfig, finished) -> bool:
  """The profile's skip rule: a first run is skipped once a shallower stack extrapolated; an
  extra seed, where its cell's first runs agree with the theory (or are enough:
  MIN_RUNS_AGAINST_THEORY), or where the cell has none and a shallower stack extrapolated,
  except the first extra seed of a cell whose first runs have exactly one success. A cell
  whose first runs trained before a shallower success was found (the shallower cell's own
  extra seeds, or runs added later) and went against the theory still gets its extra seeds, so
  every verdict against the theory the report shows rests on 8 runs."""
  extra = profile_extra_seeds(cfg)
  cell = _cell_runs(cfg, finished, extra) if cfg.seed in extra else []
  if not cell:
    return shallower_extrapolated(cfg, finished)
  successes = _successes(cell)
  if not _agrees_or_enough(cfg, cell, successes):
    return False
  return not (successes == 1 and cfg.seed == extra[0])


def _shallower_succeeded(cfg: TrainConfig, finished, succeeded) -> bool:
  return any(c.depth < cfg.depth and c.task == cfg.task and succeeded(s)
             and c.replace(depth=cfg.depth, lr=cfg.lr, schedule=cfg.schedule, seed=cfg.seed) == cfg
             for c, s in finished)


def shallower_extrapolated(cfg: TrainConfig, finished) -> bool:
  """The profile's skip rule: some finished run of the same group and model (any lr, schedule,
  seed) at a smaller depth reached max_len >= 100."""
  return _shallower_succeeded(cfg, finished, lambda s: s.get("status") == "done"
                              and s.get("max_len", 0) >= EXTRAPOLATES)


def shallower_modelled(cfg: TrainConfig, finished) -> bool:
  """The languages' skip rule: as the profile's, with the language table's success (flip-flop:
  accuracy after reads above 0.9, which max_len over every position does not see)."""
  return _shallower_succeeded(cfg, finished, lambda s: language_table.score(s)[1])


# The languages' second stage at each depth: a cell whose verdict could rest on luck (as
# table2_cpu's: exactly one of its two first runs succeeds, or they go against the theory) trains
# both rates again at these seeds, MIN_RUNS_AGAINST_THEORY runs in all. Reason: 50 of 154 cells
# rested on one run of two (BUILD_NOTES, "Protocols").
LANGUAGE_MORE_SEEDS = (1,)


def language_stage(cfg: TrainConfig) -> tuple:
  """(depth, 0 for the first runs of a cell or 1 for its extra seeds)."""
  return cfg.depth, int(cfg.seed in LANGUAGE_MORE_SEEDS)


def language_settled(cfg: TrainConfig, finished) -> bool:
  """The languages' skip rule: a shallower stack modelled the language (shallower_modelled), or
  cfg is an extra seed of a cell whose first runs neither rest on one success nor go against
  the language theory's prediction for the model's class on too few runs (verdict_settled's rule
  with the language table's success)."""
  if shallower_modelled(cfg, finished):
    return True
  if cfg.seed not in LANGUAGE_MORE_SEEDS:
    return False
  cell = _cell_runs(cfg, finished, LANGUAGE_MORE_SEEDS)
  successes = sum(language_table.score(s)[1] for s in cell)
  return successes != 1 and _agrees_or_enough(
      cfg, cell, successes, lambda c: language_table.predicted(
          c.task, c.model, c.layer_kwargs, c.depth,
          state_widths.state_width(c.model, dataclasses.asdict(c), c.layer_kwargs)))
