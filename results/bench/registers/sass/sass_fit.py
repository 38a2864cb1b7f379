"""Fits the fourth H100 session's real-kind tile times (h100/7_parallel_tiles_*) to kernel counts
in five ways: PTX instructions (the registers section's model), SASS instructions, SASS with
shuffles weighted 2 or 4, and per-pipe issue time (FP32 4, SHFL 1, MUFU 0.5, other 2 warp
instructions per clock), max or sum. Run from the repository root:
python results/bench/registers/sass/sass_fit.py results/bench/registers/sass/decay_as_timed_73b3aa5.json
"""
import json, numpy as np, sys
sass = json.load(open(sys.argv[1]))
t = json.load(open('results/bench/h100/7_parallel_tiles_train_many_profile_mamba.json'))['parallel_tiles']
sizes = t['sizes']
meas = {(r['kernel'], tuple(r['tile'])): r['ms_per_run'] for r in t['rows'] if r['kind'] == 'real'}
fwd_best = meas[('forward', (8, 2))]
FP = ('FFMA', 'FMUL', 'FADD', 'FSEL', 'FMNMX')
def feats(r):
  c, w = r['tile']; progs = sizes['batch'] * -(-sizes['d_model'] // c); k = progs * w
  lo = r['loop_ops']; S = sizes['d_state']
  shfl = lo.get('SHFL', 0); mufu = lo.get('MUFU', 0); fp = sum(lo.get(o, 0) for o in FP)
  tot = r['sass_loop']
  rest = r['sass'] - r['sass_loop']
  return dict(ptx=k * (r['instructions'] - r['loop_instructions'] + S * r['loop_instructions']),
              sass=k * (rest + S * tot), shfl=k * S * shfl, nonshfl=k * (rest + S * (tot - shfl)),
              pipe=k * S * np.array([fp / 4, shfl / 1, mufu / 0.5, (tot - fp - shfl - mufu) / 2]), warps=w)
data = []
for r in sass['rows']:
  key = (r['which'], tuple(r['tile']))
  if key not in meas: continue
  ms = meas[key] - (fwd_best if r['which'] == 'backward' else 0)
  data.append((key, ms, feats(r)))
def report(name, pred_fn, sel):
  ys = np.array([d[1] for d in data if sel(d)]); X = [d[2] for d in data if sel(d)]
  x = np.array([pred_fn(f) for f in X])
  rate = x @ x / (x @ ys); e = np.abs(x / rate - ys) / ys
  print(f"{name:28s} n={len(ys)} rate={rate:.3g} maxerr={e.max():.2f} meanerr={e.mean():.3f} corr={np.corrcoef(x, ys)[0,1]:.3f}")
  return rate
for sel_name, sel in (("fwd", lambda d: d[0][0] == 'forward'), ("bwd", lambda d: d[0][0] == 'backward'), ("all", lambda d: True)):
  print("--", sel_name)
  report("ptx total", lambda f: f['ptx'], sel)
  report("sass total", lambda f: f['sass'], sel)
  report("sass, shfl x2", lambda f: f['nonshfl'] + 2 * f['shfl'], sel)
  report("sass, shfl x4", lambda f: f['nonshfl'] + 4 * f['shfl'], sel)
  report("pipe max", lambda f: f['pipe'].max(), sel)
  report("pipe sum", lambda f: f['pipe'].sum(), sel)
for d in data: print(d[0], round(d[1], 4), (d[2]['pipe'] / 1e6).round(1), round(d[2]['sass'] / 1e6, 1))
