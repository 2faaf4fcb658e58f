#!/usr/bin/env bash
# The biggest file and the biggest function of each crate under crates/ (src/ only, tests and
# benches left out), in lines. Usage: scripts/structure.sh [REPO_DIR] (default: this checkout);
# OVER=N also lists every function longer than N lines.
# A function spans from its `fn` line to the first line after it that closes the brace at the
# `fn` line's indentation (rustfmt's layout), so nested closures and items count with it.
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
python3 - "$root" "${OVER:-0}" <<'PY'
import os, re, sys
root = sys.argv[1]
over = int(sys.argv[2])
long = []
fn_re = re.compile(r'^(\s*)(pub(\([^)]*\))?\s+)?(const\s+|async\s+|unsafe\s+|extern\s+"C"\s+)*fn\s+(\w+)')
print(f"{'crate':<22} {'biggest file':<48} {'lines':>6}  {'biggest function':<44} {'lines':>6}")
for crate in sorted(os.listdir(os.path.join(root, "crates"))):
    src = os.path.join(root, "crates", crate, "src")
    if not os.path.isdir(src):
        continue
    best_file, best_fn = ("", 0), ("", 0)
    for dirpath, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, os.path.join(root, "crates", crate))
            lines = open(path, encoding="utf-8").read().split("\n")
            n = len(lines) - (1 if lines and lines[-1] == "" else 0)
            if n > best_file[1]:
                best_file = (rel, n)
            for i, line in enumerate(lines):
                m = fn_re.match(line)
                if not m or line.rstrip().endswith(";"):
                    continue
                indent = m.group(1)
                for j in range(i + 1, len(lines)):
                    if lines[j].startswith(indent + "}") and not lines[j].startswith(indent + " "):
                        size = j - i + 1
                        if over and size > over:
                            long.append((size, f"{crate} {rel}:{i + 1} {m.group(5)}"))
                        if size > best_fn[1]:
                            best_fn = (f"{rel}:{i + 1} {m.group(5)}", size)
                        break
    print(f"{crate:<22} {best_file[0]:<48} {best_file[1]:>6}  {best_fn[0]:<44} {best_fn[1]:>6}")
if over:
    print(f"\nfunctions over {over} lines:")
    for size, name in sorted(long, reverse=True):
        print(f"{size:>6}  {name}")
PY
