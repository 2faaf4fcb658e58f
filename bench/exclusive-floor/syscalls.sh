#!/usr/bin/env bash
# The kernel's floor under exclusive mode's set-up and tear-down: the per-thread cost of the
# system calls a sweep of the machine's threads needs (bench/exclusive-floor/syscalls.c), at
# SCHED_FIFO 20 so that the loaded machine's SCHED_OTHER work does not stretch the timings
# (the engine's control thread runs at SCHED_FIFO 10). Root (for chrt).
#   sudo bench/exclusive-floor/syscalls.sh [REPEATS] [N...]
set -euo pipefail
cd "$(dirname "$0")"
repeats=${1:-9}
shift || true
counts=${*:-200 1000 5000}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
gcc -O2 -Wall -pthread -o "$out/syscalls" syscalls.c
ulimit -n $((2 * ${counts##* } + 64))
echo "machine: $(nproc) CPUs, $(uname -r); uptime: $(uptime)"
for n in $counts; do chrt -f 20 "$out/syscalls" "$n" "$repeats"; done
