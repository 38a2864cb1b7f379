"""Sweep definitions: one small function per sweep, turning a base config into its grid.

`launch.sweep` builds the base from the sweep's preset (or `--preset`), applies the grid, then
any `--config.<field>` override to every run. Runs that share every shape field
(config.SHAPE_FIELDS: all but lr, schedule and seed) form one compiled group.
"""
from __future__ import annotations

import dataclasses
import itertools

from launch import sweep_stages as stages
from ssm_bench import analytic
from ssm_bench import config
from ssm_bench import registry
from ssm_bench import tracking_profile
from ssm_bench import train
from ssm_bench.config import SCHEDULES, TrainConfig
from ssm_bench.neighbours import NEAR_SOLUTION
from ssm_bench.paper import TABLE2_DEPTHS, TABLE2_GROUPS, TABLE2_MODELS
from tasks import registry as task_registry

D_STATES = (32, 64, 128)
# One rate per decade from 1e-4 to 1e-2 (SPEC 4; the AUSSM authors' grid): at paper width negmamba
# extrapolates on C2 only with lr >= 3e-3, so a grid that stops at 1e-3 cannot show the paper's
# central contrast (results/pilots.md, "The table2 protocol").
LRS = (1e-4, 1e-3, 1e-2)
SEEDS = (0, 1, 2)


def _grid(base: TrainConfig, **axes) -> list[TrainConfig]:
  names = list(axes)
  return [base.replace(**dict(zip(names, values))) for values in itertools.product(*axes.values())]


def table2(base: TrainConfig) -> list[TrainConfig]:
  """Paper 000, Table 2: 9 groups x 5 models x depth {1,2} x d_state x lr x schedule x seed on
  the `table2` preset (20,000 steps, no conv, the groups padded to order 60 so that they train
  together: 30 programs instead of 270)."""
  return _grid(base, task=TABLE2_GROUPS, model=TABLE2_MODELS, depth=TABLE2_DEPTHS,
               d_state=D_STATES, lr=LRS, schedule=SCHEDULES, seed=SEEDS)


LITE_LRS = (1e-3, 1e-2)
LITE_SEEDS = (0, 1)


def table2_lite(base: TrainConfig) -> list[TrainConfig]:
  """Every Table 2 cell (9 groups x 5 models x depth 1, 2) on a grid that still answers
  "extrapolates or not" in about half an hour on one GPU (reasons in BUILD_NOTES, "Protocols"):
  the `table2_lite` preset (d_state 32, cosine, no conv, 3000 steps, padded to order 60), lr
  {1e-3, 1e-2} (the two decades where the paper's contrasts appear; negmamba needs >= 3e-3),
  seeds {0, 1}: 4 runs per cell, 360 runs in 10 programs."""
  return _grid(base, task=TABLE2_GROUPS, model=TABLE2_MODELS, depth=TABLE2_DEPTHS, lr=LITE_LRS,
               seed=LITE_SEEDS)


# Paper 001, App. D: (layers, embedding size, state size; the RNN's hidden size) per model; we
# add one negmamba layer, the paper's point (input dependence and negative eigenvalues in one
# layer). Our embedding is the residual width, so the RNN gets 8 rather than the paper's 2.
PARITY_MODELS = (("rnn", 1, 8, 8), ("s4d", 2, 8, 16), ("mamba", 2, 8, 16),
                 ("s4d,mamba", 2, 8, 16), ("negmamba", 1, 8, 16))


PARITY_LRS = (1e-2, 3e-2)


