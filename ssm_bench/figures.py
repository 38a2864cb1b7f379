"""PNG figures from run summaries: acc(L) per group, one line per model (best run per cell)."""
from __future__ import annotations

import os


def write_curves(rs, out_dir: str) -> list[str]:
  """One figure per (group, depth); returns the file names written ([] without matplotlib)."""
  try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
  except ImportError:
    print("matplotlib is not installed (pip install -e '.[plots]'): figures skipped")
    return []
  plt.rcParams["svg.hashsalt"] = "ssm-bench"  # deterministic output
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
    fig.tight_layout()
    name = f"acc_curve_{task}_depth{depth}.png"
    fig.savefig(os.path.join(out_dir, name), dpi=100, metadata={"Software": None})
    plt.close(fig)
    written.append(name)
  return written
