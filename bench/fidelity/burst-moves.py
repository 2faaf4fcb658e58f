#!/usr/bin/env python3
"""Per burst of a short-lived run: when each thread was created, moved and ended, from
`perf script` output of a trace of sched_switch, sched_wakeup_new and sched_migrate_task.

    perf record -e sched:sched_switch,sched:sched_wakeup_new,sched:sched_migrate_task -a \\
        -o sl.data -- schedkit run examples/fidelity/short-lived.toml
    perf script -i sl.data > sl.txt
    python3 bench/fidelity/burst-moves.py sl.txt

Times are ms after the burst's first thread was created; `mig` gives (from, to) CPUs. The hog
is listed with the burst during which it moved."""
import re
import sys

comm, events = {}, []
for line in open(sys.argv[1]):
    m = re.search(r"\[(\d+)\] +(\d+\.\d+): +sched:(\w+): (.*)", line)
    if not m:
        continue
    cpu, t, name, rest = int(m.group(1)), float(m.group(2)), m.group(3), m.group(4)
    if name == "sched_switch":
        s = re.search(r"prev_comm=(.*) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> "
                      r"next_comm=(.*) next_pid=(\d+)", rest)
        comm[s.group(2)], comm[s.group(5)] = s.group(1), s.group(4)
        if s.group(3).rstrip("+") in ("X", "Z"):
            events.append((t, "exit", s.group(2), cpu))
    elif name == "sched_wakeup_new":
        s = re.search(r"pid=(\d+) prio=\d+ target_cpu=(\d+)", rest)
        events.append((t, "new", s.group(1), int(s.group(2))))
    elif name == "sched_migrate_task":
        s = re.search(r"pid=(\d+) prio=\d+ orig_cpu=(\d+) dest_cpu=(\d+)", rest)
        events.append((t, "mig", s.group(1), (int(s.group(2)), int(s.group(3)))))
t0 = None
for t, kind, pid, x in events:
    c = comm.get(pid, "?")
    if not (c.startswith("burst") or c.startswith("hog")):
        continue
    if kind == "new" and c.endswith(".0"):
        t0 = t
        print("---", c.split(".")[0])
    if t0 is not None:
        print(f"{(t - t0) * 1000:7.1f} ms  {kind:4}  {c:10}  {x}")
