#!/usr/bin/env python3
"""short-lived, burst by burst: how much CPU the hog got in each 200 ms burst window, and how
much the burst threads took on the hog's CPU, in the kernel or in the model.

    python3 bench/fidelity/hog-windows.py kernel sl.txt     # `perf script` of a sched_switch trace
    python3 bench/fidelity/hog-windows.py model sl.json     # `schedkit sim --trace` (Chrome JSON)

A window starts when the burst's first thread first runs (kernel) or at its arrival (model,
100 ms + 200 ms x k). "hog's CPU" is the CPU where the hog ran most in the window."""
import collections
import json
import re
import sys


def kernel(path):
    runs, cur = [], {}
    pat = re.compile(r"\[(\d+)\] +(\d+\.\d+): +sched:sched_switch: prev_comm=(.*) prev_pid=\d+ "
                     r".* ==> next_comm=(.*) next_pid=\d+")
    for line in open(path):
        m = pat.search(line)
        if m:
            cpu, t = int(m.group(1)), float(m.group(2)) * 1e3
            if cpu in cur:
                runs.append((cur[cpu][0], cpu, cur[cpu][1], t))
            cur[cpu] = (m.group(4), t)
    starts = {}
    for name, _, s, _ in runs:
        if name.startswith("burst"):
            starts.setdefault(name.split(".")[0], s)
    return runs, [starts[k] for k in sorted(starts)]


def model(path):
    d = json.load(open(path))
    ev = d["traceEvents"] if isinstance(d, dict) else d
    runs = [(e["name"], e["tid"], e["ts"] / 1e3, (e["ts"] + e["dur"]) / 1e3)
            for e in ev if e.get("ph") == "X"]
    return runs, [100 + 200 * k for k in range(10)]


runs, starts = (kernel if sys.argv[1] == "kernel" else model)(sys.argv[2])
print(f"{'burst':>5} {'hog ms':>7} {'threads on its CPU ms':>22}  hog ms by CPU")
hogs, kids = [], []
for b, t0 in enumerate(starts):
    t1 = t0 + 200
    over = lambda s, t: max(0.0, min(t, t1) - max(s, t0))
    by_cpu = collections.Counter()
    for name, cpu, s, t in runs:
        if name.split(".")[0] == "hog":
            by_cpu[cpu] += over(s, t)
    hc = by_cpu.most_common(1)[0][0]
    kid = sum(over(s, t) for name, cpu, s, t in runs if name.startswith("burst") and cpu == hc)
    hogs.append(sum(by_cpu.values()))
    kids.append(kid)
    print(f"{b:5d} {hogs[-1]:7.1f} {kid:22.1f}  {dict((c, round(v)) for c, v in by_cpu.items() if v >= 0.5)}")
print(f" mean {sum(hogs) / len(hogs):7.1f} {sum(kids) / len(kids):22.1f}")
