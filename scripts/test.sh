#!/usr/bin/env bash
# The whole test suite: the Rust workspace, the README's tours (scripts/tours.sh), then the
# Python package (python/) built into a virtual environment under target/ and tested with
# pytest against the CLI the workspace's tests just built. Idempotent: the environment and
# its packages are reused when present.
set -euo pipefail
cd "$(dirname "$0")/.."

# The real tools (cyclictest, hackbench, stress-ng) some tests run beside schedkit.
bash scripts/deps.sh
cargo test --workspace

# The README's tours, every command as written, on a fresh `cargo install` of the binary
# (scripts/tours.sh). `--profile test` installs the build `cargo test` has just made in the
# same target directory instead of a release build from scratch; the README's own install
# command is the release one.
tours_start=$SECONDS
bash scripts/tours.sh --profile test
echo "scripts/test.sh: the README's tours took $((SECONDS - tours_start)) s" >&2

start=$SECONDS
target="${CARGO_TARGET_DIR:-$PWD/target}"
# `cargo test --workspace` builds the binary for its CLI tests; a separate `cargo build` would
# resolve features for the binary alone and may rebuild it, so it runs only if that is missing.
[ -x "$target/debug/schedkit" ] || cargo build --bin schedkit
venv="$PWD/target/pyvenv"
python="${PYTHON:-python3.11}"
command -v "$python" >/dev/null || python=python3
if [ ! -x "$venv/bin/python" ]; then
    mkdir -p "$PWD/target"
    "$python" -m venv "$venv"
fi
# Only what the tests import: pandas (results), pyarrow (reading --parquet files back), Dask
# (the LocalCluster sweep), matplotlib (the example script), SimSo (agreement with SimSo
# itself), maturin and pytest. pip is quiet and skips what is installed.
"$venv/bin/python" -m pip install -q --disable-pip-version-check \
    "maturin>=1.5,<2" pandas pyarrow "dask[distributed]" pytest matplotlib simso
# `maturin develop` builds the extension (dev profile, in the same target directory) and
# installs the package into the environment, editable.
(cd python && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" maturin develop -q)
SCHEDKIT_BIN="$target/debug/schedkit" "$venv/bin/python" -m pytest -q python/tests
echo "scripts/test.sh: the Python part took $((SECONDS - start)) s" >&2
