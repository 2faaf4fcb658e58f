#!/usr/bin/env bash
# Does the run end at its horizon when the job saturates the machine? A command job of
# 2 x CPUs busy threads under each POLICY, horizon SECONDS; per run: where the engine ended
# the job (the latest end of its processes, from --linux-json) against the horizon, and the
# wall time of the whole command (set-up and tear-down included). The engine's control
# thread runs at SCHED_FIFO 1 (above the job's normal threads), so the sampler, the
# controllers and the horizon hold however many SCHED_OTHER threads are busy.
# Usage: bench/run-cost/horizon.sh [REPEATS] [SECONDS] [POLICY...]   (root for the RT class
#        and the fair policies; env SCHEDKIT=path/to/schedkit)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${SCHEDKIT:-target/release/schedkit}
REPEATS=${1:-3}
SECS=${2:-5}
shift 2 || true
POLICIES=${*:-default process-fair twrs}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -pthread -o "$work/threads" bench/run-cost/threads.c
n=$((2 * $(nproc)))
echo "machine: $(nproc) CPUs, $(uname -r); uptime: $(uptime)"
echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo '+dirty'); $n busy threads; horizon ${SECS}s"
printf '%-14s %-4s %12s %12s %12s\n' policy run job_end_ms overrun_% wall_ms
for pol in $POLICIES; do
  for r in $(seq "$REPEATS"); do
    cat > "$work/s.toml" <<TOML
cores = $(nproc)
[policy]
name = "$pol"
period = "100ms"
[run]
horizon = "${SECS}s"
[[process]]
name = "job"
command = ["$work/threads", "$n", "busy", "$((SECS * 3))"]
TOML
    t0=$(date +%s%N)
    $B run "$work/s.toml" --no-perf --wait --linux-json "$work/l.json" > /dev/null 2> "$work/err" \
      || { echo "run failed:"; cat "$work/err"; exit 1; }
    t1=$(date +%s%N)
    python3 - "$work/l.json" "$pol" "$r" "$SECS" "$(( (t1 - t0) / 1000000 ))" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
end = max(p["end_ns"] for p in j["processes"]) / 1e6
h = float(sys.argv[4]) * 1000
print(f"{sys.argv[2]:<14} {sys.argv[3]:<4} {end:12.1f} {100 * (end - h) / h:12.2f} {sys.argv[5]:>12}")
PY
  done
done
