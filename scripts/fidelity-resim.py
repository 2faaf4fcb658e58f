#!/usr/bin/env python3
# Re-simulates examples/fidelity scenarios with the current eevdf model (target/debug/schedkit)
# and prints its per-process shares and migrations/s beside the real measurements and the
# earlier model predictions recorded in docs/results/fidelity/fidelity.json. Run from the
# repository root after `cargo build -p schedkit`.
import json, subprocess, statistics as st
d = json.load(open('docs/results/fidelity/fidelity.json'))
real = {name: runs for name, runs in d['real']}
old = {(n, m): v for n, m, v in d['sim']}
print("| scenario | process | real share (mean of 3) | eevdf before | eevdf now | cfs | real migr/s | eevdf migr/s before | now |")
print("|---|---|---|---|---|---|---|---|---|")
for name in ["nice-two-cpus", "affinity-sleeper", "short-lived", "wakeup-under-load", "nice-three-levels", "greedy-1-8"]:
    out = subprocess.run(["target/debug/schedkit", "sim", f"examples/fidelity/{name}.toml", "--json"],
                         capture_output=True, text=True, env={"SCHEDKIT_SIM_KERNEL": "6.18", "PATH": "/usr/bin:/bin"}).stdout
    r = json.loads(out)
    tot = sum(p['cpu_ns'] for p in r['processes'])
    horizon = r['summary'].get('makespan_ns') or 3e9
    mig = r['summary']['migrations'] / 3.0
    runs = real[name]
    for i, pname in enumerate(runs[0]['names']):
        rs = st.mean(x['share_pct'][i] for x in runs)
        now = 100 * r['processes'][i]['cpu_ns'] / tot
        print(f"| {name} | {pname} | {rs:.1f} | {old[(name,'eevdf')]['share_pct'][i]:.1f} | {now:.1f} | {old[(name,'cfs')]['share_pct'][i]:.1f} | "
              + (f"{st.mean(x['migrations_per_s'] for x in runs):.1f} | {old[(name,'eevdf')]['migrations_per_s']:.1f} | {mig:.1f} |" if i == 0 else " | | |"))
