"""A notebook-style tour of schedkit from Python, ending in a matplotlib figure.

    python python/examples/threads.py threads.png

Runs the textbook workload (seed 004, tables 2.1-2.4) under four policies, puts the
per-thread waiting times side by side, and draws the round-robin schedule from the trace.
"""

import sys

import matplotlib

matplotlib.use("Agg")  # files, not windows: this runs in CI too
import matplotlib.pyplot as plt
import pandas as pd

import schedkit

out = sys.argv[1] if len(sys.argv) > 1 else "threads.png"

# %% One scenario, four policies: the same file, only `policy.name` changes.
sc = schedkit.Scenario.load("examples/textbook/rr.toml")
waits = {}
for policy in ["fcfs", "sjf", "srtf", "rr"]:
    r = schedkit.simulate(sc.with_policy(policy))
    # `threads` has integer nanosecond columns; one row per thread.
    waits[policy] = r.threads.set_index("name")["waiting_ns"] / 1e6
waits = pd.DataFrame(waits)
print(waits)

# %% The round-robin run's trace: one row per interval on a core.
rr = schedkit.simulate(sc)
iv = rr.intervals()
print(iv.head())

# %% The figure: waiting per thread and policy, and the RR schedule.
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
waits.plot.bar(ax=ax1, rot=0)
ax1.set_ylabel("waiting time (ms)")
ax1.set_xlabel("thread")
ax1.set_title("Waiting time per thread (seed 004, tables 2.1-2.4)")
names = sorted(iv["process"].unique())
colours = dict(zip(names, plt.cm.tab10.colors))
for _, row in iv.iterrows():
    ax2.barh(names.index(row["process"]), (row["end_ns"] - row["start_ns"]) / 1e6,
             left=row["start_ns"] / 1e6, color=colours[row["process"]], edgecolor="black")
ax2.set_yticks(range(len(names)), names)
ax2.set_xlabel("time (ms)")
ax2.set_title("Round robin, quantum 4 ms: who ran when")
fig.tight_layout()
fig.savefig(out, dpi=100)
print(f"wrote {out}")