def parity_hybrid(base: TrainConfig) -> list[TrainConfig]:
  """Paper 001, Table 1: parity trained at length 8 (fixed, no curriculum), evaluated to 10,000
  on the uniform and the adversarial (0^k 1^m)^* streams (the parity task carries both);
  mamba-minimal's conv of width 4; 10,000 steps at lr {1e-2, 3e-2} x 3 seeds per model (at
  3000 steps and lr {1e-3, 1e-2} no RNN run extrapolated: results/pilots.md)."""
  base = base.replace(task="parity", train_length=8, curriculum_start=8, eval_length=10000,
                      conv_kernel=4, steps=10000)
  return [base.replace(model=m, depth=depth, d_model=dm, d_state=ds, lr=lr, seed=s)
          for (m, depth, dm, ds), lr, s in itertools.product(PARITY_MODELS, PARITY_LRS, SEEDS)]


ILLUSION_LENGTHS = tuple(range(2, 21, 2))
ILLUSION_DEPTHS = (1, 2, 3, 4)
# CPU scale (results/pilots.md): learning an order-60 multiplication table is the bottleneck here, so
# short lengths, depth up to 3 and 2000 steps keep the sweep near half an hour on 2 cores.
ILLUSION_LENGTHS_CPU = (2, 4, 8)
ILLUSION_DEPTHS_CPU = (1, 2, 3)
# On the cpu preset the rnn's hidden size (d_state) is widened as in table2_cpu: at 16 it does
# not learn the order-60 groups (results/pilots.md).
ILLUSION_CPU_MODEL = {"rnn": dict(d_state=64)}


def illusion(base: TrainConfig) -> list[TrainConfig]:
  """Paper 002, Fig. 3: A5, A4xC5, C60 x mamba, s4d, rnn, ids4 x depth 1..4, each trained at a
  fixed length (no curriculum) and evaluated there; the table gives the minimal depth whose
  held-out sequence accuracy at that length exceeds 90%. Lengths 2, 4, .., 20 on the paper
  preset; on the cpu preset lengths 2, 4, 8 and depth 1..3 at width 64 / 16 states, 2000
  steps (results/pilots.md). Deeper stacks of a length some depth solved are skipped
  (sweep_stages.shallower_solved)."""
  if base.preset == "cpu":
    base = base.replace(d_model=64, d_state=16, lr=3e-3, steps=2000)
    lengths, depths = ILLUSION_LENGTHS_CPU, ILLUSION_DEPTHS_CPU
  else:
    base = base.replace(d_state=64, steps=10000, lr=1e-3)
    lengths, depths = ILLUSION_LENGTHS, ILLUSION_DEPTHS
  per_model = ILLUSION_CPU_MODEL if base.preset == "cpu" else {}
  return [base.replace(task=g, model=m, depth=depth, train_length=n, curriculum_start=n,
                       eval_length=max(n, 20), **per_model.get(m, {}))
          for g, m, depth, n in itertools.product(("A5", "A4xC5", "C60"),
                                                  ("mamba", "s4d", "rnn", "ids4"), depths,
                                                  lengths)]


# Paper 001, Fig. 1: hidden size 8; s4d at lr 0.005, mamba at 0.01.
OFFSET_MODELS = (("s4d", 5e-3), ("mamba", 1e-2))


def offset(base: TrainConfig) -> list[TrainConfig]:
  """Paper 001, Sec. 5: next-token prediction of the ITI/ISI signal at length 200 (no
  curriculum), one layer of width 8 with 8 states, mamba-minimal's conv of width 4, 3 seeds;
  evaluated on the training distribution and the two_isi and double_isi streams."""
  base = base.replace(task="offset", train_length=200, curriculum_start=200, eval_length=200,
                      d_model=8, d_state=8, conv_kernel=4)
  return [base.replace(model=m, lr=lr, seed=s) for (m, lr), s in itertools.product(OFFSET_MODELS, SEEDS)]


NEAR_NOISE = (0.0, 0.01, 0.03, 0.1, 0.3)


