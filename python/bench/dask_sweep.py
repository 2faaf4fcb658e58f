"""A large sweep on a two-worker Dask LocalCluster against the same sweep on this machine alone:
every row must be equal, and the time the Dask path adds is measured (docs/results/python.md).

    python python/bench/dask_sweep.py                   # 100,000 task sets (the issue's size)
    python python/bench/dask_sweep.py --seeds 2000      # a quick run: 8,000 task sets

A task set is one (seed, utilisation) pair; each set runs under every policy. The default
sweep is sized for a few minutes on a 2-core machine: UUniFast sets of 4 sequential tasks
(periods 10-100 ms) at 4 utilisations of 2 cores, simulated for 200 ms under gedf and pedf.
Exits 1 when a row differs.

The local sweep runs the Rust sweep in this process on every core (rayon). The cluster runs
two worker processes with one Dask thread each; each worker's Rust sweep uses
`--worker-threads` rayon threads (default: the machine's cores divided among the workers, so
the cluster does not oversubscribe the machine more than the local run does). The cluster is
started before the clock starts: the time measured is scheduling the batches, pickling the
scenario and the rows, and summing them, on top of the simulations.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import schedkit

COLUMNS = ["utilisation", "policy", "sets", "sets_with_misses", "rejected", "jobs",
           "deadline_misses", "migrations", "context_switches", "unschedulable"]


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def differing_rows(local, spread) -> list:
    """Every row compared column by column; the differences as readable lines."""
    out = []
    if list(local.columns) != list(spread.columns) or len(local) != len(spread):
        return [f"shapes differ: {local.shape} {list(local.columns)} vs "
                f"{spread.shape} {list(spread.columns)}"]
    for i in range(len(local)):
        a, b = local.iloc[i], spread.iloc[i]
        for c in local.columns:
            # Exact equality, floats included: the counts are integers summed in any order,
            # and `unschedulable` is computed from them the same way on both sides.
            if a[c] != b[c]:
                out.append(f"row {i} ({a['utilisation']}, {a['policy']}): {c} {a[c]!r} != {b[c]!r}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default="examples/realtime/sweep.toml")
    ap.add_argument("--seeds", type=int, default=25_000, help="seeds 1..N (default 25000)")
    ap.add_argument("--utilisations", default="0.7,0.8,0.9,1.0")
    ap.add_argument("--policies", default="gedf,pedf")
    ap.add_argument("--generator", default="uunifast:4")
    ap.add_argument("--horizon", default="200ms")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-threads", type=int, default=0,
                    help="rayon threads per worker (0: cores / workers, at least 1)")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="seeds per Dask batch (default: four batches per worker)")
    a = ap.parse_args()

    from dask.distributed import Client, LocalCluster

    cores = len(os.sched_getaffinity(0))
    worker_threads = a.worker_threads or max(1, cores // a.workers)
    sc = schedkit.Scenario.load(a.scenario).with_horizon(a.horizon)
    utils = [float(u) for u in a.utilisations.split(",")]
    policies = a.policies.split(",")
    seeds = range(1, a.seeds + 1)
    kw = dict(utilisations=utils, policies=policies, generator=a.generator)
    print(f"commit {commit()}, {cores} CPUs allowed, load average at start {load()}")
    print(f"sweep: {a.scenario} horizon {a.horizon}, {a.generator}, seeds 1..{a.seeds} x "
          f"{len(utils)} utilisations = {len(seeds) * len(utils):,} task sets, "
          f"each under {', '.join(policies)}")

    t = time.perf_counter()
    c = time.process_time()
    local = schedkit.sweep(sc, seeds=seeds, **kw)
    t_local = time.perf_counter() - t
    cpu_local = time.process_time() - c
    print(f"local (rayon, {cores} threads): {t_local:.2f} s wall, {cpu_local:.2f} s CPU; "
          f"load average now {load()}")

    t = time.perf_counter()
    with LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None,
                      env={"RAYON_NUM_THREADS": str(worker_threads)}) as cluster, \
            Client(cluster) as client:
        # The workers import schedkit before the clock starts, as they would on a running
        # cluster.
        client.run(lambda: __import__("schedkit") and None)
        t_start = time.perf_counter() - t
        t = time.perf_counter()
        spread = schedkit.sweep(sc, seeds=seeds, client=client, batch_size=a.batch_size, **kw)
        t_dask = time.perf_counter() - t
        batches = a.batch_size or -(-len(seeds) // (4 * a.workers))
    print(f"Dask LocalCluster ({a.workers} workers x 1 thread, {worker_threads} rayon "
          f"thread(s) each, batches of {batches} seeds; cluster start {t_start:.2f} s not "
          f"counted): {t_dask:.2f} s wall; load average now {load()}")
    print(f"Dask / local: {t_dask / t_local:.3f} ({(t_dask / t_local - 1) * 100:+.1f} %, "
          f"{t_dask - t_local:+.2f} s)")

    bad = differing_rows(local[COLUMNS], spread[COLUMNS])
    print(local[COLUMNS].to_string(index=False))
    if bad:
        print(f"NOT EQUAL: {len(bad)} differences", *bad[:20], sep="\n")
        return 1
    print(f"equal: all {len(local)} rows, every column "
          f"({int(local['sets'].sum()) // len(policies):,} task sets per policy)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
