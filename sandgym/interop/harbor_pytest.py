"""Harbor test.sh files that only run pytest -> sandgym's own ``tests`` verifier (graded out of the agent's reach).

Harbor's usual verifier (its template, Terminal-Bench 2) installs a pytest, runs it on ``/tests/test_*.py`` from
WORKDIR and writes 1 or 0 to ``/logs/verifier/reward.txt`` from pytest's exit code. Run as a script, that pytest
imports whatever the agent left in the workspace (a fake ``pytest`` package, a ``json.py``, ``os._exit(0)`` at
import) and its exit code decides the reward. When test.sh does nothing else, the same test files are graded by
sandgym's grader instead (its own pytest, ``--noconftest``, out of the workspace, the agent's modules in a process
of their own): :func:`pytest_plan` recognises such a test.sh, :func:`hidden_tests` maps the paths the tests use.

Recognised lines (anything else keeps the script verifier, with the line that decided it):

- the one pytest run: ``pytest``, ``python3 -m pytest``, ``uv run [--with P ...] pytest``, ``uvx [-p V] [-w P ...]
  pytest`` on ``/tests/...`` (or ``$TEST_DIR/...``) files or directories, with output flags (``-q``, ``-v``,
  ``-rA``, ``--tb=...``, ``--ctrf FILE``, ``--junitxml=FILE``, ``-p no:cacheprovider``, ...);
- setup: ``set -e``, ``cd`` WORKDIR, ``mkdir -p /logs/...``, ``apt-get``/``apt``, the uv installer
  (``curl ... | sh``, ``source $HOME/.local/bin/env``, ``export PATH=...``), ``pip install``/``uv pip install``
  (pytest and its plugins are the grader's own; other packages become the task's requirements), ``echo``;
- the reward from pytest's exit code: ``if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt ...``,
  ``rc=$?``, ``trap '...' EXIT``, ``[ $rc -eq 0 ] && reward=1``, ``jq`` reading ctrf.json, ``exit``.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import sandgym.pysyntax as pysyntax

__all__ = ["PytestPlan", "count_tests", "hidden_tests", "pytest_plan", "GRADER_DIR"]

GRADER_DIR = "/.grader"
"""Where the grader lays out the hidden files (``sandgym.sandbox.bwrap_host.IN_GRADER``): Harbor's /tests."""

_OUTPUT_FLAGS = re.compile(r"-[qvslx]+|-r\w*|--tb=\w+|--color=\w+|--capture=\w+|--durations(-min)?=[\d.]+|"
                           r"--maxfail=\d+|--timeout=[\d.]+|--ctrf=\S+|--junit-?xml=\S+|--json-report(-file=\S+)?|"
                           r"--no-header|--no-summary|--disable-warnings|--disable-pytest-warnings|--showlocals|"
                           r"--full-trace|--strict-markers|--no-cov|--verbose|--quiet|-n=?\w+|--exitfirst")
_VALUE_FLAGS = {"--tb", "--color", "--capture", "--durations", "--maxfail", "--timeout", "--ctrf", "--junitxml",
                "--junit-xml", "--json-report-file", "-n", "-r"}
_UV_VALUE = {"-p", "--python", "-w", "--with", "--from", "--cache-dir"}
_UV_FLAGS = {"-q", "--quiet", "--no-project", "--frozen", "--no-sync", "--active", "--isolated", "--no-dev",
             "--no-cache", "--offline", "--locked"}
_REWARD = re.compile(r"^/logs/verifier/(reward\.(txt|json)|ctrf\.json|[\w.-]+\.(txt|log|xml|json))$")
_STDERR_DUP = re.compile(r"\d*>&\d+")
_REDIRECT = re.compile(r"(?:\d*>>?|&>)\s*(\"[^\"]*\"|'[^']*'|[^\s;|&'\"]+)")
_JQ = re.compile(r"[A-Za-z_]\w*=\$\(jq [^()`]*\)")


@dataclass
class PytestPlan:
    """What a pytest-only test.sh runs: test files (relative to tests/) and packages other than pytest's own."""

    files: list[str]
    requirements: list[str] = field(default_factory=list)


