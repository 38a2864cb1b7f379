"""PNG figures from run summaries: acc(L) per Table 2 group, one line per model (best run per
cell); the neighbouring papers' offset examples and minimal depths."""
from __future__ import annotations

import hashlib
import os


def _pyplot():
  try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
  except ImportError:
    print("matplotlib is not installed (pip install -e '.[plots]'): figures skipped")
    return None
  plt.rcParams["svg.hashsalt"] = "ssm-bench"  # deterministic output
  return plt


def _save(fig, plt, out_dir, name):
  fig.tight_layout()
  fig.savefig(os.path.join(out_dir, name), dpi=100, metadata={"Software": None})
  plt.close(fig)
  return name


def _file_label(proto: str) -> str:
  """A protocol as a file-name part: its preset and, when the protocol differs from the
  preset's values, a short hash of it."""
  preset, _, diffs = proto.partition(" + ")
  return f"{preset}-{hashlib.sha1(proto.encode()).hexdigest()[:6]}" if diffs else preset


def write_curves(rs, out_dir: str) -> list[str]:
  """One figure per (protocol, group, depth) of Table 2 runs, so protocols never share a figure;
  returns the file names written ([] without matplotlib)."""
  from ssm_bench.tables import is_table2_run, protocol
  plt = _pyplot()
  if plt is None:
    return []
  best = {}
  for s in rs.good:
    c = s["config"]
    if not is_table2_run(c):
      continue
    # one figure per protocol (as Table 2 pools)
    key = (_file_label(protocol(c)), c["task"], c["depth"], c["model"])
    if key not in best or s["max_len"] > best[key]["max_len"]:
      best[key] = s
  written = []
  for preset, task, depth in sorted({k[:3] for k in best}):
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for (p, t, d, model), s in sorted(best.items()):
      if (p, t, d) != (preset, task, depth):
        continue
      xs = [int(L) for L in s["acc_curve"]]
      ax.plot(xs, list(s["acc_curve"].values()), label=f"{model} (max_len {s['max_len']})")
    ax.axhline(0.9, color="grey", lw=0.8, ls="--")
    ax.axvline(60, color="grey", lw=0.8, ls=":")
    ax.set(xlabel="length L", ylabel="acc(L)", ylim=(0, 1.02),
           title=f"{task}, depth {depth} (preset {preset})")
    ax.legend(fontsize=7)
    written.append(_save(fig, plt, out_dir, f"acc_curve_{preset}_{task}_depth{depth}.png"))
  return written


def write_illusions(by_protocol: dict, out_dir: str) -> list[str]:
  """One minimal-depth figure (write_illusion) per protocol of the illusion table's runs."""
  return [name for proto, data in by_protocol.items()
          for name in write_illusion(data, out_dir, f"illusion_depth_{_file_label(proto)}.png",
                                     proto)]


def write_illusion(data: dict, out_dir: str, name: str = "illusion_depth.png",
                   proto: str = "") -> list[str]:
  """Paper 002, Fig. 3: minimal depth against training length, one panel per group and one line
  per model; a length no depth solved is drawn hollow one above the deepest stack tried."""
  plt = _pyplot()
  if plt is None or not data:
    return []
  fig, axes = plt.subplots(1, len(data), figsize=(4 * len(data), 3.2), squeeze=False)
  top = max(cell["tried"] for by_model in data.values() for row in by_model.values()
            for cell in row.values())
  models = sorted({m for by_model in data.values() for m in by_model})
  for ax, (group, by_model) in zip(axes[0], sorted(data.items())):
    for model, row in sorted(by_model.items()):
      i = models.index(model)
      shift = 0.06 * (i - (len(models) - 1) / 2)  # keep overlapping lines apart
      lengths = sorted(row, key=int)
      xs = [int(L) for L in lengths]
      ys = [(row[L]["depth"] or row[L]["tried"] + 1) + shift for L in lengths]
      ax.plot(xs, ys, marker="o", color=f"C{i}", label=model)
      hollow = [(x, y) for x, y, L in zip(xs, ys, lengths) if row[L]["depth"] is None]
      if hollow:
        ax.plot(*zip(*hollow), ls="none", marker="o", color="white", markeredgecolor=f"C{i}")
    ax.set(xlabel="training length", ylabel="minimal depth", title=group,
           xticks=sorted({int(L) for row in by_model.values() for L in row}),
           yticks=range(1, top + 2), ylim=(0.5, top + 1.5),
           yticklabels=[str(d) for d in range(1, top + 1)] + [f"> {top}"])
  handles = [plt.Line2D([], [], marker="o", color=f"C{i}", label=m) for i, m in enumerate(models)]
  axes[0, 0].legend(handles=handles, fontsize=7, loc="center right")
  if proto:
    fig.suptitle(f"protocol: {proto}", fontsize=7)
  return [_save(fig, plt, out_dir, name)]


