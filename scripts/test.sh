#!/usr/bin/env bash
# The whole test suite: the Rust workspace, then the Python package (python/) built into a
# virtual environment under target/ and tested with pytest against the freshly built CLI.
# Idempotent: the environment and its packages are reused when present.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --workspace
cargo build --bin schedkit

target="${CARGO_TARGET_DIR:-$PWD/target}"
venv="$PWD/target/pyvenv"
python="${PYTHON:-python3.11}"
command -v "$python" >/dev/null || python=python3
if [ ! -x "$venv/bin/python" ]; then
    mkdir -p "$PWD/target"
    "$python" -m venv "$venv"
fi
# pip is quiet and skips what is installed; simso checks schedkit against SimSo itself.
"$venv/bin/python" -m pip install -q --disable-pip-version-check \
    "maturin>=1.5,<2" pandas pyarrow "dask[distributed]" pytest matplotlib simso
# `maturin develop` builds the extension (dev profile, sharing the workspace's target
# directory) and installs the package into the environment, editable.
(cd python && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" maturin develop -q)
SCHEDKIT_BIN="$target/debug/schedkit" "$venv/bin/python" -m pytest -q python/tests