def near_solution(base: TrainConfig) -> list[TrainConfig]:
  """Paper 000, Sec. 6: AUSSM started from its two-layer S3 construction plus Gaussian noise of
  each scale, then trained as usual (lr 1e-4, cosine), beside the same network (the
  construction's architecture) from a default initialisation; 3 seeds each. Every config
  records the network that is trained, and the label keeps the baseline out of Table 2."""
  base = train.analytic_config(base.replace(task="S3", model="aussm", lr=1e-4, schedule="cosine",
                                            init_from_analytic=0.0, preset=NEAR_SOLUTION))
  return _grid(base, init_from_analytic=NEAR_NOISE + (-1.0,), seed=SEEDS)


# The smoke row's configs per model (CPU tuning, results/pilots.md): negmamba needs a high peak lr to
# saturate Delta; aussm stalls at lr 3e-2 and is twice as slow per step; the rnn's hidden size is
# d_state, so it gets 32 units instead of the preset's 4 (it was starved: 1 of 8 runs succeeded).
SMOKE = {"mamba": dict(lr=(3e-3, 3e-2)), "negmamba": dict(lr=(1e-2, 3e-2)),
         "aussm": dict(lr=(3e-3,)), "rnn": dict(lr=(3e-3, 3e-2), d_state=(32,))}
# Seeds per smoke config, sized from the success rates measured by smoke_p (runs that
# extrapolate / runs: 8 seeds per config at the cap, results/runs_smoke_p, and 8 at the
# curriculum's length, results/runs_smoke_p_buckets; aussm 16 more seeds each way,
# results/runs_smoke_p_aussm_seeds) so that the smoke table prints the paper's C2 verdicts with
# the probability smoke_verdicts_probability() computes (the one source of that number).
SMOKE_MEASURED = {"mamba": (0, 32), "negmamba": (30, 32), "aussm": (28, 48), "rnn": (31, 32)}
SMOKE_SEEDS = {"mamba": 1, "negmamba": 2, "aussm": 6, "rnn": 1}


def smoke_verdicts_probability() -> float:
  """P(the smoke table shows the paper's four C2 verdicts), with each run succeeding at its
  model's measured rate: mamba's cell needs all its runs to fail, the others one success."""
  p = 1.0
  for model, (ok, n) in SMOKE_MEASURED.items():
    runs = SMOKE_SEEDS[model] * len(SMOKE[model]["lr"])
    rate = ok / n
    p *= (1 - rate) ** runs if model == "mamba" else 1 - (1 - rate) ** runs
  return p


def _smoke(base: TrainConfig, seeds) -> list[TrainConfig]:
  base = base.replace(task="C2")
  return [c for m, axes in SMOKE.items()
          for c in _grid(base, model=(m,), **axes, seed=tuple(range(seeds(m))))]


def smoke(base: TrainConfig) -> list[TrainConfig]:
  """The main job: the C2 row at depth 1 for mamba, negmamba, aussm and rnn on the CPU preset,
  about 6 minutes on 2 CPU cores; it reproduces the paper's C2 contrast."""
  return _smoke(base, SMOKE_SEEDS.get)


def smoke_p(base: TrainConfig) -> list[TrainConfig]:
  """The smoke configs over 8 seeds each: the per-run success rates behind SMOKE_SEEDS."""
  return _smoke(base, lambda m: 8)


# table2_cpu's grid per model, 2 or 4 runs per cell (results/pilots.md, "Table 2 at CPU scale"): mamba
# and negmamba on the smoke row's two learning rates; aussm on the rate that learned C60 / A4 in
# the pilots, over four seeds (two first; its cells sat at 0/2 or 1/2 where the paper has a
# number); the rnn on that rate over four seeds (its runs are the cheapest and
# three of its cells rested on one run of two); simple_aussm on two rates and two seeds (its fits
# on the order-60 groups generalise to 80-120 depending on the seed). Widths and step budgets come from
# the table2_cpu preset.
TABLE2_CPU = {"mamba": dict(lr=(3e-3, 3e-2), seed=(0,)),
              "negmamba": dict(lr=(1e-2, 3e-2), seed=(0,)),
              "simple_aussm": dict(lr=(2e-3, 4e-3), seed=(0, 1)),
              "aussm": dict(lr=(3e-3,), seed=(0, 1, 2, 3)),
              "rnn": dict(lr=(3e-3,), seed=(0, 1, 2, 3))}


