"""The repository's pytest configuration: found where pytest finds it, kept where it changes test outcomes."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest

from sandgym.private.pytestcfg import filter_addopts, read_pytest_config
from sandgym.private.snapshot import imported_tests


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize(("files", "source"), [
    ({"pytest.ini": "[pytest]\nfilterwarnings = error\n", "setup.cfg": "[tool:pytest]\nxfail_strict = true\n"},
     "pytest.ini [pytest]"),
    ({"pyproject.toml": "[tool.pytest.ini_options]\nfilterwarnings = ['error']\n"},
     "pyproject.toml [tool.pytest.ini_options]"),
    ({"pyproject.toml": "[tool.pytest]\nfilterwarnings = ['error']\n"}, "pyproject.toml [tool.pytest]"),
    ({"pyproject.toml": "[tool.black]\n", "tox.ini": "[tox]\n\n[pytest]\nfilterwarnings = error\n"},
     "tox.ini [pytest]"),
    ({"setup.cfg": "[metadata]\nname = x\n\n[tool:pytest]\nfilterwarnings = error\n"}, "setup.cfg [tool:pytest]"),
])
def test_found_where_pytest_finds_it(tmp_path: Path, files: dict[str, str], source: str) -> None:
    cfg = read_pytest_config(_write(tmp_path, files))
    assert cfg is not None and cfg.source == source
    assert cfg.options == {"filterwarnings": "error"}
    parser = configparser.ConfigParser()
    parser.read_string(cfg.ini)
    assert parser.get("pytest", "filterwarnings") == "error"


def test_no_configuration(tmp_path: Path) -> None:
    assert read_pytest_config(_write(tmp_path, {"setup.cfg": "[metadata]\nname = x\n"})) is None


def test_lists_become_ini_lines_and_the_rest_is_dropped_with_a_reason(tmp_path: Path) -> None:
    cfg = read_pytest_config(_write(tmp_path, {"pyproject.toml": (
        "[tool.pytest.ini_options]\nminversion = '6.2'\ntestpaths = ['tests']\nxfail_strict = true\n"
        "markers = ['slow: slow', 'net: network']\nasyncio_mode = 'auto'\n"
        "addopts = ['-ra', '--strict-markers', '-m', 'not net', '-p', 'no:logging', '--cov=pkg', '-Werror',"
        " '--doctest-modules', '-n', 'auto']\n")}))
    assert cfg is not None
    assert cfg.options == {"xfail_strict": "true", "markers": "slow: slow\nnet: network",
                           "addopts": "--strict-markers -m 'not net' -Werror"}
    assert "markers = slow: slow\n    net: network\n" in cfg.ini
    reasons = dict(d.split(": ", 1) for d in cfg.dropped)
    assert set(reasons) == {"minversion", "testpaths", "asyncio_mode", "-ra", "-p no:logging", "--cov=pkg",
                            "--doctest-modules", "-n auto"}
    assert "coverage" in reasons["--cov=pkg"] and "one process" in reasons["-n auto"]


def test_addopts_string_keeps_warning_and_import_mode_options() -> None:
    kept, dropped = filter_addopts(["--import-mode", "importlib", "-W", "error::UserWarning", "-x", "--tb=short",
                                    "--doctest-report", "ndiff"])
    assert kept == ["--import-mode", "importlib", "-W", "error::UserWarning"]
    assert [d.split(":")[0] for d in dropped] == ["-x", "--tb=short", "--doctest-report ndiff"]


def test_imported_test_modules_are_found_by_absolute_and_relative_imports() -> None:
    tests = {"tests/pkg/test_base.py": "class TestBase: ...\n", "tests/pkg/test_a.py": "", "tests/test_c.py": ""}
    src = "from pkg.test_base import TestBase\nfrom . import test_a\nimport os\n"
    assert imported_tests("tests/pkg/test_x.py", src, tests) == {"tests/pkg/test_base.py": {"TestBase"},
                                                                  "tests/pkg/test_a.py": set()}
    assert imported_tests("tests/pkg/test_x.py", "from .test_base import TestBase as B\n", tests) == {
        "tests/pkg/test_base.py": {"TestBase"}}
    assert imported_tests("tests/pkg/test_x.py", "from ..test_c import helper\n", tests) == {
        "tests/test_c.py": {"helper"}}
