"""Shared fixtures: the repository root, and the `schedkit` binary the results are compared
with (`SCHEDKIT_BIN`, or target/debug/schedkit as `cargo test --workspace` leaves it)."""

import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def root():
    return ROOT


def _binary():
    env = os.environ.get("SCHEDKIT_BIN")
    if env:
        return pathlib.Path(env)
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / "schedkit"


@pytest.fixture
def cli():
    """Runs the schedkit binary in the repository root; returns its stdout (parsed as JSON
    when `as_json`)."""
    exe = _binary()
    if not exe.exists():
        pytest.fail(f"{exe} is missing: build it with `cargo build` or set SCHEDKIT_BIN")

    def run(*args, as_json=True, check=True):
        p = subprocess.run([str(exe), *map(str, args)], cwd=ROOT, capture_output=True, text=True)
        if check and p.returncode != 0:
            raise AssertionError(f"schedkit {' '.join(map(str, args))}: {p.stderr}")
        return json.loads(p.stdout) if as_json else p

    return run


@pytest.fixture(autouse=True)
def _in_the_repository(monkeypatch):
    """Tests run in the repository root, like the CLI they are compared with, so relative
    file names (which reports carry) are the same on both sides."""
    monkeypatch.chdir(ROOT)
