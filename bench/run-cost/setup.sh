#!/usr/bin/env bash
# What exclusive mode's set-up and tear-down cost against the machine's thread count:
# `schedkit run --exclusive --rt-throttle off --no-perf -- true` (a job that does nothing, so
# the run is all set-up and tear-down: lease, journal, IRQs, RT throttling, a sweep of every
# thread on the machine, undo) with a helper process of N idle threads beside it (N = 0,
# 100, 1000, 5000 by default). Prints the machine's thread count, the threads moved, and the
# median / min / max wall time of REPEATS runs; then, once per N, the syscall count of one run
# (strace -f -c) and the fsyncs among them.
# Usage: bench/run-cost/setup.sh [REPEATS] [N...]   (root; env SCHEDKIT=path/to/schedkit)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${SCHEDKIT:-target/release/schedkit}
REPEATS=${1:-11}
shift || true
COUNTS=${*:-0 100 1000 5000}
work=$(mktemp -d)
helper=
cleanup() { if [ -n "$helper" ]; then kill "$helper" 2>/dev/null || true; fi; rm -rf "$work"; }
trap cleanup EXIT
gcc -O2 -pthread -o "$work/threads" bench/run-cost/threads.c
machine_threads() { ls -d /proc/[0-9]*/task/[0-9]* 2>/dev/null | wc -l; }
echo "machine: $(nproc) CPUs, $(uname -r); uptime: $(uptime)"
echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo '+dirty'); binary $B"
printf '%-7s %-15s %-6s %9s %9s %9s %9s %7s\n' helper machine_threads moved median_ms min_ms max_ms syscalls fsyncs
for n in $COUNTS; do
  helper=
  if [ "$n" -gt 0 ]; then
    "$work/threads" "$n" sleep 3600 &
    helper=$!
    # Wait until every thread exists.
    while [ "$(ls /proc/$helper/task 2>/dev/null | wc -l)" -lt $((n + 1)) ]; do sleep 0.1; done
  fi
  total=$(machine_threads)
  : > "$work/times"
  moved=
  for _ in $(seq "$REPEATS"); do
    t0=$(date +%s%N)
    $B run --exclusive --rt-throttle off --no-perf --wait --linux-json "$work/l.json" -- true > /dev/null 2> "$work/err" \
      || { echo "run failed:"; cat "$work/err"; exit 1; }
    t1=$(date +%s%N)
    echo $(( (t1 - t0) / 1000 )) >> "$work/times"
    moved=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["exclusive"]["moved_threads"])' "$work/l.json")
  done
  read -r med lo hi < <(sort -n "$work/times" | awk '{a[NR]=$1} END {printf "%.1f %.1f %.1f\n", a[int((NR+1)/2)]/1000, a[1]/1000, a[NR]/1000}')
  sys=- fs=-
  if command -v strace > /dev/null; then
    strace -f -c -o "$work/strace" $B run --exclusive --rt-throttle off --no-perf --wait -- true > /dev/null 2>&1 || true
    sys=$(awk '$NF == "total" {print $4}' "$work/strace")
    fs=$(awk '$NF == "fsync" || $NF == "fdatasync" {s += $4} END {print s + 0}' "$work/strace")
  fi
  printf '%-7s %-15s %-6s %9s %9s %9s %9s %7s\n' "$n" "$total" "$moved" "$med" "$lo" "$hi" "$sys" "$fs"
  if [ -n "$helper" ]; then kill "$helper"; wait "$helper" 2>/dev/null || true; fi
  helper=
done