def table2_cpu(base: TrainConfig) -> list[TrainConfig]:
  """Every Table 2 cell (9 groups x 5 models x depth 1, 2) at CPU scale: 288 runs, resumable
  across sessions, then TABLE2_CPU_MORE_SEEDS for the cells whose verdict could rest on luck
  (sweep_stages.verdict_settled). Each model takes its preset values (for the table2_cpu
  preset: wider and longer rnn and simple_aussm) and its grid from TABLE2_CPU."""
  out = []
  for g, depth, m in itertools.product(TABLE2_GROUPS, TABLE2_DEPTHS, TABLE2_MODELS):
    cell = base.replace(task=g, depth=depth, model=m,
                        **registry.preset_values(base.preset, m))
    out += _grid(cell, **TABLE2_CPU[m])
    out += _grid(cell, lr=TABLE2_CPU[m]["lr"], seed=stages.TABLE2_CPU_MORE_SEEDS)
  return out


BASELINES = ("lstm", "gru", "deltanet", "deltaproduct", "transformer")
EXT_GROUPS = ("C2", "S3", "A5")


def table2_baselines(base: TrainConfig) -> list[TrainConfig]:
  """The baselines on Table 2's C2, S3 and A5 rows at CPU scale (table2_ext_cpu: table2_cpu's
  values, a layer's own sizes from its record), depth 1 and 2, lr {3e-3, 3e-2}, seeds 0 and 1,
  then table2_cpu's second stage (TABLE2_CPU_MORE_SEEDS where verdict_settled says a cell's
  verdict could rest on luck); launch.tables shows them beside the paper models' table2_cpu runs
  (table2_extended.md)."""
  out = []
  for g, depth, m in itertools.product(EXT_GROUPS, TABLE2_DEPTHS, BASELINES):
    cell = base.replace(task=g, depth=depth, model=m, **registry.preset_values(base.preset, m))
    out += _grid(cell, lr=(3e-3, 3e-2), seed=(0, 1))
    out += _grid(cell, lr=(3e-3, 3e-2), seed=stages.TABLE2_CPU_MORE_SEEDS)
  return out


def tiny(base: TrainConfig) -> list[TrainConfig]:
  """Seconds-sized sweep for tests of the launcher and executors."""
  return _grid(base.replace(task="C2"), model=("mamba", "negmamba"), lr=(1e-3, 3e-3), seed=(0,))


# The state-tracking profile (SPEC 7): tracking_profile's groups and depths, for any one layer.
# Per protocol: learning rates and seeds. At CPU scale the two rates of the smoke row (results/pilots.md:
# negmamba needs a high peak rate, aussm stalls at the high one); on a GPU, table2_lite's.
PROFILE_GRID = {"profile_cpu": dict(lr=(3e-3, 3e-2), seed=(0,)),
                "profile_tiny": dict(lr=(1e-3,), seed=(0,)),
                "profile": dict(lr=(1e-3, 1e-2), seed=(0, 1))}
def profile(base: TrainConfig) -> list[TrainConfig]:
  """One model (base.model, e.g. --config.model=lru with --config.plugins=...) over the profile's
  groups and depths (a hybrid stack's: its own), with the layer's own values for the protocol
  from its registry record (a hybrid's: the preset's).
  Staged by depth, each depth in two stages: a deeper stack is not trained once a shallower one
  of the same group extrapolated (shallower_extrapolated), and PROFILE_MORE_SEEDS train only
  where a cell's first runs go against the theory on too few runs, the first of them where the
  cell's verdict rests on one success (profile_skip; both rules and the seeds in
  launch/sweep_stages.py). A --config.task outside the profile's groups (a group the
  researcher adds: `launch.profile --groups=D3`) is the one group trained, so its runs are named
  and staged as the profile's own and its report shows it as one more row."""
  preset = base.preset if base.preset in PROFILE_GRID else config.PROFILE_PRESETS["cpu"]
  base = base.replace(preset=preset, **registry.preset_values(preset, base.model))
  grid = PROFILE_GRID[preset]
  groups = tracking_profile.GROUPS if base.task in tracking_profile.GROUPS else (base.task,)
  return [c for g, depth in itertools.product(groups, tracking_profile.depths_of(base.model))
          for seeds in (grid["seed"], stages.PROFILE_MORE_SEEDS.get(preset, ()))
          for c in _grid(base.replace(task=g, depth=depth), lr=grid["lr"], seed=seeds)]


