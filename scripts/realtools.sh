#!/usr/bin/env bash
# schedkit against real tools nobody on this project wrote (Debian's rt-tests and stress-ng),
# interleaved A/B with repeats; prints medians. Root (exclusive mode, cgroups, SCHED_FIFO).
#
# (a) cyclictest's max latency, with stress-ng CPU hogs on every CPU beside it:
#     A: schedkit run --exclusive -- cyclictest ...   (schedkit moves the hogs and IRQs to
#        the system CPU; cyclictest keeps its own SCHED_FIFO 80)
#     B: chrt -f 80 taskset -c LAST cyclictest ...    (by hand: pinned, real-time, hogs stay)
#     and beside A, schedkit's own stall figure for the same run (longest stall of the job,
#     from its samples) to hold against cyclictest's.
# (b) process-fair with hackbench (-g 10: 400 tasks) beside a one-thread hog (stress-ng
#     --cpu 1): each process's share of the job's CPU time against half, the report's own
#     `job_share` (of the kernel's per-cgroup accounting where the run has it: each row's
#     `cpu_source` says so), checked against the fair report's `process_cpu_ns` it was taken
#     from, and beside it the samples' figure (`sampled_cpu_ns`); the 1-minute load at the
#     start of each round. (The commands' own output goes to /dev/null.)
#
# Usage: scripts/realtools.sh [ROUNDS] [SECONDS]   (env SCHEDKIT=path/to/schedkit,
#        PARTS="a b")
set -euo pipefail
cd "$(dirname "$0")/.."
B=${SCHEDKIT:-target/release/schedkit}
ROUNDS=${1:-7}
SECS=${2:-10}
PARTS=${PARTS:-a b}
[ "$(id -u)" -eq 0 ] || { echo "realtools.sh: needs root (exclusive mode, cgroups)"; exit 2; }
scripts/deps.sh
for t in cyclictest hackbench stress-ng; do
  command -v $t > /dev/null || { echo "realtools.sh: $t missing (scripts/deps.sh)"; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
last=$(($(nproc) - 1))
med() { sort -n | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "-"}'; }
echo "machine: $(nproc) CPUs, $(uname -r); uptime: $(uptime)"
echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo '+dirty'); $ROUNDS rounds of ${SECS}s"
echo "cyclictest: $(cyclictest --help 2>&1 | head -1); stress-ng: $(stress-ng --version 2>&1 | head -1)"

CT=(cyclictest -m -q -p 80 -i 1000 -t 1 -D "${SECS}")
maxlat() { awk '/Max:/ {for (i = 1; i <= NF; i++) if ($i == "Max:") print $(i + 1)}' "$1" | sort -n | tail -1; }

if [[ " $PARTS " == *" a "* ]]; then
  echo
  echo "(a) cyclictest ${CT[*]:1}, beside stress-ng --cpu $(nproc)"
  printf '%-6s %-10s %14s %20s\n' round arm max_lat_us schedkit_stall_us
  : > "$work/a.sk"; : > "$work/a.hand"; : > "$work/a.stall"
  for r in $(seq "$ROUNDS"); do
    # Alternate which arm goes first, so a drift in the machine's load hits both alike.
    arms="schedkit hand"; [ $((r % 2)) -eq 0 ] && arms="hand schedkit"
    for arm in $arms; do
      stress-ng --cpu "$(nproc)" --timeout $((SECS + 4))s > /dev/null 2>&1 &
      hogs=$!
      sleep 1
      if [ "$arm" = schedkit ]; then
        $B run --exclusive --wait --no-perf --linux-json "$work/l.json" -- "${CT[@]}" > "$work/out" 2> "$work/err" \
          || { echo "schedkit run failed:"; cat "$work/err"; }
        lat=$(maxlat "$work/out")
        stall=$(python3 -c 'import json,sys; print(round(max(p["longest_stall_ns"] for p in json.load(open(sys.argv[1]))["processes"]) / 1000))' "$work/l.json")
        echo "$lat" >> "$work/a.sk"; echo "$stall" >> "$work/a.stall"
      else
        chrt -f 80 taskset -c "$last" "${CT[@]}" > "$work/out" 2>&1
        lat=$(maxlat "$work/out"); stall=-
        echo "$lat" >> "$work/a.hand"
      fi
      kill "$hogs" 2>/dev/null || true; wait "$hogs" 2>/dev/null || true
      printf '%-6s %-10s %14s %20s\n' "$r" "$arm" "$lat" "$stall"
    done
  done
  echo "median max latency: schedkit --exclusive $(med < "$work/a.sk") us (schedkit's stall figure $(med < "$work/a.stall") us), chrt+taskset $(med < "$work/a.hand") us"
