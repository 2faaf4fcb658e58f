#!/bin/sh
# greedy-1-8 beside a real-time load on CPU 0, for real and in the eevdf model: how many times
# the job's threads migrate in 3 s as the real-time thread takes 0 to 20 % of CPU 0
# (docs/results/fidelity.md, "capacity"). Run as root from the repository root with nothing
# else running:  sh bench/fidelity/rt-capacity.sh [REPEATS]  (default 3)
# Each real run is started as the fidelity runs are (a session autogroup at nice -20). No CPU
# is ever idle here, so the kernel's newidle state plays no part.
set -eu
reps=${1:-3}
bin=target/release/schedkit
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-10s %-8s %s\n' "rt load" model "migrations in 3 s (each run)"
for us in 0 50 100 200 400 800 2000; do
  rt=""
  if [ "$us" -gt 0 ]; then
    rt="[[process]]
name = \"rtload\"
class = \"fifo\"
cpus = [0]
pattern = [{ run = \"${us}us\" }, { sleep = \"$((10000 - us))us\" }]"
  fi
  body="[run]
horizon = \"3s\"
[[process]]
name = \"one\"
[[process]]
name = \"eight\"
threads = 8
$rt"
  printf 'cores = 2\n[policy]\nname = "default"\n%s\n' "$body" > "$tmp/real.toml"
  # The model as experiment fidelity sets it up: the engine's sampler as a real-time
  # spawner on one core, newidle ratio 0.
  printf 'cores = 2\n[policy]\nname = "eevdf"\nspawner = "schedkit-sampler"\nnewidle_ratio = 0\n%s\n[[process]]\nname = "schedkit-sampler"\nclass = "fifo"\npattern = [{ run = "140us" }, { sleep = "9860us" }]\n' "$body" > "$tmp/sim.toml"
  pct=$(awk "BEGIN { printf \"%.1f %%\", $us / 100 }")
  real=""
  i=0
  while [ $i -lt "$reps" ]; do
    setsid -w sh -c "echo -20 > /proc/self/autogroup; exec $bin run $tmp/real.toml --json" > "$tmp/r.json" 2>/dev/null
    real="$real $(python3 -c "import json; d=json.load(open('$tmp/r.json')); print(sum(t['migrations'] for t in d['threads'] if t['process'] in ('one', 'eight')))")"
    i=$((i + 1))
  done
  sim=$($bin sim "$tmp/sim.toml" --json | python3 -c "import json, sys; d=json.load(sys.stdin); print(sum(t['migrations'] for t in d['threads'] if t['process'] in ('one', 'eight')))")
  printf '%-10s %-8s%s\n' "$pct" kernel "$real"
  printf '%-10s %-8s %s\n' "" eevdf "$sim"
done
