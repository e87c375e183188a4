#!/usr/bin/env python3
"""Writes every ```cpp block of README.md and docs/ to OUT_DIR/<doc>_<n>.cc: each is a complete
program (the package test builds and runs them against the installed package), so what the
documentation shows compiles, links and runs as shown.

Usage: extract_snippets.py SOURCE_ROOT OUT_DIR
"""
import pathlib
import re
import sys

root, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
docs = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
count = 0
for doc in docs:
    blocks = re.findall(r"^```(?:cpp|c\+\+)\n(.*?)^```", doc.read_text(), re.M | re.S)
    for n, block in enumerate(blocks):
        name = re.sub(r"[^A-Za-z0-9]", "_", str(doc.relative_to(root)).removesuffix(".md"))
        if "int main(" not in block:
            sys.exit(f"{doc}: C++ block {n} is not a whole program (no main): users copy these")
        (out / f"snippet_{name}_{n}.cc").write_text(f"// From {doc.relative_to(root)}\n{block}")
        count += 1
print(f"{count} C++ blocks from {len(docs)} documents")
