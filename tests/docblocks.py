"""The fenced blocks of the docs and their doc-test markers, parsed (no pytest, no running).

A marker is an HTML comment whose last line is the one just before a block's opening fence:

- ``<!-- doc-test: run -->``: the block runs as pasted;
- ``<!-- doc-test: run, replace "OLD" with "NEW", replace "OLD2" with "NEW2" -->``: it runs after these literal
  substitutions (``\\"`` and ``\\\\`` escape a quote and a backslash inside the strings; ``{tiny_model}`` and
  ``{repo}`` in NEW are filled in when it runs);
- ``<!-- doc-test: illustrative (REASON) -->``: it never runs, for the reason given;
- ``<!-- doc-test: file NAME -->``: its text is written to NAME in the document's working directory.

Shell and python blocks (``RUNNABLE``) need a marker; other languages need none unless they are a ``file``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

SHELL = frozenset({"bash", "sh", "shell", "console"})
PYTHON = frozenset({"python", "py"})
RUNNABLE = SHELL | PYTHON
PLACEHOLDERS = ("{tiny_model}", "{repo}")
FIX = 'add <!-- doc-test: run --> or <!-- doc-test: illustrative (why) --> on the line before its opening fence'

_OPEN = re.compile(r"^<!--\s*doc-test\b\s*:?")
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_QUOTED = r'"((?:[^"\\]|\\.)*)"'
_REPLACE = re.compile(rf"\s*,\s*replace\s+{_QUOTED}\s+with\s+{_QUOTED}", re.S)


@dataclass(frozen=True)
class Marker:
    """What a block's marker asks: ``kind`` is ``run``, ``illustrative`` or ``file``."""

    kind: str
    reason: str = ""
    name: str = ""
    replaces: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Block:
    """One fenced block: ``line`` is the 1-based line of its opening fence, ``text`` its body."""

    doc: str
    line: int
    lang: str
    text: str
    marker: Marker | None

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def runnable(self) -> bool:
        return self.lang in RUNNABLE

    def command(self, values: dict[str, str]) -> str:
        """The text to run or write: the marker's replacements applied, placeholders filled from ``values``."""
        text = self.text
        for old, new in self.marker.replaces if self.marker else ():
            if old not in text:
                raise MarkerError(f"{self.id}: replace {old!r}: that text is not in the block; update the marker "
                                  "to the block's current text (or drop the replace)")
            for key, value in values.items():
                new = new.replace("{" + key + "}", value)
            text = text.replace(old, new)
        return text


@dataclass(frozen=True)
class Doc:
    """A document's blocks and the marker problems found while parsing it (each one names its line and the fix)."""

    path: str
    blocks: tuple[Block, ...]
    problems: tuple[str, ...]

    def unmarked(self) -> list[Block]:
        return [b for b in self.blocks if b.runnable and b.marker is None]

    def stale(self) -> list[str]:
        """Problems of markers whose replace text is no longer in their block."""
        out = []
        for b in self.blocks:
            for old, _ in b.marker.replaces if b.marker else ():
                if old not in b.text:
                    out.append(f"{b.id}: replace {old!r}: that text is not in the block; update the marker to the "
                               "block's current text (or drop the replace)")
        return out


class MarkerError(ValueError):
    """A malformed, unknown or stale doc-test marker."""


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", r"\1", s)