# The formal-language seed's experiment at CPU scale (paper 003): every named language's
# predictive task x the models it contrasts (and the baselines) x depth 1, 2, at the cpu preset.
LANGUAGE_MODELS = ("mamba", "negmamba", "aussm", "rnn", "lstm", "deltanet", "transformer")
# Non-linear RNNs at the cpu preset's 4 state units are starved: the smoke's rnn reached 1000 on
# C2 in 1 of 8 runs at 4 units and 16 of 16 at 32 (results/pilots.md, "The smoke table's success rates"); a pilot here: parity
# 0 of 2 at 4 units. So they get 32 units, as in the smoke.
LANGUAGE_SIZES = {"rnn": dict(d_state=32), "lstm": dict(d_state=32)}


def languages_sweep(base: TrainConfig) -> list[TrainConfig]:
  """Each language (lang-<name>, the next-symbol-set target) x LANGUAGE_MODELS x depth 1, 2 x
  lr {3e-3, 3e-2}, seed 0, then LANGUAGE_MORE_SEEDS where language_settled says a cell's verdict
  could rest on luck; a model's own preset values as in the profile. Staged by depth like the
  profile: depth 2 trains only where no depth-1 run extrapolated."""
  names = task_registry.language_names()
  return [c for name, m, depth in itertools.product(names, LANGUAGE_MODELS, (1, 2))
          for seeds in ((0,), stages.LANGUAGE_MORE_SEEDS)
          for c in _grid(base.replace(task=f"lang-{name}", model=m, depth=depth,
                                      **registry.preset_values(base.preset, m),
                                      **LANGUAGE_SIZES.get(m, {})),
                         lr=(3e-3, 3e-2), seed=seeds)]


@dataclasses.dataclass(frozen=True)
class Sweep:
  grid: callable  # base config -> list of configs
  preset: str  # the preset its base comes from unless --preset says otherwise
  # Staged sweeps: groups run in order of stage(config); a run is skipped when
  # skip(config, [(config, summary) of the finished runs of earlier stages]) is true.
  stage: callable = None
  skip: callable = None


SWEEPS = {"table2": Sweep(table2, "table2"), "table2_lite": Sweep(table2_lite, "table2_lite"),
          "parity_hybrid": Sweep(parity_hybrid, "cpu"),
          "illusion": Sweep(illusion, "cpu", stage=lambda c: c.depth,
                            skip=stages.shallower_solved),
          "offset": Sweep(offset, "cpu"), "near_solution": Sweep(near_solution, "cpu"),
          "table2_cpu": Sweep(table2_cpu, "table2_cpu", stage=stages.more_seeds_stage,
                              skip=stages.verdict_settled), "smoke": Sweep(smoke, "cpu"),
          "smoke_p": Sweep(smoke_p, "cpu"),
          "languages": Sweep(languages_sweep, "cpu", stage=stages.language_stage,
                             skip=stages.language_settled),
          "table2_baselines": Sweep(table2_baselines, "table2_ext_cpu",
                                    stage=stages.more_seeds_stage, skip=stages.verdict_settled),
          "profile": Sweep(profile, "profile_cpu", stage=stages.profile_stage,
                           skip=stages.profile_skip),
          "tiny": Sweep(tiny, "tiny")}


