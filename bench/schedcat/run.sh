#!/usr/bin/env bash
# schedkit's global EDF beside SchedCAT's native G-EDF simulator, on the same UUniFast sets,
# interleaved. SchedCAT (github.com/brandenburg/schedcat) is on no package registry and is not
# part of this repository: build its simulator and the small driver that times it outside the
# repository, as docs/results/speed.md describes, and pass the driver with --driver.
#
#   bench/schedcat/run.sh --driver PATH [--rounds R] [--repeats K] [--sets N] [--horizon 10s]
#                         [--only 20|1000]
#
# Workloads: 20 tasks on 4 cores at U = 3 and 1,000 tasks on 64 cores at U = 48 (the `gedf-*`
# rows of `schedkit bench sim`), N sets each (seeds 1..N), exported by `schedkit bench export`
# as scenario files (schedkit) and plain task lists (`--format tasks`, the driver). Each round
# runs both sides over every set, K runs per set (median), the side that goes first
# alternating (A B, B A, ...); a side's round time is the sum over sets. The report gives per
# side the median jobs/s over rounds with its range, and the median of the per-round ratios
# (schedkit / SchedCAT, above 1 = schedkit faster), by wall time and by the simulating
# thread's CPU time (on a shared machine wall time also counts other processes' turns). Load
# and allowed CPUs are printed before and after. Both sides are single-threaded; neither is
# pinned. Timed: the simulation and its statistics (schedkit: engine, every metric and the
# final report; SchedCAT: its G-EDF simulation with tardiness statistics); not timed:
# reading the files and building the task sets.
#
# SCHEDKIT names a built schedkit binary; otherwise it is built with cargo --release (into
# CARGO_TARGET_DIR when set). Scratch files go to a temporary directory outside the repository.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
driver="" rounds=7 repeats=3 sets=3 horizon=10s only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --driver) driver="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --sets) sets="$2"; shift 2 ;;
    --horizon) horizon="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
if [ -z "$driver" ] || [ ! -x "$driver" ]; then
  echo "--driver PATH: the SchedCAT G-EDF driver, built as docs/results/speed.md says" >&2
  exit 2
fi

if [ -n "${SCHEDKIT:-}" ]; then
  sk="$SCHEDKIT"
else
  (cd "$root" && cargo build --release --quiet -p schedkit)
  sk="${CARGO_TARGET_DIR:-$root/target}/release/schedkit"
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

machine() {
  echo "# $1: $(uptime | sed 's/^ *//') · nproc $(nproc) · allowed CPUs" \
    "$(grep Cpus_allowed_list /proc/self/status | cut -f2)"
}
echo "# schedkit $("$sk" --version 2>/dev/null | head -1) ($sk) · driver $driver"
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
machine before

configs=("20 4 3.0" "1000 64 48.0")
for cfg in "${configs[@]}"; do
  set -- $cfg
  if [ -n "$only" ] && [ "$only" != "$1" ]; then continue; fi
  dir="$out/gedf-$1x$2"
  for format in toml tasks; do
    "$sk" bench export --dir "$dir" --tasks "$1" --cores "$2" --utilisation "$3" \
      --sets "$sets" --horizon "$horizon" --format "$format" 2>/dev/null
  done
  for r in $(seq 1 "$rounds"); do
    a() { "$driver" "$repeats" "$dir"/set-*.tasks > "$dir/schedcat-$r.jsonl"; }
    b() { "$sk" bench files --json --repeats "$repeats" "$dir"/set-*.toml 2>/dev/null \
            > "$dir/schedkit-$r.json"; }
    if [ $((r % 2)) -eq 1 ]; then a; b; else b; a; fi
  done
  python3 - "$dir" "$rounds" "$1" "$2" "$3" "$sets" "$horizon" "$repeats" <<'PY'
import json, statistics, sys
d, rounds, tasks, cores, util, sets, horizon, repeats = sys.argv[1:]
rounds = int(rounds)
def schedcat(r):
    rows = [json.loads(l) for l in open(f"{d}/schedcat-{r}.jsonl")]
    return (sum(x["jobs"] for x in rows), sum(x["median_s"] for x in rows),
            sum(x["median_cpu_s"] for x in rows), sum(x["tardy"] for x in rows))
def schedkit(r):
    doc = json.load(open(f"{d}/schedkit-{r}.json"))
    rows = doc["files"]
    return (sum(x["jobs"] for x in rows), doc["total_s"], doc["total_cpu_s"],
            sum(x["deadline_misses"] for x in rows))
a = [schedcat(r) for r in range(1, rounds + 1)]
b = [schedkit(r) for r in range(1, rounds + 1)]
def fmt(xs):
    return f"{statistics.median(xs)/1e6:6.2f} M [{min(xs)/1e6:.2f}-{max(xs)/1e6:.2f}]"
def ratio(xs):
    return f"{statistics.median(xs):5.2f}x [{min(xs):.2f}-{max(xs):.2f}]"
print(f"\nglobal EDF · {tasks} tasks / {cores} cores / U = {util} · {sets} UUniFast sets · "
      f"{horizon} simulated each · {rounds} interleaved rounds · median of {repeats} runs per set")
print(f"  jobs per round: SchedCAT {a[0][0]} (completed; tardy {a[0][3]}), "
      f"schedkit {b[0][0]} (released; deadline misses {b[0][3]})")
for name, col in (("wall", 1), ("cpu", 2)):
    ra = [x[0] / x[col] for x in a]
    rb = [x[0] / x[col] for x in b]
    ratios = [y / x for x, y in zip(ra, rb)]
    print(f"  {name:>4}: SchedCAT {fmt(ra)} jobs/s · schedkit {fmt(rb)} jobs/s · "
          f"schedkit / SchedCAT {ratio(ratios)}")
PY
done
machine after
