#!/usr/bin/env bash
# SimSo vs schedkit on the same global-EDF task sets (UUniFast, implicit deadlines).
#
#   bench/simso/run.sh [--sets N] [--tasks N] [--cores M] [--utilisation U] [--horizon 10s] [--repeats R]
#
# Creates bench/.venv (gitignored) with `pip install simso` on first use, exports the task sets
# with `schedkit bench export`, times SimSo (bench/simso/compare.py) and schedkit
# (`schedkit bench files`) on them, each the median of R runs per set, and prints both totals
# and the ratio. Both simulate the same tasks over the same horizon, single-threaded.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
sets=10 tasks=20 cores=4 util=3.0 horizon=10s repeats=3
while [ $# -gt 0 ]; do
  case "$1" in
    --sets) sets="$2"; shift 2 ;;
    --tasks) tasks="$2"; shift 2 ;;
    --cores) cores="$2"; shift 2 ;;
    --utilisation) util="$2"; shift 2 ;;
    --horizon) horizon="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

venv="$root/bench/.venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import simso" 2>/dev/null; then
  echo "setting up $venv with simso (pip install simso)..." >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet simso
fi

cd "$root"
cargo build --release --quiet -p schedkit
sk="${CARGO_TARGET_DIR:-$root/target}/release/schedkit"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
"$sk" bench export --dir "$out" --sets "$sets" --tasks "$tasks" --cores "$cores" \
  --utilisation "$util" --horizon "$horizon" 2>/dev/null

simso_json="$("$venv/bin/python" "$here/compare.py" "$repeats" "$out"/set-*.toml)"
sk_json="$("$sk" bench files --json --repeats "$repeats" "$out"/set-*.toml)"

python3 - "$simso_json" "$sk_json" "$sets" "$tasks" "$cores" "$util" "$horizon" "$repeats" <<'PY'
import json, sys
simso, sk = json.loads(sys.argv[1]), json.loads(sys.argv[2])
sets, tasks, cores, util, horizon, repeats = sys.argv[3:]
print(f"global EDF · {sets} UUniFast sets · {tasks} tasks on {cores} cores · U = {util} · "
      f"{horizon} simulated per set · median of {repeats} runs per set")
print(f"{'set':<12}{'jobs (simso)':>14}{'jobs (schedkit)':>17}{'misses (simso)':>16}"
      f"{'misses (schedkit)':>19}{'simso s':>10}{'schedkit s':>12}")
for a, b in zip(simso["files"], sk["files"]):
    print(f"{a['file']:<12}{a['jobs']:>14}{b['jobs']:>17}{a['deadline_misses']:>16}"
          f"{b['deadline_misses']:>19}{a['median_s']:>10.4f}{b['median_s']:>12.5f}")
ratio = simso["total_s"] / sk["total_s"]
print(f"total: SimSo {simso['total_s']:.3f} s, schedkit {sk['total_s']:.4f} s "
      f"-> schedkit is {ratio:.0f}x faster")
PY
