"""The package's surface: the stubs name what the Rust module has, and the example runs."""

import ast
import os
import pathlib
import runpy
import subprocess
import sys

import schedkit
from schedkit import _schedkit

PKG = pathlib.Path(schedkit.__file__).parent


def test_stubs_cover_the_native_module():
    tree = ast.parse((PKG / "_schedkit.pyi").read_text())
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    stubbed |= {t.id for n in tree.body if isinstance(n, ast.AnnAssign) for t in [n.target]}
    native = {n for n in dir(_schedkit) if not n.startswith("__")}
    assert native <= stubbed | {"Scenario"}, native - stubbed
    for cls in ("Scenario", "SimResult"):
        node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
        methods = {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
        public = {m for m in dir(getattr(_schedkit, cls)) if not m.startswith("_")}
        assert public <= methods, (cls, public - methods)
    assert (PKG / "py.typed").exists()


def test_example_draws_a_figure(root, tmp_path):
    out = tmp_path / "threads.png"
    env = dict(os.environ, MPLBACKEND="Agg")
    subprocess.run([sys.executable, str(root / "python/examples/threads.py"), str(out)],
                   cwd=root, env=env, check=True)
    assert out.stat().st_size > 10_000
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