def _layer_part(model: str, kwargs: str) -> str:
  """A layer at its kwargs as a file-name part: its name (a stack's as run directories spell
  it, `negmamba+deltanet`), then a short hash of any kwargs."""
  digest = f"_{hashlib.sha1(kwargs.encode()).hexdigest()[:8]}" if kwargs else ""
  return model.replace(",", "+") + digest


def write_examples(rs, out_dir: str) -> list[str]:
  """Output against signal (paper 001, Figs. 1-8): per protocol of the offset table and model
  stack (a layer at its kwargs), the first seed's run with a stored example, one panel per
  evaluation stream."""
  from ssm_bench import neighbours
  from ssm_bench import report
  from ssm_bench.tables import protocol
  plt = _pyplot()
  if plt is None:
    return []
  offset_axes = next(t.axes for t in report.TABLES if t.key == "offset")
  first = {}
  for s in sorted(rs.good, key=lambda s: (s["config"]["seed"], s["run"])):
    c = s["config"]
    if "example" in s and c["task"] == "offset":  # flip-flop languages store one too
      first.setdefault((c["task"], protocol(c, offset_axes),
                        _layer_part(c["model"], c.get("layer_kwargs", "")), c["depth"]), s)
  written = []
  for (task, proto, layer, depth), s in sorted(first.items()):
    streams = {s["eval_stream"]: s, **s.get("other_streams", {})}
    fig, axes = plt.subplots(len(streams), 1, figsize=(8, 1.8 * len(streams)), squeeze=False)
    for ax, (name, res) in zip(axes[:, 0], streams.items()):
      ex = res["example"]
      ax.step(range(len(ex["labels"])), ex["labels"], where="mid", color="grey", lw=1,
              label="next token (signal)")
      ax.plot(ex["p1"], color="C0", lw=1.2, label="model P(next = 1)")
      ax.set(ylim=(-0.05, 1.05), ylabel=name)
    c = s["config"]
    axes[0, 0].set_title(f"{task}: {neighbours.stack_name(c)}, lr {c['lr']:g}, seed {c['seed']}")
    axes[0, 0].legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("position")
    fig.suptitle(f"protocol: {proto}", fontsize=7)
    name = f"example_{task}_{_file_label(proto)}_{layer}_depth{depth}.png"
    written.append(_save(fig, plt, out_dir, name))
  return written


