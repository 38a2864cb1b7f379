"""PNG figures from run summaries: acc(L) per group, one line per model (best run per cell)."""
from __future__ import annotations

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


def write_curves(rs, out_dir: str) -> list[str]:
  """One figure per (group, depth); returns the file names written ([] without matplotlib)."""
  plt = _pyplot()
  if plt is None:
    return []
  best = {}
  for s in rs.good:
    c = s["config"]
    key = (c["task"], c["depth"], c["model"])
    if key not in best or s["max_len"] > best[key]["max_len"]:
      best[key] = s
  written = []
  for task, depth in sorted({(k[0], k[1]) for k in best}):
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for (t, d, model), s in sorted(best.items()):
      if (t, d) != (task, depth):
        continue
      xs = [int(L) for L in s["acc_curve"]]
      ax.plot(xs, list(s["acc_curve"].values()), label=f"{model} (max_len {s['max_len']})")
    ax.axhline(0.9, color="grey", lw=0.8, ls="--")
    ax.axvline(60, color="grey", lw=0.8, ls=":")
    ax.set(xlabel="length L", ylabel="acc(L)", ylim=(0, 1.02), title=f"{task}, depth {depth}")
    ax.legend(fontsize=7)
    written.append(_save(fig, plt, out_dir, f"acc_curve_{task}_depth{depth}.png"))
  return written


def write_examples(rs, out_dir: str) -> list[str]:
  """Output against signal (paper 001, Figs. 1-8): per model stack, the first seed's run with a
  stored example, one panel per evaluation stream."""
  plt = _pyplot()
  if plt is None:
    return []
  first = {}
  for s in sorted(rs.good, key=lambda s: (s["config"]["seed"], s["run"])):
    if "example" in s:
      c = s["config"]
      first.setdefault((c["task"], c["model"], c["depth"]), s)
  written = []
  for (task, model, depth), s in sorted(first.items()):
    streams = {s["eval_stream"]: s, **s.get("other_streams", {})}
    fig, axes = plt.subplots(len(streams), 1, figsize=(8, 1.8 * len(streams)), squeeze=False)
    for ax, (name, res) in zip(axes[:, 0], streams.items()):
      ex = res["example"]
      ax.step(range(len(ex["labels"])), ex["labels"], where="mid", color="grey", lw=1,
              label="next token (signal)")
      ax.plot(ex["p1"], color="C0", lw=1.2, label="model P(next = 1)")
      ax.set(ylim=(-0.05, 1.05), ylabel=name)
    axes[0, 0].set_title(f"{task}: {model} x{depth}, lr {s['config']['lr']:g}, seed "
                         f"{s['config']['seed']}")
    axes[0, 0].legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("position")
    written.append(_save(fig, plt, out_dir, f"example_{task}_{model}_depth{depth}.png"))
  return written
