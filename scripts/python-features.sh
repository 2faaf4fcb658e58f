#!/usr/bin/env bash
# Lists the crates that `maturin develop` would build with other features than
# `cargo test --workspace` did, so the Python build would compile them (and everything that
# depends on them) again instead of reusing the workspace's artifacts. maturin builds the
# python package alone, and cargo unifies features over the packages it builds; the feature
# pins in python/Cargo.toml make the two sets equal. Prints nothing when they are; otherwise one
# line per crate (the python-alone features, then the workspace's) and exits 1.
# Usage: scripts/python-features.sh   (scripts/test.sh runs it and only warns)
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# One `name version|features` line per crate; `(*)` marks repeats, `(proc-macro)` kinds.
tree() {
    cargo tree --offline --locked -f '{p}|{f}' --prefix none "$@" |
        sed 's/ (\*)$//; s/ (proc-macro)//; s/ ([^)]*)|/|/' | sort -u
}
tree --workspace -e normal,build,dev > "$tmp/workspace"
tree -p schedkit-python -e normal,build > "$tmp/python"
# A crate built for python alone whose line is not in the workspace's: other features.
drift=$(comm -23 "$tmp/python" "$tmp/workspace")
[ -z "$drift" ] && exit 0
while IFS='|' read -r crate features; do
    ws=$(grep -F "$crate|" "$tmp/workspace" | cut -d'|' -f2 | paste -sd' ' -)
    echo "$crate: python alone [$features], workspace [$ws]"
done <<< "$drift"
exit 1