def write_profiles(data: dict, out_dir: str) -> list[str]:
  """One heatmap per profiled model: groups x depths, colour = best max_len, each cell marked
  with the theory's verdict (✓ / ✗ / ?) and outlined red where they disagree (dashed where
  that rests on too few runs: tracking_profile.tentative)."""
  from ssm_bench import neighbours
  from ssm_bench import tracking_profile as tp
  plt = _pyplot()
  if plt is None or not data:
    return []
  import numpy as np
  written = []
  for p in data.values():
    gs, ds = p["groups"], p["depths"]
    values = np.full((len(gs), len(ds)), np.nan)
    head = f"{neighbours.layer_label(p['model'], p['layer_kwargs'])} ({p['class']})"
    # wide enough for the title (a hybrid's one depth under its classes' names)
    fig, ax = plt.subplots(figsize=(max(1.3 * len(ds) + 2.2, 0.07 * len(head) + 0.6),
                                    0.42 * len(gs) + 1.4))
    for i, g in enumerate(gs):
      for j, d in enumerate(ds):
        e = p["cells"][g][d]
        if e["runs"]:
          values[i, j] = e["max_len"]
        text = tp.untrained_cell(e["solved_at"]) if not e["runs"] else \
            f"{e['max_len']} {tp.MARK[e['theory']]}\n{e['successes']}/{e['runs']}" + (
                f", {e['diverged']} div." if e["diverged"] else "")
        dark = bool(e["runs"]) and e["max_len"] > 600  # past the Greens map's middle
        ax.text(j, i, text, ha="center", va="center", fontsize=7,
                color="white" if dark else "black")
        if tp.verdict(e):
          # inset, so that two outlined neighbours do not draw over each other's dashes
          ax.add_patch(plt.Rectangle((j - 0.45, i - 0.45), 0.9, 0.9, fill=False, ec="red",
                                     lw=2, ls="--" if tp.tentative(e) else "-"))
    ax.imshow(values, cmap="Greens", vmin=0, vmax=1000, aspect="auto")
    ax.set_xticks(range(len(ds)), [f"depth {d}" for d in ds])
    ax.set_yticks(range(len(gs)), gs)
    ax.set_title(f"{head}\n"
                 "max_len, theory; "
                 "red: disagree (dashed: tentative)"
                 + ("; div.: runs that diverged" if tp.diverged_runs(p) else ""), fontsize=8)
    name = f"profile_{_file_label(p['protocol'])}_{_layer_part(p['model'], p['layer_kwargs'])}"
    written.append(_save(fig, plt, out_dir, name + ".png"))
  return written


# The overview's cell kinds (tracking_profile.min_depth_entry), as (colour, legend): not trained,
# the measured minimal depth is the theory's, neither tracks the group, no theorem, the theory's
# depth not trained, below, beats (lighter where tentative).
_OVERVIEW_KINDS = {"untrained": ("white", None), "tracked": ("#74c476", "tracked, as predicted"),
                   "untracked": ("#d9d9d9", "not tracked, as predicted"),
                   "no theorem": ("#fff7bc", "no theorem"),
                   "too shallow": ("#deebf7", "the theory's depth not trained"),
                   "below": ("#fb6a4a", "below theory"),
                   "below?": ("#fcbba1", "below theory, tentative"),
                   "beats": ("#807dba", "beats theory"),
                   "beats?": ("#bcbddc", "beats theory, tentative")}


def write_profile_overview(data: dict, out_dir: str,
                           name: str = "profile_overview.png") -> list[str]:
  """profile.md's overview as a grid, groups x profiles, each cell `m / t`
  (tracking_profile.min_depth_entry) coloured by how measurement and theory compare."""
  from ssm_bench import tracking_profile as tp
  plt = _pyplot()
  if plt is None or len(data) < 2:
    return []
  import numpy as np
  from matplotlib.colors import ListedColormap
  from matplotlib.patches import Patch
  profiles, kinds = list(data.values()), list(_OVERVIEW_KINDS)
  groups = tp.overview_groups(profiles)
  several = len({p["protocol"] for p in profiles}) > 1
  codes = np.zeros((len(groups), len(profiles)))
  fig, ax = plt.subplots(figsize=(1.05 * len(profiles) + 1.6, 0.36 * len(groups) + 2.2))
  for i, g in enumerate(groups):
    for j, p in enumerate(profiles):
      entry = tp.min_depth_entry(p, g)
      if entry is None:
        continue
      codes[i, j] = kinds.index(entry["kind"] + "?" * entry["tentative"])
      ax.text(j, i, entry["text"], ha="center", va="center", fontsize=7)
  colours = [_OVERVIEW_KINDS[k][0] for k in kinds]
  ax.imshow(codes, cmap=ListedColormap(colours), vmin=-0.5, vmax=len(kinds) - 0.5, aspect="auto")
  ax.set_xticks(range(len(profiles)), [tp.overview_heading(p, several) for p in profiles],
                rotation=40, ha="right", fontsize=7)
  ax.set_yticks(range(len(groups)), groups, fontsize=8)
  ax.set_title("State-tracking profiles: the smallest depth that extrapolated / the theory's "
               f"(tentative: fewer than {tp.MIN_RUNS_AGAINST_THEORY} runs; {tp.ONCE}: one run "
               "reached that depth)", fontsize=8)
  ax.legend(handles=[Patch(color=c, label=l) for c, l in _OVERVIEW_KINDS.values() if l],
            fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=3, frameon=False)
  return [_save(fig, plt, out_dir, name)]
