"""Benchmarks of the Python layer, written up in docs/results/python.md.

    python python/bench/bench.py simulate [N]  # 10,000-process RR: Python vs the CLI, N rounds
    python python/bench/bench.py tables [N]    # the tables and DataFrames of that run alone
    RAYON_NUM_THREADS=1 python python/bench/bench.py sweep N   # N task sets on one core
    python python/bench/bench.py sweep N                       # ... on all cores

A sweep on a Dask LocalCluster against the local one: python/bench/dask_sweep.py.

Needs the package built with --release and SCHEDKIT_BIN pointing at a release binary.
"""

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import schedkit


def rr_scenario(path):
    lines = ["cores = 4", "[policy]", 'name = "rr"', 'quantum = "4ms"']
    for i in range(10_000):
        lines += ["[[process]]", f'name = "p{i}"', f'arrival = "{i % 100}ms"', f'burst = "{1 + i % 7}ms"']
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def _load():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def simulate(repeats):
    """Python and the CLI, interleaved (Python, CLI, Python, ...) so that a change in the
    machine's load hits both alike; medians and ranges. The Python side is split into its
    steps: parsing the file, simulating (Rust, the GIL released), handing the report's tables
    to Python, and building the pandas DataFrames."""
    from schedkit import _schedkit

    exe = os.environ["SCHEDKIT_BIN"]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "rr10k.toml")
        rr_scenario(path)
        steps = {k: [] for k in ("cli", "python", "load", "simulate", "tables", "pandas")}
        # CPU time too (user + system): on a shared machine it moves far less than wall time.
        cpu = {"cli": [], "python": []}
        print(f"load average at the start: {_load()}", flush=True)
        for i in range(repeats):
            c0 = time.process_time()
            t0 = time.perf_counter()
            sc = schedkit.Scenario.load(path)
            t1 = time.perf_counter()
            native = _schedkit.simulate(sc, False)
            t2 = time.perf_counter()
            tables = native.tables()
            t3 = time.perf_counter()
            frames = [schedkit._frame(t) for t in tables]
            t4 = time.perf_counter()
            cpu["python"].append(time.process_time() - c0)
            assert len(frames[1]) == 10_000  # threads: one per process
            steps["load"].append(t1 - t0)
            steps["simulate"].append(t2 - t1)
            steps["tables"].append(t3 - t2)
            steps["pandas"].append(t4 - t3)
            steps["python"].append(t4 - t0)

            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            subprocess.run([exe, "sim", path, "--json"], check=True, stdout=subprocess.DEVNULL)
            steps["cli"].append(time.perf_counter() - t)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu["cli"].append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
            print(f"  round {i + 1}: python {steps['python'][-1]:.3f} s (cpu {cpu['python'][-1]:.3f}), "
                  f"cli {steps['cli'][-1]:.3f} s (cpu {cpu['cli'][-1]:.3f}), load {_load()}", flush=True)
    med = {k: statistics.median(v) for k, v in steps.items()}
    print(f"10,000-process RR, {repeats} interleaved rounds, median [min-max] s; "
          f"load average at the end {_load()}")
    for k, v in steps.items():
        print(f"  {k:9} {med[k]:7.3f}  [{min(v):.3f}-{max(v):.3f}]")
    ratios = sorted(p / c for p, c in zip(steps["python"], steps["cli"]))
    print(f"Python load+simulate+DataFrames / CLI sim --json: {med['python'] / med['cli']:.3f} "
          f"({(med['python'] / med['cli'] - 1) * 100:+.1f} %); per round "
          f"[{ratios[0]:.3f}-{ratios[-1]:.3f}], median {statistics.median(ratios):.3f}; the "
          f"Python-only steps (tables + pandas) {med['tables'] + med['pandas']:.3f} s")
    cm = {k: statistics.median(v) for k, v in cpu.items()}
    for k, v in cpu.items():
        print(f"  cpu {k:6} {cm[k]:7.3f}  [{min(v):.3f}-{max(v):.3f}]")
    print(f"CPU time, Python / CLI: {cm['python'] / cm['cli']:.3f} ({(cm['python'] / cm['cli'] - 1) * 100:+.1f} %)")


def tables(repeats):
    """The Python layer alone: one simulation, then the report's tables handed to Python and
    the DataFrames built `repeats` times (what `perf record` profiled); medians and ranges."""
    from schedkit import _schedkit

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "rr10k.toml")
        rr_scenario(path)
        native = _schedkit.simulate(schedkit.Scenario.load(path), False)
    tt, ft = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        tables = native.tables()
        t1 = time.perf_counter()
        [schedkit._frame(t) for t in tables]
        t2 = time.perf_counter()
        tt.append(t1 - t0)
        ft.append(t2 - t1)
    print(f"load {_load()}: native.tables() median {statistics.median(tt):.4f} "
          f"[{min(tt):.4f}-{max(tt):.4f}] s; DataFrames median {statistics.median(ft):.4f} "
          f"[{min(ft):.4f}-{max(ft):.4f}] s")


def sweep_args():
    sc = schedkit.Scenario.load("examples/realtime/sweep.toml")
    return sc, dict(utilisations=[0.9], policies=["gedf"], generator="uunifast:8")


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "simulate":
        simulate(int(sys.argv[2]) if len(sys.argv) > 2 else 9)
    elif what == "tables":
        tables(int(sys.argv[2]) if len(sys.argv) > 2 else 7)
    elif what == "sweep":
        sc, kw = sweep_args()
        n = int(sys.argv[2])
        t = time.perf_counter()
        schedkit.sweep(sc, seeds=range(n), **kw)
        print(f"{n} task sets, RAYON_NUM_THREADS={os.environ.get('RAYON_NUM_THREADS', 'all')}: "
              f"{time.perf_counter() - t:.2f} s")