def expand(name: str, base_values: dict, overrides: dict | None = None) -> list[TrainConfig]:
  """The sweep's configs on a base built from `base_values`, each then given `overrides`;
  duplicates (an override that collapses a grid axis) are kept once, in grid order."""
  overrides = overrides or {}
  model = overrides.get("model")  # takes its own values for the protocol (its record's
  # presets), as the sweep's own models take theirs; the overrides still win
  grid = _own_column(_grid_before(name, base_values, overrides), model)
  own = _model_bound(grid, TrainConfig(**{**base_values, **overrides})) if model else {}
  cfgs = [c.replace(**{**own, **(registry.preset_values(c.preset, model) if model else {}),
                       **overrides}) for c in grid]
  if {"task", "model"} & set(overrides) and any(c.init_from_analytic >= 0 for c in cfgs):
    # runs from a construction, and their default-init baseline, train its network: that of
    # the task and model given (near_solution --config.task=D4 --config.model=deltanet)
    net = lambda c: c.replace(init_from_analytic=0.0, seed=0)  # seeds and noise share one
    built = {}
    for c in cfgs:
      if net(c) not in built:
        built[net(c)] = train.analytic_config(net(c))
    cfgs = [built[net(c)].replace(init_from_analytic=c.init_from_analytic, seed=c.seed)
            for c in cfgs]
    wanted, stacks = overrides.get("model"), {(c.task, c.model) for c in cfgs}
    for task, model in stacks:  # a model without the task's construction is not swapped quietly
      if wanted and model != wanted:
        raise config.ConfigError(
            f"--config.model={wanted}: {task} has no {wanted} construction to start from; "
            f"choose one of {', '.join(analytic.construction_models(task))}")
  return list(dict.fromkeys(cfgs))


def _own_column(grid, model: str | None) -> list[TrainConfig]:
  """A model the sweep trains gets its own runs (its rates, seeds and sizes), not every model's
  made its (table2_cpu --config.model=mamba trained 540 runs at the five models' rates and seeds
  instead of its 180); any other model (a plugin) gets every model's, at the base's sizes."""
  own = [c for c in grid if c.model == model]
  return own or grid


def _model_bound(grid, base: TrainConfig) -> dict:
  """The fields the grid sets per model (one value per model, not the same for all: the
  languages sweep's 32 units for rnn and lstm), at the base's value: a model the sweep does not
  train takes its own sizes, not those of each model it replaces (a plugin layer on
  `languages` trained at 4 and at 32 units)."""
  per_model = {}
  for c in grid:
    per_model.setdefault(c.model, []).append(c)
  if len(per_model) < 2:
    return {}
  out = {}
  for f in dataclasses.fields(TrainConfig):
    if f.name == "model":
      continue
    values = {m: {getattr(c, f.name) for c in cs} for m, cs in per_model.items()}
    if all(len(v) == 1 for v in values.values()) and len({*map(frozenset, values.values())}) > 1:
      out[f.name] = getattr(base, f.name)
  return out


def _grid_before(name: str, base_values: dict, overrides: dict) -> list[TrainConfig]:
  """The sweep's grid before the overrides are applied to each config; they reach its base, so
  a grid sees the model (and plugins) it is asked about."""
  return SWEEPS[name].grid(TrainConfig(**{**base_values, **overrides}))


def collapsed(name: str, base_values: dict, overrides: dict | None) -> dict:
  """{field: the grid's values} for each override that replaces an axis the sweep varies (its
  runs of those values merge into the override's). A model the sweep trains is not one: it
  selects its own runs (_own_column)."""
  cfgs = _grid_before(name, base_values, overrides) if overrides else []
  cfgs = _own_column(cfgs, (overrides or {}).get("model"))
  return {f: vals for f in overrides or {}
          if len(vals := sorted({getattr(c, f) for c in cfgs})) > 1}
