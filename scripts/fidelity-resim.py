#!/usr/bin/env python3
# Re-simulates every examples/fidelity scenario with the current eevdf model and compares it
# with the real runs and the model predictions recorded in docs/results/fidelity/fidelity.json
# (or the JSON named as the first argument): per scenario, the largest share error (points of
# the job's CPU time) and migrations/s. Run from the repository root after
# `cargo build -p schedkit`; SCHEDKIT names the binary (default target/debug/schedkit).
import json, os, subprocess, sys, statistics as st
src = sys.argv[1] if len(sys.argv) > 1 else 'docs/results/fidelity/fidelity.json'
binary = os.environ.get('SCHEDKIT', 'target/debug/schedkit')
d = json.load(open(src))
real = {name: runs for name, runs in d['real']}
old = {(n, m): v for n, m, v in d['sim']}
print("| scenario | share err eevdf before | now | cfs | real migr/s (mean) | eevdf migr/s before | now | cfs |")
print("|---|---|---|---|---|---|---|---|")
for name in sorted(real):
    out = subprocess.run([binary, "sim", f"examples/fidelity/{name}.toml", "--json"],
                         capture_output=True, text=True,
                         env={"SCHEDKIT_SIM_KERNEL": "6.18", "PATH": "/usr/bin:/bin"}).stdout
    r = json.loads(out)
    tot = sum(p['cpu_ns'] for p in r['processes'])
    secs = 3.0
    runs = real[name]
    rs = [st.mean(x['share_pct'][i] for x in runs) for i in range(len(runs[0]['names']))]
    now = [100 * p['cpu_ns'] / tot for p in r['processes']]
    err = lambda sh: max(abs(a - b) for a, b in zip(sh, rs))
    e_old, c_old = old[(name, 'eevdf')], old[(name, 'cfs')]
    mig = r['summary']['migrations'] / secs
    print(f"| {name} | {err(e_old['share_pct']):.2f} | {err(now):.2f} | {err(c_old['share_pct']):.2f} | "
          f"{st.mean(x['migrations_per_s'] for x in runs):.1f} | {e_old['migrations_per_s']:.1f} | {mig:.1f} | {c_old['migrations_per_s']:.1f} |")
