"""A repository's own pytest configuration, as the ``pytest.ini`` its hidden tests run with.

pytest reads the first of ``pytest.ini`` / ``.pytest.ini``, ``pyproject.toml`` (``[tool.pytest.ini_options]``, or
pytest 9's native ``[tool.pytest]``), ``tox.ini`` (``[pytest]``) and ``setup.cfg`` (``[tool:pytest]``) that holds a
pytest section; :func:`read_pytest_config` does the same and turns it into one ``[pytest]`` file, which from-repo
ships at the root of every task's hidden files (the grader uses it in place of its empty one).

Only what changes how tests behave is kept: markers, warning filters, collection names, ``usefixtures``,
``xfail_strict``, logging levels, ``pythonpath``, and from ``addopts`` the warning, marker-strictness, import-mode and
``-m`` options. The rest is dropped and listed with the reason: plugin options (plugins do not load in the grader),
coverage, xdist, doctests (the grader runs test files only), output and stop-early options, ``minversion`` (the
sandbox's pytest is what it is), ``testpaths`` and ``norecursedirs`` (the grader names the files).
"""

from __future__ import annotations

import configparser
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CORE_KEYS = frozenset({
    "markers", "filterwarnings", "python_files", "python_classes", "python_functions", "usefixtures",
    "xfail_strict", "empty_parameter_set_mark", "pythonpath", "log_level", "log_format", "log_date_format",
    "consider_namespace_packages", "disable_test_id_escaping_and_forfeit_all_rights_to_community_support",
})
"""ini keys that reach the hidden tests (core pytest options that change what a test does or how it is named)."""
_KEEP_FLAGS = frozenset({"--strict-markers", "--strict"})
_KEEP_VALUED = frozenset({"-W", "--pythonwarnings", "--import-mode", "-m"})
_VALUED = frozenset({
    "-p", "-m", "-k", "-W", "-n", "-c", "-o", "--override-ini", "--ignore", "--ignore-glob", "--deselect", "--tb",
    "--maxfail", "--import-mode", "--pythonwarnings", "--dist", "--numprocesses", "--capture", "--doctest-glob",
    "--basetemp", "--rootdir", "--confcutdir", "--durations", "--log-level", "--log-cli-level", "--cov-report",
    "--cov-config", "--cov-fail-under", "--cov-context", "--doctest-report", "--junitxml", "--junit-xml", "--timeout",
    "--color", "--reruns", "--benchmark-columns", "--hypothesis-profile",
})
"""Options written ``--opt VALUE`` (two tokens): when dropped, their value goes with them."""
_SOURCES = (("pytest.ini", "[pytest]"), (".pytest.ini", "[pytest]"), ("pyproject.toml", ""),
            ("tox.ini", "[pytest]"), ("setup.cfg", "[tool:pytest]"))


@dataclass(frozen=True)
class PytestConfig:
    """The repository's pytest settings as the grader will apply them."""

    source: str
    """Where they came from, e.g. ``pyproject.toml [tool.pytest.ini_options]``."""
    options: Mapping[str, str]
    """Kept ini keys -> ini value (multi-line values as pytest's ini format writes them)."""
    dropped: tuple[str, ...] = ()
    """Each option left out, with the reason (``--cov=pkg: coverage``)."""

    @property
    def ini(self) -> str:
        """The ``[pytest]`` file's text."""
        lines = ["[pytest]"]
        for key, value in self.options.items():
            body = value.strip().splitlines()
            lines.append(f"{key} = {body[0] if body else ''}")
            lines += [f"    {ln.strip()}" for ln in body[1:] if ln.strip()]
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "options": dict(self.options), "dropped": list(self.dropped)}