def _commands(script: str) -> list[str] | str:
    """Simple commands of ``script`` (split on newlines, ``;``, ``&&``, ``||``, ``|``), or why it cannot be read."""
    if "<<" in script:
        return "test.sh has a here-document (an inline program): it does more than run pytest"
    text = re.sub(r"\\\n", " ", script)
    out: list[str] = []
    for line in text.splitlines():
        cur, quote, depth, i = "", "", 0, 0
        while i < len(line):
            c = line[i]
            if quote:
                cur += c
                if c == quote:
                    quote = ""
            elif c in "'\"":
                quote, cur = c, cur + c
            elif c == "#" and (not cur or cur[-1] in " \t") and depth == 0:
                break
            elif line.startswith("$(", i):
                depth, cur, i = depth + 1, cur + "$(", i + 2
                continue
            elif c == ")" and depth:
                depth, cur = depth - 1, cur + c
            elif depth == 0 and (line.startswith("&&", i) or line.startswith("||", i)):
                out.append(cur)
                cur, i = "", i + 2
                continue
            elif depth == 0 and (c in ";|" or (c == "&" and not cur.endswith(">") and not line.startswith("&>", i))):
                out.append(cur)
                cur = ""
            else:
                cur += c
            i += 1
        out.append(cur)
    return [c.strip() for c in out if c.strip()]


def _words(command: str) -> tuple[list[str], list[str]] | str:
    """(words, redirection targets) of one simple command."""
    command = _STDERR_DUP.sub(" ", command)
    targets = _REDIRECT.findall(command)
    command = _REDIRECT.sub(" ", command)
    try:
        words = shlex.split(command)
    except ValueError as exc:
        return f"cannot read {command!r}: {exc}"
    return words, [t.strip("'\"") for t in targets]


def _tests_path(word: str, tests: Mapping[str, str]) -> list[str] | None:
    """Test files (relative to tests/) that a pytest path argument names, or None when it names something else."""
    for prefix in ("/tests", "$TEST_DIR", "${TEST_DIR}"):
        if word == prefix or word.startswith(prefix + "/"):
            rel = word[len(prefix):].strip("/")
            break
    else:
        return None
    if "::" in rel or "*" in rel:
        return None
    if rel in tests:
        return [rel]
    under = sorted(p for p in tests if (not rel or p.startswith(rel + "/")) and _is_test_file(p))
    return under or None


def _is_test_file(path: str) -> bool:
    name = path.split("/")[-1]
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _pytest_args(words: list[str]) -> tuple[list[str], list[str]] | None:
    """(uv's extra packages, pytest's own arguments) when ``words`` is a pytest run, else None."""
    extra: list[str] = []
    if words[:1] in (["uv"], ["uvx"]):
        i = 2 if words[0] == "uv" else 1
        if words[0] == "uv" and words[1:2] != ["run"]:
            return None
        while i < len(words) and words[i].startswith("-"):
            flag, _, val = words[i].partition("=")
            if flag in _UV_VALUE:
                if not val:
                    i += 1
                    val = words[i] if i < len(words) else ""
                if flag in ("-w", "--with"):
                    extra += [v for v in val.split(",") if v]
            elif flag not in _UV_FLAGS:
                return None
            i += 1
        words = words[i:]
    if words[:1] == ["pytest"]:
        return extra, words[1:]
    if words[:1] and re.fullmatch(r"python3?(\.\d+)?", words[0]):
        rest = [w for w in words[1:] if w not in ("-B", "-u")]
        if rest[:2] == ["-m", "pytest"]:
            return extra, rest[2:]
    return None


def _pytest_files(args: list[str], tests: Mapping[str, str]) -> list[str] | str:
    files: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "-p" and i + 1 < len(args) and args[i + 1].startswith("no:"):
            i += 2
            continue
        if a in _VALUE_FLAGS and i + 1 < len(args):
            i += 2
            continue
        if a == "--":
            i += 1
            continue
        if a.startswith("-"):
            if not _OUTPUT_FLAGS.fullmatch(a):
                return f"pytest option {a!r} changes what runs or how (only output options are recognised)"
            i += 1
            continue
        found = _tests_path(a, tests)
        if found is None:
            return f"pytest argument {a!r} is not a test file or folder under /tests"
        files += found
        i += 1
    return files or "pytest is given no /tests file"


def _package(spec: str) -> str:
    return re.split(r"[\[<>=!~;@ ]", spec, maxsplit=1)[0].lower().replace("_", "-")


