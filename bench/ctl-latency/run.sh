#!/usr/bin/env bash
# `schedkit ctl status` latency and SIGTERM-to-exit latency of a real tenants run (2 tenants x
# 2 spinning threads, both cores busy) while 100 idle connections are open and one client
# sends a byte every 20 ms without ever finishing its line; medians of REPEATS runs, for this
# tree and for BASE (default 6c81ef2, before the control socket had its own thread), built in
# a temporary worktree outside the repository and removed afterwards. Values over the cap
# (SCHEDKIT_CTL_CAP_S, default 10 s) print as `>CAP`. Root (cgroups). The measurement is the
# ignored test `ctl_latency_bench` in crates/schedkit/tests/ctl.rs.
#   sudo bench/ctl-latency/run.sh [BASE] [REPEATS]
# BEFORE_BIN=/path/to/schedkit skips building BASE; SCHEDKIT_CTL_DRIP=0 leaves the dripping
# client out.
set -euo pipefail
cd "$(dirname "$0")/../.."
base=${1:-6c81ef2}
repeats=${2:-10}
cargo build --release -q -p schedkit
after=$PWD/target/release/schedkit
before=${BEFORE_BIN:-}
if [ -z "$before" ]; then
  wt=$(mktemp -d /tmp/ctl-base.XXXXXX)
  trap 'git worktree remove --force "$wt" 2>/dev/null || rm -rf "$wt"' EXIT
  git worktree add -q --detach "$wt" "$base"
  (cd "$wt" && cargo build --release -q -p schedkit)
  before=$wt/target/release/schedkit
fi
bench() {
  SCHEDKIT_CTL_BIN=$1 SCHEDKIT_CTL_REPEATS=$repeats \
    cargo test -q -p schedkit --test ctl -- --ignored --nocapture ctl_latency_bench 2>&1 |
    grep -E '^(binary|repeat|median)'
}
echo "== after: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (dirty)')"
bench "$after"
echo "== before: $base"
bench "$before"