def read_pytest_config(root: str | Path) -> PytestConfig | None:
    """The repository's pytest configuration (the file pytest itself would pick), or None when it has none."""
    base = Path(root)
    for name, section in _SOURCES:
        path = base / name
        if not path.is_file():
            continue
        if name == "pyproject.toml":
            found = _from_pyproject(path)
            if found is None:
                continue
            where, raw = found
        else:
            parser = configparser.ConfigParser(interpolation=None)
            try:
                parser.read(path, encoding="utf-8")
            except (configparser.Error, UnicodeDecodeError):
                continue
            if not parser.has_section(section[1:-1]):
                if name.endswith("pytest.ini"):  # pytest.ini wins even without a section
                    return PytestConfig(name, {})
                continue
            where, raw = f"{name} {section}", dict(parser.items(section[1:-1]))
        return _convert(where, raw)
    return None


def _from_pyproject(path: Path) -> tuple[str, dict[str, Any]] | None:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None
    tool = data.get("tool", {}).get("pytest")
    if not isinstance(tool, dict):
        return None
    if isinstance(tool.get("ini_options"), dict):
        return "pyproject.toml [tool.pytest.ini_options]", dict(tool["ini_options"])
    native = {k: v for k, v in tool.items() if k != "ini_options"}
    return ("pyproject.toml [tool.pytest]", native) if native else None


def _convert(source: str, raw: Mapping[str, Any]) -> PytestConfig:
    options: dict[str, str] = {}
    dropped: list[str] = []
    kept_opts: list[str] = []
    for key, value in raw.items():
        if key == "addopts":
            tokens = [str(t) for t in value] if isinstance(value, list) else shlex.split(str(value))
            kept, gone = filter_addopts(tokens)
            kept_opts += kept
            dropped += gone
        elif key in CORE_KEYS:
            options[key] = _ini_value(value)
        else:
            dropped.append(f"{key}: {_why_key(key)}")
    if kept_opts:
        options["addopts"] = " ".join(shlex.quote(t) for t in kept_opts)
    return PytestConfig(source, options, tuple(dropped))


def _ini_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    return str(value)


def _why_key(key: str) -> str:
    if key in ("testpaths", "norecursedirs"):
        return "the grader names the test files"
    if key == "minversion":
        return "the sandbox's pytest is used as it is"
    if key == "required_plugins":
        return "plugins do not load in the grader; declare packages with --requirement"
    if key.startswith("doctest"):
        return "doctests are not run (the grader runs test files)"
    return "not a core pytest option that changes test behaviour"


def filter_addopts(tokens: list[str]) -> tuple[list[str], list[str]]:
    """``addopts`` tokens -> (kept tokens, dropped options with their reasons)."""
    kept: list[str] = []
    dropped: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        name, eq, _ = tok.partition("=")
        short = name[:2] if name.startswith("-") and not name.startswith("--") and len(name) > 2 else None
        if short in ("-W", "-p", "-m", "-k", "-n", "-r", "-c", "-o"):  # -Werror, -ra, -pno:x: value attached
            name, eq = short, "="
        takes_value = name in _VALUED and not eq and i < len(tokens)
        value = [tokens[i]] if takes_value else []
        i += len(value)
        shown = " ".join([tok, *value])
        if name in _KEEP_FLAGS or (name in _KEEP_VALUED and (eq or value)):
            kept += [tok, *value]
        else:
            dropped.append(f"{shown}: {_why_opt(name)}")
    return kept, dropped


def _why_opt(name: str) -> str:
    if name.startswith("--cov") or name == "--no-cov":
        return "coverage is not measured"
    if name.startswith("--doctest"):
        return "doctests are not run (the grader runs test files)"
    if name in ("-n", "--numprocesses", "--dist"):
        return "tests run in one process"
    if name == "-p":
        return "the grader chooses the plugins"
    if name in ("-x", "--exitfirst", "--maxfail", "--lf", "--ff", "--sw", "--stepwise"):
        return "every hidden test runs"
    if name in ("--ignore", "--ignore-glob", "--deselect", "-k"):
        return "the grader names the tests"
    return "output or plugin option, no effect on outcomes"
