"""The repository speaks of the product only: no labels of how the work on it was organised ("session N",
"issue N", run labels such as ``demo_s18``) and no absolute paths of a machine, in any tracked text file's content
or in any tracked file's name.

A result is named by its track, date, commit and machine (``docs/results/json_tools-2026-12-06/``); a regression
test by what it guards. The few technical strings that look like a machine path but are paths inside a sandbox are
listed in ``ALLOWED``, each with its reason.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SKIPPED_SUFFIXES = (".gz", ".tar", ".zip", ".whl", ".png", ".jpg", ".jpeg", ".gif", ".pdf", ".safetensors", ".bin")


@dataclass(frozen=True)
class Rule:
    """A kind of text the repository must not hold; ``where`` picks the files whose content it is checked in."""

    name: str
    pattern: re.Pattern[str]
    fix: str
    where: re.Pattern[str] = re.compile(r"")

    def applies_to(self, path: str) -> bool:
        return bool(self.where.search(path))


@dataclass(frozen=True)
class Allowed:
    """One technical occurrence that is not what the rule is about: the exact text matched, in one file."""

    path: str
    text: str
    reason: str


RULES = (
    # "session" or "issue" then a number: plural, hyphenated, after "#", or inside a name after "_" too; not
    # "an MCP session", "max_sessions", "E2BCodeSession", "--max-sessions" and a number, "CPython issue gh-NNN".
    Rule("work label", re.compile(r"(?<![A-Za-z0-9-])(?:session|issue)s?[ _-]?#?\d+", re.IGNORECASE),
         "say what the text is about (a regression by what it guards, a result by its track and date)"),
    # run labels (a name, "_s", a number), in documents and configs (not in code, where x_s1 may be a variable).
    Rule("run label", re.compile(r"_s\d+\b"),
         "name the run by its track and date (e.g. make_demo-2026-12-06)",
         where=re.compile(r"^docs/|\.(md|toml|json|jsonl|txt)$")),
    # a machine's own directories: not "/tmp" alone (a path the code uses) nor a URL's path segment of the same name.
    Rule("machine path", re.compile(r"(?<![\w.~-])(?:/(?:work|root|Users)/|/tmp/(?:tmp)|/home/[A-Za-z_][\w.-]*/)"),
         "use a relative path (runs/..., docs/results/...) or a placeholder such as OUT or RUN_DIR"),
)

# Adjacent literals ("/home/" "user/") keep this file itself free of the texts it allows elsewhere.
ALLOWED = (
    Allowed("sandgym/sandbox/e2b.py", "/home/" "user/",
            "the E2B VM's working directory (E2B's own user): a path inside the sandbox, not on a machine of ours"),
    Allowed("docs/SANDBOX.md", "/home/" "user/", "documents the E2B VM's working directory (see sandgym/sandbox/e2b.py)"),
    Allowed("sandgym/sandbox/probes.py", "/ro" "ot/",
            "a probe run inside the sandbox checks that root's files there cannot be read"),
)


def hits(text: str, path: str = "") -> list[tuple[Rule, str]]:
    """Every (rule, matched text) in ``text``, a line or a name, as if it came from ``path``."""
    found = []
    for rule in RULES:
        if not rule.applies_to(path):
            continue
        found += [(rule, m.group(0)) for m in rule.pattern.finditer(text)]
    return [(rule, t) for rule, t in found if not any(a.path == path and a.text == t for a in ALLOWED)]


def _tracked_files() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no tracked files to scan")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [f for f in out.split("\0") if f]


def _text(path: Path) -> str | None:
    """The file's text, or None for a binary, compressed or missing file."""
    if path.name.endswith(SKIPPED_SUFFIXES) or not path.is_file():
        return None
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def scan() -> tuple[int, list[str]]:
    """(number of text files scanned, one ``file:line: rule 'text'`` problem per hit)."""
    problems: list[str] = []
    scanned = 0
    for rel in _tracked_files():
        problems += [f"{rel}: (file name) {rule.name} {t!r}" for rule, t in hits(rel, rel)]
        text = _text(ROOT / rel)
        if text is None:
            continue
        scanned += 1
        for n, line in enumerate(text.splitlines(), 1):
            problems += [f"{rel}:{n}: {rule.name} {t!r}" for rule, t in hits(line, rel)]
    return scanned, problems


def test_the_repository_speaks_of_the_product_only() -> None:
    scanned, problems = scan()
    print(f"repo hygiene: scanned {scanned} tracked text files, {len(problems)} problems")
    assert scanned > 0
    fixes = [f"{r.name}: {r.fix}" for r in RULES if any(f" {r.name} " in p for p in problems)]
    assert not problems, (f"{len(problems)} problems in {scanned} tracked text files:\n" + "\n".join(problems)
                          + "\nfixes:\n" + "\n".join(fixes))


# The examples are split into adjacent literals so that this file holds none of them whole.
FLAGGED = ["after session" " 12 the gain", "Sessions" " 24-25", "see issue #" "47", "issue" " 17, item 6",
           "def test_session" "_11_forgeries", "out /" "work/main/runs", "/tmp/" "tmpab12cd/x", "/home/" "alice/x",
           "/ro" "ot/.cache", "/Us" "ers/bob/src", "docs/results/demo" "_s18/summary.json"]
NOT_FLAGGED = ["an MCP session", "max_sessions", "--max-sessions 4", "E2BCodeSession", "start_new_session=True",
               "a pytest session", "CPython issue gh-106905", "files under /tmp", "https://example.com/" "work/x",
               "cd work/", "coding/strings/train/d1/s0-0", "a tissue 3 cells", "the issues we found"]


@pytest.mark.parametrize("text", FLAGGED)
def test_the_matcher_flags_work_labels_and_machine_paths(text: str) -> None:
    assert hits(text, "docs/NOTES.md"), text


@pytest.mark.parametrize("text", NOT_FLAGGED)
def test_the_matcher_leaves_technical_words_alone(text: str) -> None:
    assert not hits(text, "docs/NOTES.md"), text


def test_an_allowed_occurrence_is_allowed_only_in_its_file() -> None:
    assert not hits('WORKDIR = "/home/' 'user/workspace"', "sandgym/sandbox/e2b.py")
    assert hits('WORKDIR = "/home/' 'user/workspace"', "sandgym/other.py")
