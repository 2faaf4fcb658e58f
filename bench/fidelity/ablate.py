#!/usr/bin/env python3
"""Writes a copy of a recorded fidelity.json without what the simulated side replays from
the real runs, so that `schedkit experiment fidelity --real-from` shows what each part does
on the same kernel data:

    bench/fidelity/ablate.py fid/fidelity.json --drop other-work  > /tmp/no-other.json
    bench/fidelity/ablate.py fid/fidelity.json --drop wake-path   > /tmp/no-path.json
    schedkit experiment fidelity --real-from /tmp/no-other.json --out fid-no-other

`other-work`: each repeat's `outside` (the other tasks on the job's CPUs), so the models run
without the stand-in for them; `wake-path`: the measured `wake_path_ns`, so the `eevdf`
model keeps its default wake-up path. Only the recorded real side is kept (`real`,
`wake_path_ns`); the rest is recomputed by the replay.
"""
import argparse
import json
import sys

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("file")
ap.add_argument("--drop", action="append", choices=["other-work", "wake-path"], default=[])
a = ap.parse_args()
d = json.load(open(a.file))
out = {"real": d["real"]}
if "other-work" in a.drop:
    out["real"] = [[n, [{k: v for k, v in m.items() if k != "outside"} for m in reps]]
                   for n, reps in d["real"]]
if "wake-path" not in a.drop and d.get("wake_path_ns") is not None:
    out["wake_path_ns"] = d["wake_path_ns"]
json.dump(out, sys.stdout)
