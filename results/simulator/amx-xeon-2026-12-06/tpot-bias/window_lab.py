# ruff: noqa: S301  (a scratch analysis of the pickles lab.py and lab2.py wrote, kept as run)
"""window.py's regression on the starts of lab.py (hot-lab.pkl) or lab2.py (open-lab.pkl), each fitted as kvviz
fits it (the calibration's loads as measured, lone prompts cold): python window_lab.py PKL, from this folder with
PYTHONPATH set to the repository root."""

import pickle
import sys

ns: dict = {}
exec(open("window.py").read().split("with open(sys.argv[1]")[0], ns)  # noqa: S102  (window.py's functions)
with open(sys.argv[1], "rb") as handle:
    starts = pickle.load(handle)
for i, s in enumerate(starts):
    f = ns["fit_runs"](s["cal"], s["engine"])
    st = f.step
    loop = s["cal"][0].records
    gap = (sum(b - a for r in loop for a, b in zip(r.arrivals_s, r.arrivals_s[1:], strict=False))
           / sum(len(r.arrivals_s) - 1 for r in loop))
    print(f"start {i}: a {1e3 * st.a:.2f} ms, c {1e6 * st.c:.0f} us; calibration's loop of one at 64/32: mean gap "
          f"{1e3 * gap:.2f} ms")
    for m in s["held"]:
        sim = ns["_predicted"](m.point, s["engine"], f)[2]
        for name, records in (("measured", m.records), ("simulated", sim.records)):
            (base, per_dec, per_prompt), mx, my, rms = ns["fit"](records)
            print(f"  {m.point.rate:g}/s {name:9s}: mean TPOT {1e3 * my:.2f} ms = base {1e3 * base:.2f} "
                  f"+ {1e6 * per_dec:.0f} us x {mx[1]:.2f} decodes + {1e3 * per_prompt:.2f} ms x {mx[2]:.3f} prompts"
                  f" (rms {1e3 * rms:.2f} ms)", flush=True)
