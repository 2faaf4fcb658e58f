#!/usr/bin/env python3
"""Traces a process-fair run of hackbench (400 tasks) beside a one-thread hog: every ~0.5 s,
both processes' cgroup v1 cpu.shares (what the share trim wrote), the CPU time their cpuacct
groups counted in the interval, and for the hog the sum of its tasks' /proc/PID/schedstat
(a check on the cpuacct figure). Then the report's sampled job shares and the fair report's
trim fields. Root; cgroup v1 with cpuacct mounted apart from cpu (the share trim's own
cpuacct groups). docs/results/run-realtools.md (b) shows a trace.

Usage: scripts/fairtrace.py SCHEDKIT [SECONDS] [notrim]
"""
import json
import subprocess
import sys
import tempfile
import time

B = sys.argv[1]
secs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
trim = "" if len(sys.argv) > 3 and sys.argv[3] == "notrim" else None
work = tempfile.mkdtemp()
open(f"{work}/fair.toml", "w").write(f"""cores = 2
[policy]
name = "process-fair"
{'trim = false' if trim is not None else ''}
[run]
horizon = "{secs}s"
[[process]]
name = "hackbench"
command = ["sh", "-c", "exec hackbench -g 10 -l 1000000000 > /dev/null"]
[[process]]
name = "hog"
command = ["sh", "-c", "exec stress-ng --cpu 1 --timeout {secs + 10}s > /dev/null 2>&1"]
""")
p = subprocess.Popen(
    [B, "run", f"{work}/fair.toml", "--no-perf", "--json", "--linux-json", f"{work}/l.json"],
    stdout=open(f"{work}/j.json", "w"),
    stderr=open(f"{work}/err", "w"),
)


def rd(f):
    try:
        return open(f).read().strip()
    except OSError:
        return None


prev = {}
t0 = time.time()
print(" t_s  hackbench_shares hog_shares | cpuacct_ms hackbench hog | hog_schedstat_ms | hackbench_tasks")
while p.poll() is None:
    time.sleep(0.5)
    cpu = f"/sys/fs/cgroup/cpu/schedkit-{p.pid}"
    acct = f"/sys/fs/cgroup/cpuacct/schedkit-{p.pid}"
    shares = [rd(f"{cpu}/0-hackbench/cpu.shares"), rd(f"{cpu}/1-hog/cpu.shares")]
    if None in shares:
        continue
    d = []
    for e in (0, 1):
        u = int(rd(f"{acct}/{e}/cpuacct.usage") or 0)
        d.append((u - prev.get(e, 0)) / 1e6)
        prev[e] = u
    hog = 0
    for t in (rd(f"{acct}/1/tasks") or "").split():
        v = rd(f"/proc/{t}/schedstat")
        hog += int(v.split()[0]) if v else 0
    dh = (hog - prev.get("h", 0)) / 1e6
    prev["h"] = hog
    n = len((rd(f"{acct}/0/tasks") or "").split())
    print(f"{time.time() - t0:4.1f} {shares[0]:>17} {shares[1]:>10} | {d[0]:20.0f} {d[1]:4.0f} | {dh:16.0f} | {n}", flush=True)
j = json.load(open(f"{work}/j.json"))
for x in j["processes"]:
    print(f"{x['name']}: sampled job_share {x['job_share'] * 100:.1f} %, sampled cpu {x['cpu_ns'] // 1000000} ms")
f = json.load(open(f"{work}/l.json"))["fair"]
print({k: f.get(k) for k in ("ticks", "trim_factors", "trim_writes", "trim_source", "entity_cpu_ns")})