fi

if [[ " $PARTS " == *" b "* ]]; then
  echo
  echo "(b) process-fair: hackbench -g 10 (400 tasks) beside a one-thread hog, ${SECS}s"
  cat > "$work/fair.toml" <<TOML
cores = $(nproc)
[policy]
name = "process-fair"
[run]
horizon = "${SECS}s"
[[process]]
name = "hackbench"
command = ["sh", "-c", "exec hackbench -g 10 -l 1000000000 > /dev/null"]
[[process]]
name = "hog"
command = ["sh", "-c", "exec stress-ng --cpu 1 --timeout $((SECS + 10))s > /dev/null 2>&1"]
TOML
  printf '%-6s %8s %14s %10s %12s %9s %16s %12s\n' round load1 hackbench_job% hog_job% max_err_pp cpu_from sampled_hb/hog% machine_%
  : > "$work/b"
  for r in $(seq "$ROUNDS"); do
    load=$(cut -d' ' -f1 /proc/loadavg)
    $B run "$work/fair.toml" --wait --no-perf --json --linux-json "$work/l.json" > "$work/j.json" 2> "$work/err" \
      || { echo "schedkit run failed:"; cat "$work/err"; continue; }
    python3 - "$work/j.json" "$work/l.json" "$r" "$load" >> "$work/b" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
fair = json.load(open(sys.argv[2]))["fair"]
p = {x["name"]: x for x in j["processes"]}
hb, hog = p["hackbench"]["job_share"] * 100, p["hog"]["job_share"] * 100
err = max(abs(hb - 50), abs(hog - 50))
src = {x["name"]: (x.get("cpu_source") or "-").split(":")[0] for x in j["processes"]}
# The report's CPU time is the fair report's kernel count, one source for both.
kernel = fair.get("process_cpu_ns") or []
for i, x in enumerate(j["processes"]):
    if src[x["name"]] == "kernel":
        assert kernel[i] == x["cpu_ns"], (x["name"], kernel[i], x["cpu_ns"])
samp = [p[n].get("sampled_cpu_ns") for n in ("hackbench", "hog")]
sampled = (f"{samp[0] * 100 / sum(samp):.1f}/{samp[1] * 100 / sum(samp):.1f}"
           if all(samp) else "-")
total = j["summary"]["job_cpu_ns"]
mach = total / (j["window_ns"] * j["cores"]) * 100
print(f"{sys.argv[3]:<6} {sys.argv[4]:>8} {hb:14.1f} {hog:10.1f} {err:12.1f} {src['hackbench'] + '/' + src['hog']:>9} {sampled:>16} {mach:12.1f}")
PY
    tail -1 "$work/b"
  done
  col() { awk -v c="$1" '{print $c}' "$work/b"; }
  rng() { sort -n | awk 'NR == 1 {lo = $1} {hi = $1} END {if (NR) printf "%s-%s", lo, hi}'; }
  echo "median (range): hackbench $(col 3 | med) ($(col 3 | rng)) % of the job, hog $(col 4 | med) ($(col 4 | rng)) %, max |share - 50| $(col 5 | med) ($(col 5 | rng)) points; load $(col 2 | med) ($(col 2 | rng))"
fi
