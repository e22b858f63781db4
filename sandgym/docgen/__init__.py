"""The reference docs, generated from the code: ``docs/CONFIG.md`` from the config dataclasses and their field
docstrings, ``docs/CLI.md`` from the ``sandgym`` argument parsers.

    python -m sandgym.docgen            # rewrite both (run from the repository root)
    python -m sandgym.docgen --check    # exit 1, naming the stale file, when either differs from the code

``tests/test_reference_docs.py`` runs the check.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from sandgym.docgen import cli_md, config_md

COMMAND = config_md.COMMAND
DOCS: dict[str, Callable[[], str]] = {"CONFIG.md": config_md.render, "CLI.md": cli_md.render}
"""Each generated file under ``docs/`` and the function that renders it."""


def stale(docs_dir: Path) -> list[str]:
    """The generated files under ``docs_dir`` that differ from what the code gives now (or are missing)."""
    out = []
    for name, render in DOCS.items():
        path = docs_dir / name
        if not path.is_file() or path.read_text(encoding="utf-8") != render():
            out.append(str(path))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=COMMAND, description="Rewrite docs/CONFIG.md and docs/CLI.md from the code.")
    ap.add_argument("--docs", default="docs", help="the docs folder (default: docs, from the repository root)")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file is stale")
    args = ap.parse_args(argv)
    docs = Path(args.docs)
    if not docs.is_dir():
        print(f"{COMMAND}: error: no folder {str(docs)!r}; run from the repository root or pass --docs DIR",
              file=sys.stderr)
        return 2
    if args.check:
        old = stale(docs)
        for path in old:
            print(f"{path} is stale: run `{COMMAND}` and commit the result", file=sys.stderr)
        return 1 if old else 0
    for name, render in DOCS.items():
        (docs / name).write_text(render(), encoding="utf-8")
        print(f"wrote {docs / name}")
    return 0
