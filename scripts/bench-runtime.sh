#!/usr/bin/env bash
# The runtime against its peers (crates/schedkit-runtime/benches/peers.rs), twice in a row:
# first with the machine as it is, then beside two CPU hogs, and docs/results/runtime.md
# written from both runs (scripts/runtime_table.py), with `uptime` before each run, the
# allowed CPUs and the commit. Every case inside a run is interleaved A/B/A/B.
#
#   scripts/bench-runtime.sh [FILTER]        # SAMPLES=21 rounds per case by default
#   OUT=/tmp/runtime.md scripts/bench-runtime.sh fork_join
#
# The "quiet" run is only as quiet as the machine: its load average is in the table, and a
# machine shared with other work is said to be so there (NOTE="..." adds a sentence).
set -euo pipefail
cd "$(dirname "$0")/.."

filter=${1:-}
samples=${SAMPLES:-21}
out=${OUT:-docs/results/runtime.md}
work=$(mktemp -d)
hogs=()
cleanup() {
    for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

cargo bench -p schedkit-runtime --bench peers --no-run

bench() { # label json-file
    uptime >"$2.uptime"
    cargo bench -q -p schedkit-runtime --bench peers -- ${filter:+"$filter"} \
        --samples "$samples" --json "$2" --label "$1"
    uptime >>"$2.uptime"
}

bench "as the machine is" "$work/quiet.jsonl"

# Two CPU hogs (plain shell loops, SCHED_OTHER, unpinned), killed by their pids on exit.
for _ in 1 2; do
    sh -c 'while :; do :; done' &
    hogs+=($!)
done
sleep 1
bench "beside two CPU hogs" "$work/loaded.jsonl"
for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done
hogs=()

{
    echo "commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo ' (with uncommitted changes)')"
    echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "cpus=$(nproc --all) online, allowed $(taskset -pc $$ | sed 's/.*: //')"
    echo "model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
    echo "kernel=$(uname -r)"
    echo "samples=$samples"
    echo "filter=$filter"
    echo "note=${NOTE:-}"
} >"$work/meta"
python3 scripts/runtime_table.py "$work/meta" "$work/quiet.jsonl" "$work/loaded.jsonl" "$out"
# The raw cases beside the page, so that the table can be re-read or re-rendered.
raw=${out%.md}
mkdir -p "$raw"
cp "$work/quiet.jsonl" "$work/loaded.jsonl" "$work/meta" "$raw/"
cp "$work/quiet.jsonl.uptime" "$raw/quiet.uptime"
cp "$work/loaded.jsonl.uptime" "$raw/loaded.uptime"
echo "wrote $out and $raw/"
