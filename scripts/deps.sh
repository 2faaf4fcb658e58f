#!/usr/bin/env bash
# The real tools schedkit's tests and benchmarks run beside its own code (Debian packages):
# rt-tests (cyclictest, hackbench) and stress-ng. Installs the missing ones with apt-get when
# run as root; otherwise says what is missing and goes on (the tests that need a tool skip
# with a printed reason). Idempotent: nothing is fetched when every tool is there.
# Usage: scripts/deps.sh   (the README's test command and .ci/run call it)
set -euo pipefail
missing=()
command -v cyclictest > /dev/null && command -v hackbench > /dev/null || missing+=(rt-tests)
command -v stress-ng > /dev/null || missing+=(stress-ng)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get > /dev/null; then
  echo "scripts/deps.sh: missing ${missing[*]} (install them: apt-get install -y ${missing[*]}); the tests that need them skip" >&2
  exit 0
fi
echo "scripts/deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# A stale or missing package list would not know them: update first, quietly.
apt-get update -qq > /dev/null || true
apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
