"""What training at the curriculum's length would have saved the stored CPU runs: per group
(runs sharing every field but lr, schedule and seed), each 100-step chunk costed at the bucket
that holds the group's longest length at its start (times `growth`: 1 for the exact bound of a
run whose streak is 0, 2 for the worst case), at the measured ms per step of a 2-run group per
length (lengths.txt, mamba), plus `COMPILE_S` per bucket a group uses besides the cap.

    python results/bench/cpu_length_buckets/simulate.py
"""
import collections, glob, json

MS = {8: 3.54, 16: 7.03, 32: 12.14, 60: 17.36}  # lengths.txt: mamba, 2-run group, table2_cpu sizes
COMPILE_S = 5.0


def groups(pred):
  out = collections.defaultdict(list)
  for d in glob.glob("results/runs*/*/"):
    try:
      s, c = json.load(open(d + "summary.json")), json.load(open(d + "config.json"))
    except (OSError, ValueError):
      continue
    if s.get("backend") != "cpu" or not pred(c):
      continue
    key = json.dumps({k: v for k, v in c.items() if k not in ("lr", "schedule", "seed")},
                     sort_keys=True)
    out[key].append([json.loads(l)["length"] for l in open(d + "metrics.jsonl")])
  return out


def ratio(runs, buckets, growth):
  full = cost = 0.0
  for rs in runs.values():
    n = min(len(r) for r in rs)
    longest = [max((r[i - 1] if i else 2) for r in rs) for i in range(n)]
    used = set()
    full += n * 100 * MS[60] / 1000
    for m in longest:
      b = min(x for x in buckets if x >= min(60, m * growth))
      if b != 60 and b not in used:
        used.add(b)
        cost += COMPILE_S
      cost += 100 * MS[b] / 1000
  return cost / full


for name, pred in [("profile_cpu", lambda c: c.get("preset") == "profile_cpu"),
                   ("table2_cpu", lambda c: c.get("preset") == "table2_cpu"),
                   ("smoke (cpu preset, C2)", lambda c: c.get("preset") == "cpu" and c.get("task") == "C2")]:
  runs = groups(pred)
  cells = [f"{b}: {ratio(runs, b, 1):.2f}-{ratio(runs, b, 2):.2f}"
           for b in [(8, 16, 60), (8, 16, 32, 60), (16, 60)]]
  print(f"{name} ({len(runs)} groups): " + "; ".join(cells))
