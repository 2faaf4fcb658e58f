#!/usr/bin/env bash
# The whole test suite: the Rust workspace, the README's tours (scripts/tours.sh), then the
# Python package (python/) built into a virtual environment under target/ and tested with
# pytest against the CLI the workspace's tests just built. Idempotent: the environment and
# its packages are reused when present.
set -euo pipefail
cd "$(dirname "$0")/.."

# The real tools (cyclictest, hackbench, stress-ng) some tests run beside schedkit.
bash scripts/deps.sh

start=$SECONDS
target="${CARGO_TARGET_DIR:-$PWD/target}"
venv="$target/pyvenv"
python="${PYTHON:-python3.11}"
command -v "$python" >/dev/null || python=python3
if [ ! -x "$venv/bin/python" ]; then
    mkdir -p "$target"
    "$python" -m venv "$venv"
fi
# Only what the tests import: pandas (results), pyarrow (reading --parquet files back), Dask
# (the LocalCluster sweep), matplotlib (the example script), SimSo (agreement with SimSo
# itself), maturin and pytest. pip is quiet and skips what is installed.
"$venv/bin/python" -m pip install -q --disable-pip-version-check \
    "maturin>=1.5,<2" pandas pyarrow "dask[distributed]" pytest matplotlib simso
# pyo3's build script configures itself for the interpreter in PYO3_PYTHON and runs again when
# it changes: the workspace build below gets the one maturin will use, so the pyo3 crates it
# builds are the ones maturin needs.
# maturin also sets PYO3_ENVIRONMENT_SIGNATURE (implementation-major.minor-bits), which the
# build script watches too (seen in cargo's fingerprint log: "EnvVarChanged
# PYO3_ENVIRONMENT_SIGNATURE"); the same value here.
export PYO3_PYTHON="$venv/bin/python"
PYO3_ENVIRONMENT_SIGNATURE=$("$PYO3_PYTHON" -c 'import platform, struct, sys
bits = struct.calcsize("P") * 8
print("%s-%d.%d-%dbit" % (platform.python_implementation().lower(), *sys.version_info[:2], bits))')
export PYO3_ENVIRONMENT_SIGNATURE
python_setup=$((SECONDS - start))

cargo test --workspace

# The README's tours, every command as written, on a fresh `cargo install` of the binary
# (scripts/tours.sh). `--profile test` installs the build `cargo test` has just made in the
# same target directory instead of a release build from scratch; the README's own install
# command is the release one.
tours_start=$SECONDS
bash scripts/tours.sh --profile test
echo "scripts/test.sh: the README's tours took $((SECONDS - tours_start)) s" >&2

start=$SECONDS
# `cargo test --workspace` builds the binary for its CLI tests; a separate `cargo build` would
# resolve features for the binary alone and may rebuild it, so it runs only if that is missing.
[ -x "$target/debug/schedkit" ] || cargo build --bin schedkit
# maturin builds the python package alone; the feature pins in python/Cargo.toml keep its
# dependencies' features those of the workspace build, so it reuses that build's artifacts
# (same target directory, same profile: dev, which the test profile inherits). A crate that
# drifted would be compiled again: say which.
bash scripts/python-features.sh ||
    echo "scripts/test.sh: the crates above will be compiled again for Python; pin their features in python/Cargo.toml" >&2
# `maturin develop` builds the extension (dev profile, in the same target directory) and
# installs the package into the environment, editable.
(cd python && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" maturin develop -q)
SCHEDKIT_BIN="$target/debug/schedkit" "$venv/bin/python" -m pytest -q python/tests
echo "scripts/test.sh: the Python part took $((python_setup + SECONDS - start)) s" \
    "(environment ${python_setup} s, build and pytest $((SECONDS - start)) s)" >&2