def parse_marker(body: str) -> Marker:
    """The text after ``doc-test:`` (comment delimiters removed) -> Marker; MarkerError naming the fix."""
    body = body.strip()
    word = body.split(maxsplit=1)[0].rstrip(",") if body else ""
    if word == "run":
        rest, replaces = body[3:], []
        while rest.strip():
            m = _REPLACE.match(rest)
            if not m:
                raise MarkerError(f"cannot read {rest.strip()!r} after 'run'; write: run, replace \"OLD\" with "
                                  "\"NEW\" (comma-separated, quotes escaped as \\\")")
            old, new = _unescape(m.group(1)), _unescape(m.group(2))
            if not old:
                raise MarkerError("replace \"\" (an empty OLD text); give the exact text of the block to replace")
            replaces.append((old, new))
            rest = rest[m.end():]
        return Marker("run", replaces=tuple(replaces))
    if word == "illustrative":
        m = re.fullmatch(r"illustrative\s*\((.*)\)", body, re.S)
        if not m or not m.group(1).strip():
            raise MarkerError(f"{body!r}: an illustrative marker needs its reason; write: illustrative (why it "
                              "does not run here: a GPU, a key, a served model, hours, output)")
        return Marker("illustrative", reason=" ".join(m.group(1).split()))
    if word == "file":
        m = re.fullmatch(r"file\s+(\S+)", body)
        if not m:
            raise MarkerError(f"{body!r}: a file marker names one relative path; write: file NAME")
        name = PurePosixPath(m.group(1))
        if name.is_absolute() or ".." in name.parts:
            raise MarkerError(f"file {m.group(1)!r}: the name must be a relative path inside the working directory")
        return Marker("file", name=m.group(1))
    raise MarkerError(f"unknown doc-test marker {body!r}; use one of: run | run, replace \"OLD\" with \"NEW\" | "
                      "illustrative (REASON) | file NAME")


def parse(text: str, doc: str) -> Doc:
    """Every fenced block of a markdown text with its marker, and every marker problem (by line)."""
    lines = text.splitlines()
    blocks: list[Block] = []
    problems: list[str] = []
    pending: tuple[int, str] | None = None  # (line of the marker's end, marker body)
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        opened = _OPEN.match(stripped)
        if opened:
            start = i
            if not re.match(r"<!-- doc-test: ", stripped):
                problems.append(f"{doc}:{i + 1}: write the marker as '<!-- doc-test: ...' (one space, a colon)")
            body = stripped[opened.end():]
            while "-->" not in body and i + 1 < len(lines):
                i += 1
                body += "\n" + lines[i]
            if "-->" not in body:
                problems.append(f"{doc}:{start + 1}: a doc-test marker is never closed; end it with -->")
                break
            body, after = body.split("-->", 1)
            if after.strip():
                problems.append(f"{doc}:{i + 1}: text after the doc-test marker's -->; put the marker alone")
            pending = (i, body)
            i += 1
            continue
        m = _FENCE.match(line)
        if m and not (m.group("fence")[0] == "`" and "`" in m.group("info")):
            fence, indent = m.group("fence"), len(m.group("indent"))
            lang = m.group("info").strip().split(maxsplit=1)[0].lower() if m.group("info").strip() else ""
            body_lines: list[str] = []
            j = i + 1
            while j < len(lines):
                close = lines[j].strip()
                if close.startswith(fence[0] * len(fence)) and not close.strip(fence[0]):
                    break
                body_lines.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j].lstrip())
                j += 1
            marker = None
            if pending is not None and pending[0] == i - 1:
                try:
                    marker = parse_marker(pending[1])
                except MarkerError as e:
                    problems.append(f"{doc}:{i}: {e}")
            pending = None
            blocks.append(Block(doc, i + 1, lang, "\n".join(body_lines) + "\n", marker))
            i = j + 1
            continue
        if pending is not None:
            problems.append(f"{doc}:{pending[0] + 1}: a doc-test marker not followed by a fenced block; put it on "
                            "the line just before the opening fence")
            pending = None
        i += 1
    if pending is not None:
        problems.append(f"{doc}:{pending[0] + 1}: a doc-test marker at the end of the document marks no block")
    for b in blocks:
        if b.marker and b.marker.kind != "file" and not b.runnable:
            problems.append(f"{b.id}: a {b.marker.kind} marker on a {b.lang or 'plain'} block; only "
                            f"{'/'.join(sorted(RUNNABLE))} blocks run (use file NAME to write it, or drop the marker)")
    return Doc(doc, tuple(blocks), tuple(problems))


def documents(repo: Path) -> list[Path]:
    """README.md and every docs/*.md of the repository."""
    return [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]
