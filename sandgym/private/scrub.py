"""Remove secrets from text that goes into prompts and task files, and report what was removed (never the secret).

Each match is replaced by a typed placeholder ``<REDACTED:kind>``. The generic ``api_key = ...`` rule only fires on
literal-looking values (quoted, or an unquoted config value that mixes letters and digits), so ordinary code such
as ``token = get_token()`` is left alone.

>>> scrubbed, found = scrub_text('key = "AKIAABCDEFGHIJKLMNOP"', file="cfg.py")
>>> scrubbed
'key = "<REDACTED:aws_access_key>"'
>>> [(f.kind, f.file, f.line) for f in found]
[('aws_access_key', 'cfg.py', 1)]
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sandgym.errors import ConfigError

_SECRET_NAMES = r"(?:api[_-]?key|apikey|secret(?:[_-]?key)?|access[_-]?key|auth[_-]?token|token|password|passwd|pwd)"

BUILTIN_PATTERNS: tuple[tuple[str, str], ...] = (
    ("private_key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY"
                    r"(?: BLOCK)?-----"),
    ("aws_access_key", r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b"),
    ("aws_secret_key", r"(?i)(?<=aws_secret_access_key)(?P<sep>[\"']?\s*[:=]\s*[\"']?)(?P<value>[A-Za-z0-9/+=]{40})"),
    ("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"),
    ("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b"),
    ("openai_key", r"\bsk-(?:proj-|svcacct-|ant-)?[A-Za-z0-9_-]{20,}\b"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\b"),
    ("email", r"(?<![\w.@-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"),
    ("secret_assignment",
     rf"(?i)\b{_SECRET_NAMES}\b[\"']?\s*[:=]\s*(?:(?P<q>[\"'])(?P<value>(?=[^\"'\s]*[A-Za-z])(?=[^\"'\s]*\d)"
     rf"[^\"'\s<>]{{8,}})(?P=q)|(?P<bare>(?=[A-Za-z0-9_\-./+=]*[A-Za-z])(?=[A-Za-z0-9_\-./+=]*\d)"
     rf"[A-Za-z0-9_\-./+=]{{12,}})(?=\s*(?:#.*)?$))"),
)
"""(kind, regex). A pattern with a ``value`` (or ``bare``) group replaces only that group, else the whole match."""


@dataclass(frozen=True)
class Finding:
    """One removed secret: its kind and where it was (the secret itself is never kept)."""

    kind: str
    file: str
    line: int

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "file": self.file, "line": self.line}


@dataclass(frozen=True)
class ScrubReport:
    """Everything a scrub removed, and counts by kind."""

    findings: tuple[Finding, ...] = ()

    @property
    def by_kind(self) -> dict[str, int]:
        return dict(sorted(Counter(f.kind for f in self.findings).items()))

    def to_json(self) -> dict[str, Any]:
        return {"removed": len(self.findings), "by_kind": self.by_kind,
                "findings": [f.to_json() for f in self.findings]}


@dataclass(frozen=True)
class Scrubber:
    """Built-in secret patterns plus ``extra`` (kind -> regex) from configuration."""

    extra: Mapping[str, str] = field(default_factory=dict)
    _compiled: tuple[tuple[str, re.Pattern[str]], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        compiled = []
        for kind, pattern in (*BUILTIN_PATTERNS, *self.extra.items()):
            if not re.fullmatch(r"[a-z][a-z0-9_]*", kind):
                raise ConfigError(f"scrub pattern name {kind!r} must be lower_snake_case (it becomes a placeholder)")
            try:
                compiled.append((kind, re.compile(pattern, re.M)))
            except re.error as exc:
                raise ConfigError(f"scrub pattern {kind}={pattern!r} is not a valid regex ({exc}); fix the "
                                  "expression") from exc
        object.__setattr__(self, "_compiled", tuple(compiled))

    def text(self, text: str, file: str = "<text>") -> tuple[str, list[Finding]]:
        """``text`` with every secret replaced by ``<REDACTED:kind>``, and the findings (kind, file, line)."""
        spans: list[tuple[int, int, str]] = []  # found on the original text, so lines are the original lines
        for kind, regex in self._compiled:
            for m in regex.finditer(text):
                group = next((g for g in ("value", "bare") if g in regex.groupindex and m.group(g) is not None), None)
                start, end = (m.start(group), m.end(group)) if group else (m.start(), m.end())
                if end > start and not any(s < end and start < e for s, e, _ in spans):  # earlier kinds win
                    spans.append((start, end, kind))
        spans.sort()
        pieces: list[str] = []
        findings: list[Finding] = []
        pos = 0
        for start, end, kind in spans:
            pieces.append(text[pos:start] + f"<REDACTED:{kind}>")
            findings.append(Finding(kind, file, text.count("\n", 0, start) + 1))
            pos = end
        return "".join(pieces) + text[pos:], findings

    def files(self, files: Mapping[str, str]) -> tuple[dict[str, str], ScrubReport]:
        """Scrub every file of a mapping (path -> text)."""
        out: dict[str, str] = {}
        found: list[Finding] = []
        for path, text in files.items():
            out[path], f = self.text(text, path)
            found += f
        return out, ScrubReport(tuple(found))


def scrub_text(text: str, file: str = "<text>", extra: Mapping[str, str] | None = None) -> tuple[str, list[Finding]]:
    """Scrub one text with the built-in patterns (plus ``extra``)."""
    return Scrubber(dict(extra or {})).text(text, file)


def merge_reports(reports: Iterable[ScrubReport]) -> ScrubReport:
    return ScrubReport(tuple(f for r in reports for f in r.findings))


def parse_patterns(specs: Iterable[str]) -> dict[str, str]:
    """``kind=regex`` strings (from the command line) as a mapping."""
    out: dict[str, str] = {}
    for spec in specs:
        kind, sep, pattern = spec.partition("=")
        if not sep or not pattern:
            raise ConfigError(f"--scrub-pattern {spec!r} must look like kind=REGEX, e.g. internal_host=db[0-9]+\\.corp")
        out[kind.strip()] = pattern
    return out
