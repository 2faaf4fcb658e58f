#!/usr/bin/env bash
# Golden-output check for `schedkit sim`: every scenario in examples/ that the simulator
# accepts without extra flags, through each of its outputs (report table, --json, --csv,
# --gantt SVG, --trace Chrome JSON).
#
#   scripts/golden.sh record DIR   write the outputs and their SHA256SUMS into DIR
#   scripts/golden.sh check DIR    compare against DIR; exit 1 with a diff summary on a difference
#
# The outputs total about 34 MB (the lottery trace alone 8 MB), so the repository keeps only
# tests/golden/sim/SHA256SUMS (record DIR, then commit DIR/SHA256SUMS); `check` compares the
# files byte for byte, with a diff, where DIR holds them, and the sums where it holds only
# SHA256SUMS. crates/schedkit/tests/golden.rs checks the same sums under `cargo test`.
#
# Scenarios the simulator rejects (exit non-zero: real-engine-only policies) are skipped and
# listed with the error. The outputs are deterministic (seeded, simulated time only); the one
# thing normalised is the scenario path that the report and JSON echo, which is written as
# given on the command line (examples/...), so run the script from the repository root.
# SCHEDKIT (default target/release/schedkit) names the binary.
set -u
mode=${1:-}
dir=${2:-}
if [[ ( $mode != record && $mode != check ) || -z $dir ]]; then
    echo "usage: $0 record|check DIR" >&2
    exit 2
fi
cd "$(dirname "$0")/.."
bin=${SCHEDKIT:-target/release/schedkit}
# `policy = "default"` simulates the model of the running kernel; pin the release so the
# outputs do not depend on the machine (Linux 6.18: the eevdf model).
export SCHEDKIT_SIM_KERNEL=6.18
if [[ ! -x $bin ]]; then
    echo "golden: $bin not built (cargo build --release)" >&2
    exit 2
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

skipped=0
for f in $(find examples -name '*.toml' | LC_ALL=C sort); do
    name=${f#examples/}
    name=${name%.toml}
    name=${name//\//__}
    if ! "$bin" sim "$f" >"$out/$name.report.txt" 2>"$out/err"; then
        echo "skip $f: $(head -c 200 "$out/err" | head -n 1)"
        rm -f "$out/$name.report.txt"
        skipped=$((skipped + 1))
        continue
    fi
    "$bin" sim "$f" --json >"$out/$name.json" || echo "golden: $f --json failed" >&2
    "$bin" sim "$f" --csv >"$out/$name.csv" || echo "golden: $f --csv failed" >&2
    "$bin" sim "$f" --gantt "$out/$name.gantt.svg" >/dev/null || echo "golden: $f --gantt failed" >&2
    "$bin" sim "$f" --trace "$out/$name.trace.json" >/dev/null || echo "golden: $f --trace failed" >&2
done
rm -f "$out/err"
echo "golden: $(ls "$out" | wc -l) outputs, $skipped scenarios skipped"

(cd "$out" && LC_ALL=C sha256sum -- * >SHA256SUMS)

if [[ $mode == record ]]; then
    mkdir -p "$dir"
    rm -f "$dir"/*
    cp "$out"/* "$dir"/
    echo "golden: recorded into $dir"
    exit 0
fi

status=0
if [[ ! -e $dir/SHA256SUMS ]]; then
    echo "golden: $dir/SHA256SUMS missing" >&2
    exit 2
fi
if [[ $(ls "$dir" | wc -l) == 1 ]]; then
    # Sums only: name the outputs that differ.
    if ! diff <(cat "$dir/SHA256SUMS") "$out/SHA256SUMS" >"$out/sumdiff"; then
        sed -n 's/^< [0-9a-f]*  /was: /p; s/^> [0-9a-f]*  /now: /p' "$out/sumdiff"
        echo "golden: differences against $dir/SHA256SUMS" >&2
        exit 1
    fi
    echo "golden: all outputs match $dir/SHA256SUMS"
    exit 0
fi
while read -r file; do
    if [[ ! -e $out/$file ]]; then
        echo "MISSING $file (in $dir, not produced now)"
        status=1
    elif ! cmp -s "$dir/$file" "$out/$file"; then
        echo "DIFFERS $file:"
        diff "$dir/$file" "$out/$file" | head -n 10
        status=1
    fi
done < <(ls "$dir")
while read -r file; do
    if [[ ! -e $dir/$file ]]; then
        echo "NEW $file (produced now, not in $dir)"
        status=1
    fi
done < <(ls "$out")
if [[ $status == 0 ]]; then
    echo "golden: all outputs identical to $dir"
else
    echo "golden: differences against $dir" >&2
fi
exit $status
