"""Benchmarks of the Python layer, written up in docs/results/python.md.

    python python/bench/bench.py simulate      # 10,000-process RR: Python vs the CLI
    RAYON_NUM_THREADS=1 python python/bench/bench.py sweep N   # N task sets on one core
    python python/bench/bench.py sweep N                       # ... on all cores
    python python/bench/bench.py dask N        # N task sets: local vs a 2-worker LocalCluster

Needs the package built with --release and SCHEDKIT_BIN pointing at a release binary.
"""

import os
import subprocess
import sys
import tempfile
import time

import schedkit


def best_of(n, f):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def rr_scenario(path):
    lines = ["cores = 4", "[policy]", 'name = "rr"', 'quantum = "4ms"']
    for i in range(10_000):
        lines += ["[[process]]", f'name = "p{i}"', f'arrival = "{i % 100}ms"', f'burst = "{1 + i % 7}ms"']
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def simulate():
    exe = os.environ["SCHEDKIT_BIN"]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "rr10k.toml")
        rr_scenario(path)
        cli = best_of(5, lambda: subprocess.run([exe, "sim", path, "--json"], check=True,
                                                stdout=subprocess.DEVNULL))
        py = best_of(5, lambda: schedkit.simulate(schedkit.Scenario.load(path)).threads)
    print(f"10,000-process RR, best of 5: CLI sim --json {cli:.3f} s, "
          f"Python load+simulate+DataFrames {py:.3f} s ({(py / cli - 1) * 100:+.1f} %)")


def sweep_args():
    sc = schedkit.Scenario.load("examples/realtime/sweep.toml")
    return sc, dict(utilisations=[0.9], policies=["gedf"], generator="uunifast:8")


def dask(n):
    from dask.distributed import Client, LocalCluster

    sc, kw = sweep_args()
    t = time.perf_counter()
    local = schedkit.sweep(sc, seeds=range(n), **kw)
    t_local = time.perf_counter() - t
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.run(lambda: None)  # workers up before the clock starts
        t = time.perf_counter()
        spread = schedkit.sweep(sc, seeds=range(n), client=client, **kw)
        t_dask = time.perf_counter() - t
    print(f"{n} task sets: local {t_local:.2f} s, 2-worker LocalCluster {t_dask:.2f} s, "
          f"equal: {spread.equals(local)}")
    print(local.to_string())


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "simulate":
        simulate()
    elif what == "sweep":
        sc, kw = sweep_args()
        n = int(sys.argv[2])
        t = time.perf_counter()
        schedkit.sweep(sc, seeds=range(n), **kw)
        print(f"{n} task sets, RAYON_NUM_THREADS={os.environ.get('RAYON_NUM_THREADS', 'all')}: "
              f"{time.perf_counter() - t:.2f} s")
    elif what == "dask":
        dask(int(sys.argv[2]))
