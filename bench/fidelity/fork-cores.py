#!/usr/bin/env python3
"""short-lived in the model: on which core each burst's four threads first ran, against the
hog's core at the burst's arrival (the kernel puts all four on the free CPU when the spawner
is on the hog's; docs/results/fidelity.md).

    schedkit sim FILE.toml --trace sl.json     # short-lived with the engine's stand-in
    python3 bench/fidelity/fork-cores.py sl.json

Bursts are the processes named burstK, arriving at 100 ms + 200 ms x K."""
import collections
import json
import sys

d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
first, hog_at = {}, {}
for e in sorted((e for e in ev if e.get("ph") == "X"), key=lambda e: e["ts"]):
    key = (e["name"], e["args"]["thread"])
    first.setdefault(key, (e["ts"] / 1000, e["tid"]))
    if e["name"] == "hog":
        hog_at[int(e["ts"] // 1000)] = e["tid"]
split = collections.Counter()
for k in range(10):
    name, t0 = f"burst{k}", 100 + 200 * k
    if (name, 0) not in first:
        continue
    hog = [hog_at[t] for t in sorted(hog_at) if t <= t0][-1]
    cores = [first[(name, i)][1] for i in range(4)]
    beside = sum(1 for c in cores if c == hog)
    split[beside] += 1
    print(f"{name}: hog on core {hog}, threads first on cores {cores}: {4 - beside} + {beside}")
print("bursts by threads beside the hog:", dict(sorted(split.items())))
