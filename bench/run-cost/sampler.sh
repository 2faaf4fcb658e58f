#!/usr/bin/env bash
# What `schedkit run` costs while a job runs: a command job of N threads (100, 400, 1000;
# sleeping, busy, or half and half) under a policy, and schedkit's own CPU time as a share of
# one core. Two figures per run:
#  - steady: the schedkit process's threads' CPU (sum of /proc/PID/task/*/schedstat), read
#    every 0.25 s; from 1 s after the first reading to 2 s before the horizon, over the wall
#    time between (set-up and tear-down excluded: bench/run-cost/setup.sh measures those);
#  - sampler: the engine's own account (`--linux-json`'s sampler: its CPU inside sampling
#    steps, and the periods it used).
# Usage: bench/run-cost/sampler.sh [POLICY] [SECONDS] [THREADS...]
#   POLICY: default (no controller) or a fair policy with a controller (twrs, global-fair);
#   env SCHEDKIT=path/to/schedkit (default target/release/schedkit), MODES="sleep busy",
#   ARGS="extra schedkit run arguments" (e.g. "--sample 100ms").
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${SCHEDKIT:-target/release/schedkit}
POLICY=${1:-default}
SECS=${2:-10}
shift 2 || true
COUNTS=${*:-100 400 1000}
MODES=${MODES:-sleep busy}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -pthread -o "$work/threads" bench/run-cost/threads.c
echo "machine: $(nproc) CPUs, $(uname -r); uptime: $(uptime)"
echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo '+dirty'); policy $POLICY; ${SECS}s; args: ${ARGS:-none}"
printf '%-6s %-6s %10s %10s %12s %14s %8s\n' threads mode steady_%  sampler_% us/sample period_ms tracked
for n in $COUNTS; do
  for mode in $MODES; do
    cat > "$work/s.toml" <<TOML
cores = $(nproc)
[policy]
name = "$POLICY"
period = "100ms"
[run]
horizon = "${SECS}s"
[[process]]
name = "job"
command = ["$work/threads", "$n", "$mode", "$((SECS + 5))"]
TOML
    # shellcheck disable=SC2086
    $B run "$work/s.toml" --no-perf --linux-json "$work/l.json" ${ARGS:-} > "$work/out" 2> "$work/err" &
    pid=$!
    # (wall ns, CPU ns of schedkit's threads) every 0.25 s while it lives.
    # The poller runs at SCHED_FIFO 50: busy job threads and a loaded machine would
    # otherwise starve it of readings.
    : > "$work/poll"
    chrt -f 50 bash -c 'while kill -0 '$pid' 2>/dev/null; do
      c=$(cat /proc/'$pid'/task/*/schedstat 2>/dev/null | awk "{s += \$1} END {printf \"%.0f\", s}")
      [ -n "$c" ] && [ "$c" != 0 ] && echo "$(date +%s%N) $c"
      sleep 0.25
    done' >> "$work/poll"
    wait $pid || { echo "run failed:"; cat "$work/err"; exit 1; }
    python3 - "$work/l.json" "$n" "$mode" "$work/poll" "$SECS" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
n, mode = sys.argv[2], sys.argv[3]
poll = [tuple(map(int, l.split())) for l in open(sys.argv[4]) if len(l.split()) == 2]
# Steady state: from 1 s after the first reading to 2 s before the horizon (the tear-down,
# which can take a while on a loaded machine, stays out).
secs = int(sys.argv[5])
t0, t1 = poll[0][0] + 1e9, poll[0][0] + (secs - 2) * 1e9
mid = [p for p in poll if t0 <= p[0] <= t1]
a, b = mid[0], mid[-1]
steady = 100.0 * (b[1] - a[1]) / max(b[0] - a[0], 1)
s = j.get("sampler") or {}
samp = 100.0 * s.get("cpu_ns", 0) / max(s.get("wall_ns", 1), 1)
per = s.get("cpu_ns", 0) / 1e3 / max(s.get("samples", 1), 1)
period = s.get("wall_ns", 0) / 1e6 / max(s.get("samples", 1), 1)
# Threads the run tracked: a job that never reached N threads measured less than it says.
tracked = len(j.get("threads") or [])
print(f"{n:<6} {mode:<6} {steady:10.2f} {samp:10.2f} {per:12.1f} {period:14.1f} {tracked:8d}")
PY
  done
done
