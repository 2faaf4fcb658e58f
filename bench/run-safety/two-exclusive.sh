#!/usr/bin/env bash
# Two `schedkit run --exclusive` started together, with a SCHED_OTHER probe pinned to CPU 0
# (the system CPU) counting loop iterations in 100 ms windows throughout. Prints the probe's
# solo rate, its rate beside the runs (median and worst window), and both runs' exit statuses.
# Usage: bench/run-safety/two-exclusive.sh [ROUNDS]   (root; needs two CPUs; env SCHEDKIT=path/to/schedkit, default the release build)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${SCHEDKIT:-target/release/schedkit}
ROUNDS=${1:-5}
probe() { # seconds -> one rate per 100 ms window, iterations/s
  taskset -c 0 python3 -c '
import time, sys
end = time.monotonic() + float(sys.argv[1]); out = []
while time.monotonic() < end:
    n = 0; t0 = time.monotonic()
    while time.monotonic() - t0 < 0.1:
        n += 1
    out.append(n / (time.monotonic() - t0))
print(" ".join("%.0f" % r for r in out))' "$1"
}
med() { tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
low() { tr ' ' '\n' | sort -n | head -1; }
echo "machine: $(nproc) CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD)"
printf '%-6s %12s %12s %12s %8s %8s %8s\n' round solo_med/s beside_med/s beside_min/s ratio first second
for r in $(seq "$ROUNDS"); do
  solo=$(probe 2 | med)
  st=$(mktemp -d)
  probe 3.5 > "$st/probe" &
  pp=$!
  sleep 0.2
  SCHEDKIT_STATE_DIR=$st/a $B run --exclusive --no-perf --horizon 3s -- sh -c 'while :; do :; done' >/dev/null 2>&1 &
  a=$!
  SCHEDKIT_STATE_DIR=$st/b $B run --exclusive --no-perf --horizon 3s -- sh -c 'while :; do :; done' >/dev/null 2>"$st/b.err" &
  b=$!
  set +e; wait $a; ea=$?; wait $b; eb=$?; set -e
  wait $pp
  bm=$(med < "$st/probe"); bl=$(low < "$st/probe")
  printf '%-6s %12s %12s %12s %8.3f %8s %8s\n' "$r" "$solo" "$bm" "$bl" "$(echo "$bm / $solo" | bc -l)" "$ea" "$eb"
  rm -rf "$st"
done
