"""Small text helpers shared by the reference generators: docstrings (reST-flavoured) as Markdown, table cells."""

from __future__ import annotations

import re

_ROLE = re.compile(r":(?:class|func|meth|data|attr|mod|obj):`(~?)([^`]+)`")


def md(text: str) -> str:
    """A docstring's text as Markdown: ``code`` -> `code`, ``:class:`~a.b.C``` -> `C`, whitespace collapsed; a ``<``
    outside code is escaped (it would open an HTML tag)."""
    text = _ROLE.sub(lambda m: "`" + (m.group(2).rsplit(".", 1)[-1] if m.group(1) else m.group(2)) + "`", text)
    text = text.replace("``", "`")
    parts = text.split("`")
    for i in range(0, len(parts), 2):  # outside code spans
        parts[i] = parts[i].replace("<", "&lt;")
    return " ".join("`".join(parts).split())


def paragraphs(doc: str | None) -> list[str]:
    """A docstring's paragraphs (split at blank lines), each as one Markdown line."""
    if not doc:
        return []
    return [md(p) for p in re.split(r"\n\s*\n", doc.strip()) if p.strip()]


def blocks(paras: list[str]) -> list[str]:
    """Paragraphs as Markdown lines: each followed by a blank line."""
    return [line for p in paras for line in (p, "")]


def cell(text: str) -> str:
    """Text fit for a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    """A Markdown table's lines."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return out


def code(text: str) -> str:
    """``text`` as an inline code span (a longer fence when it holds a backtick)."""
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"