def _setup_ok(command: str, words: list[str], targets: list[str], workdir: str) -> str:
    """'' when a non-pytest command is harmless setup or reward writing, else why it is not."""
    if _JQ.fullmatch(command):  # PASSED=$(jq '.results.summary.passed' /logs/verifier/ctrf.json)
        return ""
    for t in targets:
        if t != "/dev/null" and not _REWARD.match(t):
            return f"it writes to {t}"
    while words and words[0] in ("if", "then", "else", "elif", "!", "{", "}"):
        words = words[1:]
    if not words or words[0] in ("fi", "set", "true", "false", "exit", "echo", "printf", "[", "[[", "test",
                                 "apt-get", "apt", "curl", "wget", "sh", "bash", "source", ".", "trap", ":",
                                 "sleep", "sync", "ls", "cat", "jq", "return"):
        if words[:1] in (["sh"], ["bash"]) and len(words) > 1 and words[1] != "-s":
            return "it runs another script"
        if words[:1] in (["source"], ["."]) and words[1:] not in (["$HOME/.local/bin/env"], ["~/.local/bin/env"],
                                                                   ["${HOME}/.local/bin/env"]):
            return "it sources another script"
        if words[:1] == ["cat"] and any(not w.startswith("/logs/") for w in words[1:] if not w.startswith("-")):
            return "it reads a file outside /logs"
        return ""
    if words[0] == "cd":
        target = words[1] if len(words) > 1 else ""
        ok = {workdir, workdir + "/", "$WORKDIR", "${WORKDIR}", "."} if workdir not in ("", "/") else {"/", "."}
        return "" if target in ok else f"it changes to {target!r}, not WORKDIR {workdir}"
    if words[0] == "mkdir":
        return "" if all(w.startswith("/logs") or w.startswith("-") for w in words[1:]) else "it makes folders"
    if words[0] == "export" or re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]):
        for w in words[1:] if words[0] == "export" else words:
            name, _, value = w.partition("=")
            if not re.fullmatch(r"[A-Za-z_]\w*", name):
                return f"{w!r} is not an assignment"
            if "$(" in value and not value.startswith("$(jq "):
                return f"{w!r} runs a command"
            if words[0] == "export" and name not in ("PATH",):
                return f"it exports {name}, which the tests would see"
        return ""
    return f"{words[0]!r} is not a setup or reward step"


def _pip_install(words: list[str]) -> list[str] | None:
    """Packages of a ``pip install`` / ``uv pip install`` / ``uv add`` command, else None."""
    for i in range(len(words) - 1):
        if (words[i] in ("pip", "pip3") and words[i + 1] == "install") or words[i:i + 2] == ["uv", "add"]:
            return [w for w in words[i + 2:] if not w.startswith("-")]
    return None


def pytest_plan(test_sh: str, tests: Mapping[str, str], workdir: str) -> PytestPlan | str:
    """The pytest run of a test.sh that does nothing else, or why it does more (one line, for the import report)."""
    commands = _commands(test_sh)
    if isinstance(commands, str):
        return commands
    files: list[str] | None = None
    reqs: list[str] = []
    for cmd in commands:
        parsed = _words(cmd)
        if isinstance(parsed, str):
            return parsed
        words, targets = parsed
        while words and words[0] in ("if", "then", "else", "elif", "!", "time"):
            words = words[1:]
        if not words:
            continue
        run = _pytest_args(words)
        if run is not None:
            if files is not None:
                return f"test.sh runs pytest more than once ({cmd!r})"
            found = _pytest_files(run[1], tests)
            if isinstance(found, str):
                return found
            for t in targets:
                if t != "/dev/null" and not _REWARD.match(t):
                    return f"pytest's output goes to {t}"
            files, reqs = found, reqs + run[0]
            continue
        if re.search(r"\bpytest\b", cmd) and not _pip_install(words) and "ctrf" not in cmd:
            return f"test.sh runs pytest in a form not recognised: {cmd!r}"
        pkgs = _pip_install(words)
        if pkgs is not None:
            reqs += pkgs
            continue
        why = _setup_ok(cmd, words, targets, workdir)
        if why:
            return f"test.sh line {cmd!r}: {why}"
    if files is None:
        return "test.sh does not run pytest"
    own = ("pytest", "pip", "uv", "setuptools", "wheel")
    extra = [r for r in dict.fromkeys(reqs) if not _package(r).startswith(own)]
    return PytestPlan(list(dict.fromkeys(files)), extra)


