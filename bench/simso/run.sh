#!/usr/bin/env bash
# SimSo vs schedkit on the same global-EDF task sets (UUniFast, implicit deadlines), interleaved.
#
#   bench/simso/run.sh [--sets N] [--tasks N] [--cores M] [--utilisation U] [--horizon 10s]
#                      [--rounds R] [--repeats K]
#
# SimSo (PyPI `simso`) goes into a virtual environment outside the repository (SIMSO_VENV,
# default ~/.cache/schedkit/simso-venv), created with `pip install simso` on first use. SCHEDKIT
# names a built schedkit binary; otherwise it is built with cargo --release (into
# CARGO_TARGET_DIR when set). The task sets go to a temporary directory.
#
# Each round times SimSo (bench/simso/compare.py) and schedkit (`schedkit bench files`) over
# every set, K runs per set (median), the side that goes first alternating (A B, B A, ...). The
# report gives per side the median over rounds of the summed set times, with its range, and the
# median of the per-round ratios, by wall time and by the simulating thread's CPU time, with
# the load and allowed CPUs before and after. Both sides are single-threaded and unpinned and
# simulate the same tasks over the same horizon.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
sets=10 tasks=20 cores=4 util=3.0 horizon=10s rounds=3 repeats=1
while [ $# -gt 0 ]; do
  case "$1" in
    --sets) sets="$2"; shift 2 ;;
    --tasks) tasks="$2"; shift 2 ;;
    --cores) cores="$2"; shift 2 ;;
    --utilisation) util="$2"; shift 2 ;;
    --horizon) horizon="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

venv="${SIMSO_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/schedkit/simso-venv}"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import simso" 2>/dev/null; then
  echo "setting up $venv with simso (pip install simso)..." >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet simso
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
machine before
"$sk" bench export --dir "$out" --sets "$sets" --tasks "$tasks" --cores "$cores" \
  --utilisation "$util" --horizon "$horizon" 2>/dev/null

for r in $(seq 1 "$rounds"); do
  a() { "$venv/bin/python" "$here/compare.py" "$repeats" "$out"/set-*.toml > "$out/simso-$r.json"; }
  b() { "$sk" bench files --json --repeats "$repeats" "$out"/set-*.toml 2>/dev/null \
          > "$out/schedkit-$r.json"; }
  if [ $((r % 2)) -eq 1 ]; then a; b; else b; a; fi
done

python3 - "$out" "$rounds" "$sets" "$tasks" "$cores" "$util" "$horizon" "$repeats" <<'PY'
import json, statistics, sys
d, rounds, sets, tasks, cores, util, horizon, repeats = sys.argv[1:]
rounds = int(rounds)
simso = [json.load(open(f"{d}/simso-{r}.json")) for r in range(1, rounds + 1)]
sk = [json.load(open(f"{d}/schedkit-{r}.json")) for r in range(1, rounds + 1)]
print(f"global EDF · {sets} UUniFast sets · {tasks} tasks on {cores} cores · U = {util} · "
      f"{horizon} simulated per set · {rounds} interleaved rounds · median of {repeats} runs per set")
print(f"{'set':<14}{'jobs (simso)':>14}{'jobs (schedkit)':>17}{'misses (simso)':>16}"
      f"{'misses (schedkit)':>19}")
for a, b in zip(simso[0]["files"], sk[0]["files"]):
    print(f"{a['file']:<14}{a['jobs']:>14}{b['jobs']:>17}{a['deadline_misses']:>16}"
          f"{b['deadline_misses']:>19}")
jobs_a = sum(f["jobs"] for f in simso[0]["files"])
jobs_b = sum(f["jobs"] for f in sk[0]["files"])
def rng(xs, unit):
    return f"{statistics.median(xs):.4g} {unit} [{min(xs):.4g}-{max(xs):.4g}]"
for name, key in (("wall", "total_s"), ("cpu", "total_cpu_s")):
    ta = [x[key] for x in simso]
    tb = [x[key] for x in sk]
    ratios = [a / b for a, b in zip(ta, tb)]
    print(f"{name:>4}: SimSo {rng(ta, 's')} ({jobs_a / statistics.median(ta):.4g} jobs/s) · "
          f"schedkit {rng(tb, 's')} ({jobs_b / statistics.median(tb):.4g} jobs/s) · "
          f"schedkit is {statistics.median(ratios):.0f}x faster "
          f"[{min(ratios):.0f}-{max(ratios):.0f}]")
PY
machine after
