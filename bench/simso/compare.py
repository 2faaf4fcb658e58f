#!/usr/bin/env python3
"""Times SimSo (PyPI `simso`) on schedkit-exported task sets: global EDF, same tasks, same
simulated time. Prints one JSON object: totals of per-set median wall and thread-CPU times and
per-set results.

Usage: compare.py REPEATS set-000.toml set-001.toml ...

Each set file is a schedkit scenario written by `schedkit bench export` (periods in whole
ms, WCETs in whole us, implicit deadlines). SimSo counts time in cycles; with its default
1,000,000 cycles per ms every value is exact. The timed part is `Model(configuration)` +
`run_model()`; building the configuration is not timed (schedkit's timing likewise excludes
parsing). SimSo's global-EDF scheduler prints a line per decision; stdout is redirected to a
null sink while it runs, which still costs SimSo the formatting of those lines.
"""
import contextlib
import io
import json
import os
import statistics
import sys
import time
import tomllib

from simso.configuration import Configuration
from simso.core import Model


def ns(text):
    assert text.endswith("ns"), text
    return int(text[:-2])


def load(path):
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    tasks = []
    for t in doc["task"]:
        (region,) = t["regions"]
        tasks.append((t["name"], ns(t["period"]), ns(t["deadline"]), ns(region["seq"])))
    return doc["cores"], ns(doc["run"]["horizon"]), tasks


def configure(cores, horizon_ns, tasks):
    c = Configuration()
    c.duration = horizon_ns * c.cycles_per_ms // 1_000_000
    for i, (name, period, deadline, wcet) in enumerate(tasks):
        c.add_task(
            name=name,
            identifier=i + 1,
            period=period / 1e6,
            activation_date=0,
            wcet=wcet / 1e6,
            deadline=deadline / 1e6,
        )
    for k in range(cores):
        c.add_processor(name=f"CPU {k}", identifier=k + 1)
    c.scheduler_info.clas = "simso.schedulers.EDF"
    c.check_all()
    return c


class Null(io.TextIOBase):
    def write(self, s):
        return len(s)


def main():
    repeats = int(sys.argv[1])
    rows = []
    for path in sys.argv[2:]:
        cores, horizon, tasks = load(path)
        times, cpu = [], []
        for _ in range(repeats):
            c = configure(cores, horizon, tasks)
            t0, c0 = time.perf_counter(), time.thread_time()
            with contextlib.redirect_stdout(Null()):
                m = Model(c)
                m.run_model()
            times.append(time.perf_counter() - t0)
            cpu.append(time.thread_time() - c0)
        jobs = sum(len(t.jobs) for t in m.results.tasks.values())
        misses = sum(t.exceeded_count for t in m.results.tasks.values())
        rows.append(
            {
                "file": os.path.basename(path),
                "median_s": statistics.median(times),
                "median_cpu_s": statistics.median(cpu),
                "jobs": jobs,
                "deadline_misses": misses,
            }
        )
    total = sum(r["median_s"] for r in rows)
    total_cpu = sum(r["median_cpu_s"] for r in rows)
    print(json.dumps({"repeats": repeats, "total_s": total, "total_cpu_s": total_cpu, "files": rows}))


if __name__ == "__main__":
    main()
