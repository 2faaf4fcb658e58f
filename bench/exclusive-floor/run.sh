#!/usr/bin/env bash
# The interference floor under exclusive mode's best case, without schedkit: the strided walk
# of `schedkit experiment exclusive` (300 M steps of 4160 B over 5 MB) pinned to CPU 1 at
# SCHED_FIFO 90, with CPU 0 idle, running a PAUSE loop, running the experiment's load-1 hog
# (xorshift arithmetic over 64 KiB), or running two of them (what exclusive mode leaves on the
# system CPU under load 1: one hog per CPU, both moved there). Whatever the hogs cost the walk
# here, no scheduler policy can take away: the two vCPUs share hardware. Root; prints min /
# median / max of REPEATS.
#   sudo bench/exclusive-floor/run.sh [REPEATS]
set -euo pipefail
cd "$(dirname "$0")"
repeats=${1:-21}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for f in walk hog_alu hog_pause; do gcc -O2 -o "$out/$f" "$f.c"; done
walk() { taskset -c 1 chrt -f 90 "$out/walk" | cut -d' ' -f1; }
for _ in $(seq "$repeats"); do
  for mode in none pause alu alu2; do
    hogs=()
    case $mode in
      pause) taskset -c 0 "$out/hog_pause" & hogs+=($!) ;;
      alu) taskset -c 0 "$out/hog_alu" & hogs+=($!) ;;
      alu2) taskset -c 0 "$out/hog_alu" & hogs+=($!); taskset -c 0 "$out/hog_alu" & hogs+=($!) ;;
    esac
    [ "$mode" = none ] || sleep 0.1
    echo "$mode $(walk)"
    for h in "${hogs[@]}"; do kill "$h"; wait "$h" 2>/dev/null || true; done
  done
done > "$out/times"
for mode in none pause alu alu2; do
  grep "^$mode " "$out/times" | awk '{print $2}' | sort -n |
    awk -v m="$mode" '{a[NR]=$1} END {printf "%-6s n=%d  min %.4f s  median %.4f s  max %.4f s\n", m, NR, a[1], a[int((NR+1)/2)], a[NR]}'
done
