#!/usr/bin/env python3
"""Wake-up waits of a job's threads in a kernel scheduler trace, with what ran instead.

Record a real run with the scheduler's tracepoints and the tick timer, then read it:

    perf record -e sched:sched_switch,sched:sched_waking,sched:sched_migrate_task,\\
        timer:hrtimer_expire_entry -a -o run.data -- \\
        schedkit run examples/fidelity/affinity-sleeper.toml
    perf script -i run.data -F comm,pid,tid,cpu,time,event,trace > run.txt
    bench/fidelity/trace-waits.py run.txt roamer [--show 6]

For the threads whose name starts with the given prefix: the number of wake-ups, the
p50/p90/p99/max of the time from `sched_waking` to the switch to the thread, how many waited
longer than 0.2 and 0.5 ms, the phase of each wake-up after its CPU's last scheduler tick
(`tick_nohz_handler`), and the threads' migrations; then the longest waits, each with the
switches on its CPU from 6 ms before the wake-up to the end of the wait. Another prefix
(`--runs NAME`) prints every thread's run count and median run length instead (for the
real engine's own threads: `schedkit`).
"""
import argparse
import bisect
import collections
import re

LINE = re.compile(r"\s*(\S+)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)")
SWITCH = re.compile(
    r"prev_comm=(\S+) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(\S+) next_pid=(\d+)"
)


def events(path):
    for line in open(path):
        m = LINE.match(line)
        if m:
            comm, _pid, _tid, cpu, t, ev, rest = m.groups()
            yield float(t) * 1000.0, int(cpu), ev, rest


def pct(xs, p):
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace", help="perf script output (see the module docs)")
    ap.add_argument("prefix", help="thread name prefix, e.g. roamer or sleeper")
    ap.add_argument("--show", type=int, default=6, help="longest waits to show")
    ap.add_argument("--runs", action="store_true", help="run lengths per thread instead")
    a = ap.parse_args()
    evs = list(events(a.trace))
    if a.runs:
        start, runs = {}, collections.defaultdict(list)
        for t, c, ev, rest in evs:
            if ev != "sched:sched_switch":
                continue
            nxt = SWITCH.search(rest).group(4)
            if c in start:
                s, name = start[c]
                runs[name].append(t - s)
            start[c] = (t, nxt)
        for name, v in sorted(runs.items(), key=lambda x: -sum(x[1])):
            if name.startswith(a.prefix):
                v.sort()
                print(f"{name:20} runs {len(v):5}  total {sum(v):9.2f} ms  mean {sum(v) / len(v) * 1000:7.1f} us"
                      f"  median {pct(v, 0.5) * 1000:7.1f} us  p90 {pct(v, 0.9) * 1000:7.1f} us")
        return
    ticks = collections.defaultdict(list)
    timeline = collections.defaultdict(list)
    woke, waits, migrations = {}, [], 0
    for t, c, ev, rest in evs:
        if ev == "timer:hrtimer_expire_entry" and "tick_nohz" in rest:
            ticks[c].append(t)
        elif ev == "sched:sched_waking":
            m = re.search(r"comm=(\S+) pid=(\d+)", rest)
            if m.group(1).startswith(a.prefix):
                woke[int(m.group(2))] = t
        elif ev == "sched:sched_migrate_task":
            if re.search(r"comm=(\S+)", rest).group(1).startswith(a.prefix):
                migrations += 1
        elif ev == "sched:sched_switch":
            pc, _pp, ps, nc, np_ = SWITCH.search(rest).groups()
            timeline[c].append((t, pc, ps, nc))
            if int(np_) in woke:
                w = woke.pop(int(np_))
                waits.append((t - w, w, c))
    lat = sorted(w for w, _, _ in waits)
    if not lat:
        print(f"no wake-ups of threads named {a.prefix}*")
        return

    def phase(t, c):
        i = bisect.bisect_right(ticks[c], t) - 1
        return t - ticks[c][i] if i >= 0 else float("nan")

    print(f"{a.prefix}*: {len(lat)} wake-ups; wait p50 {pct(lat, .5) * 1000:.0f} us, p90 {pct(lat, .9) * 1000:.0f} us,"
          f" p99 {pct(lat, .99) * 1000:.0f} us, max {lat[-1]:.3f} ms; over 0.2 ms {sum(x > .2 for x in lat)},"
          f" over 0.5 ms {sum(x > .5 for x in lat)}; migrations {migrations}")
    bins = collections.Counter(int(phase(w, c) * 2) / 2 for _, w, c in waits if phase(w, c) == phase(w, c))
    print("wake-ups by phase after the CPU's last tick (ms):", dict(sorted(bins.items())))
    for wait, w, c in sorted(waits, reverse=True)[: a.show]:
        print(f"wait {wait:.3f} ms, woken at phase {phase(w, c):.3f} ms on CPU {c}:")
        for t, pc, ps, nc in timeline[c]:
            if w - 6 <= t <= w + wait + 0.01:
                print(f"    {t - w:+8.3f} ms  {pc}({ps}) -> {nc}")


if __name__ == "__main__":
    main()
