#!/usr/bin/env python3
"""Counts fork-split's bursts by where the spawner was against the hog and how the burst split.

    python3 bench/fidelity/fork-split-summary.py OUT.txt...

The hog's CPU at the fork is the one whose root cfs_rq load was above 900 just before the
burst (the hog may move between bursts); bursts where that is not exactly one CPU are counted
apart. "free + hog" is how many children started on the other CPU and how many beside the hog;
"first child" is whether its initial utilisation was half the spare capacity (cap, as on an
empty queue) or less than 400 (the queue had a little utilisation and more load left, and
`post_init_entity_util_avg` scaled by their ratio)."""
import collections
import re
import sys

for path in sys.argv[1:]:
    counts = collections.Counter()
    before = None
    for line in open(path):
        if line.startswith("before burst"):
            before = [(int(c), int(l)) for c, l in re.findall(r"cpu(\d+) load +(\d+)", line)]
            continue
        m = re.match(r"burst \d+: spawner cpu(\d+), hog cpu(-?\d+), children:(.*)", line)
        if not m:
            continue
        busy = [c for c, l in before or [] if l > 900]
        if len(busy) != 1:
            counts[("hog's CPU unclear",)] += 1
            continue
        hog, spawner = busy[0], int(m.group(1))
        kids = [(int(c), int(u)) for c, u in re.findall(r"cpu(-?\d+) util (-?\d+)", m.group(3))]
        free = sum(1 for c, _ in kids if c != hog)
        where = "spawner beside the hog" if spawner == hog else "spawner on the free CPU"
        first = "cap" if kids and kids[0][1] >= 400 else "small"
        counts[(where, f"{free} + {len(kids) - free}", f"first child {first}")] += 1
    print(path)
    for k, v in sorted(counts.items()):
        print(f"  {v:3d}  " + ", ".join(k))