def _param_count(dec: ast.expr) -> int | None:
    """How many cases a ``@pytest.mark.parametrize`` decorator makes (1 for other decorators), None if unknown."""
    if not isinstance(dec, ast.Call):
        name = ast.unparse(dec)
        return None if name.split(".")[-1] in ("skip", "xfail", "usefixtures") and "mark" in name else 1
    name = ast.unparse(dec.func)
    last = name.split(".")[-1]
    if last == "parametrize":
        values = dec.args[1] if len(dec.args) > 1 else next((k.value for k in dec.keywords if k.arg == "argvalues"),
                                                           None)
        if isinstance(values, (ast.List, ast.Tuple)) and not any(isinstance(e, ast.Starred) for e in values.elts):
            return len(values.elts)
        return None
    if last in ("skip", "skipif", "xfail", "fixture"):
        return None if last != "fixture" or any(k.arg == "params" for k in dec.keywords) else 1
    return 1


def _product(decorators: list[ast.expr]) -> int | None:
    n = 1
    for dec in decorators:
        k = _param_count(dec)
        if k is None:
            return None
        n *= k
    return n


def count_tests(source: str) -> int | None:
    """Test cases pytest collects from one module, counted from its syntax; None when that cannot be sure
    (parametrize over computed values, fixtures with params, skip/xfail marks, test classes that inherit)."""
    try:
        tree = pysyntax.parse(source)
    except SyntaxError:
        return None
    total = 0
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark"
                                                for t in node.targets):
            return None
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = _product(node.decorator_list)
            if n is None:
                return None
            total += n if node.name.startswith("test") else 0
        elif isinstance(node, ast.ClassDef):
            bases = [ast.unparse(b) for b in node.bases]
            unit = any(b.split(".")[-1] == "TestCase" for b in bases)
            if not (unit or node.name.startswith("Test")):
                continue
            if any(b.split(".")[-1] not in ("object", "TestCase") for b in bases):
                return None
            outer = _product(node.decorator_list)
            if outer is None:
                return None
            methods = [m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
            if not unit and any(m.name == "__init__" for m in methods):
                continue  # pytest does not collect a test class with __init__
            for m in methods:
                if m.name.startswith("test"):
                    n = 1 if unit else _product(m.decorator_list)
                    if n is None:
                        return None
                    total += n * outer
    return total


_PATH = r"(?<![\w.\-/]){}(?=/|\b|$)"


def remap_paths(text: str, pairs: list[tuple[str, str]]) -> str:
    """``text`` with each absolute path prefix ``old`` (a whole path component) written as ``new``."""
    for old, new in pairs:
        if old not in ("", "/"):
            text = re.sub(_PATH.format(re.escape(old)), new.replace("\\", "\\\\"), text)
    return text


def hidden_tests(plan: PytestPlan, tests: Mapping[str, str], workdir: str, workspace: str
                 ) -> tuple[dict[str, str], int] | str:
    """The hidden files of a ``tests`` verifier (the test files test.sh runs and every non-test file beside them,
    with ``/tests`` -> the grader's folder and WORKDIR -> the workspace) and the number of test cases, or why not."""
    out: dict[str, str] = {}
    total = 0
    for rel, text in tests.items():
        if rel == "test.sh" or (_is_test_file(rel) and rel not in plan.files):
            continue
        if PurePosixPath(rel).name == "pytest.ini" and rel != "pytest.ini":
            return f"tests/{rel}: a pytest.ini below the tests' root"
        for where in ("/logs", "/solution"):
            if re.search(_PATH.format(re.escape(where)), text):
                return f"tests/{rel} uses {where}, which sandgym's grader does not lay out"
        if rel in plan.files:
            n = count_tests(text)
            if n is None:
                return (f"tests/{rel}: cannot count its test cases from the source (parametrize over computed "
                        "values, fixtures with params, skip/xfail marks or inherited test classes)")
            total += n
        out[rel] = remap_paths(text, [("/tests", GRADER_DIR), ("$TEST_DIR", GRADER_DIR), (workdir, workspace)])
    if total == 0:
        return "the test files test.sh runs define no test function"
    return out, total
