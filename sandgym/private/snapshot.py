"""Read a local Python repository into a small text snapshot: source files for the workspace, test files apart.

Skipped (and reported): VCS and build folders, caches, virtual environments, docs and examples, compiled build
outputs, binary files outside the package and its tests, and data over the caps. A ``src/`` layout is flattened
(``src/pkg/x.py`` -> ``pkg/x.py``) so that the package imports from the workspace root, which is on ``sys.path`` when
hidden tests run.

Sizes: source (``.py``/``.pyi`` files, tests and helpers included, and the root ``pyproject.toml``/``setup.cfg``/
``README``) is kept whatever its size, since a package missing a module does not import: a 150 KB main module or a
generated 5 MB table module the package imports comes along (every task carries it), up to ``MAX_SOURCE_BYTES`` in
all, past which the snapshot is refused with the largest files named. Only data (the other files in a package or
under test folders, text or binary) is capped: a data file over ``max_file_bytes`` is left out unless some source
names it (``Path(__file__).parent / "IdnaTestV2.txt"``: the tests read it), and all data together stays within
``max_data_bytes`` (smallest files first); each file left out is listed with its reason.

Tests keep the repository's layout (``tests/unit/test_x.py`` stays that path), and what they need comes with them
as hidden support files: ``conftest.py`` at every level (the root one too), helper modules, ``__init__.py`` files
and data files under test folders (binary ones as bytes). The grader lays them out as they were, so fixtures,
package-relative imports and data paths work. Package data (non-Python files inside a package folder, text or
binary, e.g. compiled locale catalogues) goes to the workspace with the package; compiled build outputs never do. The repository's pytest configuration comes along as a root ``pytest.ini``
(``pytestcfg.py``).
"""

from __future__ import annotations

import ast
import fnmatch
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import sandgym.pysyntax as pysyntax
from sandgym.errors import TaskError
from sandgym.private.pytestcfg import PytestConfig, read_pytest_config

SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", "__pycache__", "build", "dist", ".tox", ".nox", ".venv", "venv", "env", "node_modules",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs", "docs", "doc", "examples", "benchmarks", "bench",
    "site-packages", ".github", ".idea", ".vscode",
})
TEXT_FILES = frozenset({"pyproject.toml", "setup.cfg", "README.md", "README.rst", "README.txt", "README"})
TEST_DIRS = frozenset({"tests", "test", "testing"})
SOURCE_SUFFIXES = frozenset({".py", ".pyi"})
DEFAULT_MAX_FILE_BYTES = 64_000
"""Per-file cap on data files that no source names (``--max-file-kb``); source is never capped per file."""
DEFAULT_MAX_DATA_BYTES = 10_000_000
"""Cap on all data files of a snapshot together (``--max-data-mb``)."""
MAX_SOURCE_BYTES = 64_000_000
"""Source past this (a vendored monorepo) is refused: every task carries the whole snapshot, and the sandbox's
workspace is a 256 MiB tmpfs (``Limits.workspace_mb``)."""


@dataclass(frozen=True)
class Snapshot:
    """A repository as text: ``files`` (workspace, no tests) and ``tests`` (flat hidden-test name -> source)."""

    root: str
    files: Mapping[str, str]
    tests: Mapping[str, str]
    """Test modules by their path in the repository (``tests/unit/test_x.py``)."""
    support: Mapping[str, str] = field(default_factory=dict)
    """What the tests need beside them (conftest.py files, helpers, ``__init__.py``, text data), by path."""
    skipped: tuple[tuple[str, str], ...] = ()
    """(path, reason) of every file left out."""
    renamed: Mapping[str, str] = field(default_factory=dict)
    """Workspace path -> repository path where they differ (``src/`` layout)."""
    pytest_config: PytestConfig | None = None
    """The repository's pytest settings (``pytest.ini``, ``pyproject.toml``, ``tox.ini`` or ``setup.cfg``)."""
    data: Mapping[str, bytes] = field(default_factory=dict)
    """Binary package data for the workspace (compiled locale catalogues, images), by workspace path."""
    support_data: Mapping[str, bytes] = field(default_factory=dict)
    """Binary files under test folders (ELF or image fixtures), by path: hidden like ``support``."""

    def repo_path(self, workspace_path: str) -> str:
        return self.renamed.get(workspace_path, workspace_path)

    def locate_module(self, module: str) -> tuple[list[str], list[tuple[str, str]]]:
        """Where the repository itself holds the top-level package or module of ``module`` (``pkg.sub`` ->
        ``pkg/...`` or ``pkg.py`` at any depth): (its source files in the snapshot, its files left out with their
        reasons). Both empty: the repository does not provide it (a dependency to install)."""
        top = module.split(".")[0]

        def inside(path: str) -> bool:
            parts = path.split("/")
            return top in parts[:-1] or parts[-1].split(".")[0] == top

        kept = sorted(p for p in {*self.files, *self.support, *self.tests} if p.endswith(".py") and inside(p))
        left_out = [(p, why) for p, why in self.skipped if inside(p) and
                    (p.endswith(tuple(SOURCE_SUFFIXES | COMPILED)) or top in p.split("/")[:-1])]
        return kept, left_out

    def source_files(self) -> list[str]:
        """Python files that may hold task targets (not tests, not build helpers)."""
        helpers = {"setup.py", "versioneer.py", "conftest.py", "noxfile.py", "tasks.py", "fabfile.py"}
        return sorted(p for p in self.files if p.endswith(".py") and Path(p).name not in helpers
                      and not Path(p).name.startswith("_version"))


def is_test_file(rel: Path) -> bool:
    name = rel.name
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _in_test_dir(rel: Path) -> bool:
    return any(part in TEST_DIRS for part in rel.parts[:-1])


COMPILED = frozenset({".so", ".pyd", ".dll", ".dylib", ".pyc", ".pyo", ".o", ".a"})
"""Build outputs: never carried (not portable, and rebuilt from source)."""


def _in_package(base: Path, rel: Path) -> bool:
    """Whether some folder above ``rel`` (inside the repository) is a Python package: its data files belong to it."""
    return any((base / Path(*rel.parts[:i]) / "__init__.py").is_file() for i in range(1, len(rel.parts)))


def read_repo(root: str | Path, *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
              max_data_bytes: int = DEFAULT_MAX_DATA_BYTES, exclude_tests: tuple[str, ...] = ()) -> Snapshot:
    """Snapshot a repository folder; TaskError when it is not a folder, holds no Python source or tests, or more
    source than ``MAX_SOURCE_BYTES``.

    ``max_file_bytes`` / ``max_data_bytes``: the caps on data (see the module docstring); source is never cut.
    ``exclude_tests``: glob patterns (``tests/test_version.py``, ``tests/slow/*``) of test files to leave out."""
    base = Path(root).resolve()
    if not base.is_dir():
        raise TaskError(f"repository path {str(root)!r} is not a folder; pass the root of a checked-out repository")
    src_layout = (base / "src").is_dir() and any((base / "src").glob("*/__init__.py"))
    files: dict[str, str] = {}
    tests: dict[str, str] = {}
    support: dict[str, str] = {}
    renamed: dict[str, str] = {}
    skipped: list[tuple[str, str]] = []
    pending: list[_Data] = []
    for path in sorted(base.rglob("*")):
        rel = path.relative_to(base)
        if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in rel.parts[:-1]) or not path.is_file():
            continue
        if path.is_symlink():
            skipped.append((rel.as_posix(), "symlink"))
            continue
        in_tests = _in_test_dir(rel) or rel.as_posix() == "conftest.py"
        source = path.suffix in SOURCE_SUFFIXES or rel.name in TEXT_FILES
        package_data = not in_tests and not source and _in_package(base, rel)
        if not (source or in_tests or package_data):
            continue
        if path.suffix in COMPILED:
            skipped.append((rel.as_posix(), "compiled build output"))
            continue
        if in_tests and rel.name == "pytest.ini":
            skipped.append((rel.as_posix(), "a nested pytest.ini (the root configuration applies)"))
            continue
        ws = rel.as_posix()
        if src_layout and rel.parts[0] == "src" and len(rel.parts) > 1:
            ws = Path(*rel.parts[1:]).as_posix()
        raw = path.read_bytes()
        if not source:  # data: placed after the caps below
            pending.append(_Data(rel.as_posix(), ws, raw, in_tests))
            continue
        text = _text(raw)
        if text is None:
            skipped.append((rel.as_posix(), "binary"))  # a binary .py
            continue
        if is_test_file(rel):
            if any(fnmatch.fnmatch(rel.as_posix(), pattern) for pattern in exclude_tests):
                skipped.append((rel.as_posix(), "excluded by --exclude-tests"))
            else:
                tests[rel.as_posix()] = text
            continue
        if in_tests:
            support[rel.as_posix()] = text
            if _in_test_dir(rel):
                continue  # the root conftest.py is also part of the project the agent sees
        if ws != rel.as_posix():
            renamed[ws] = rel.as_posix()
        files[ws] = text
    if not any(p.endswith(".py") for p in files):
        raise TaskError(f"{base}: no Python source files found (skipped: {len(skipped)}); point at a Python repo")
    if not tests:
        raise TaskError(f"{base}: no pytest files (test_*.py or *_test.py) found; from-repo needs the repo's tests")
    _check_source_size(base, {**files, **tests, **support})
    sources = [*files.values(), *tests.values(), *support.values()]
    data: dict[str, bytes] = {}
    support_data: dict[str, bytes] = {}
    for item in _cap_data(pending, sources, max_file_bytes, max_data_bytes, skipped):
        text = _text(item.raw)
        if item.in_tests:  # beside the tests, hidden: text ones with the support files, binary ones as bytes
            if text is None:
                support_data[item.rel] = item.raw
            else:
                support[item.rel] = text
            continue
        if item.ws != item.rel:
            renamed[item.ws] = item.rel
        if text is None:  # binary package data (compiled locale catalogues, images)
            data[item.ws] = item.raw
        else:
            files[item.ws] = text
    return Snapshot(str(base), dict(sorted(files.items())), tests, dict(sorted(support.items())),
                    tuple(sorted(skipped)), renamed, read_pytest_config(base), data, support_data)


@dataclass(frozen=True)
class _Data:
    """A data file (not source) waiting for the caps: repository path, workspace path, bytes, under a test folder."""

    rel: str
    ws: str
    raw: bytes
    in_tests: bool


def _text(raw: bytes) -> str | None:
    """``raw`` as UTF-8 text, or None for a binary file (a NUL byte, or not UTF-8)."""
    if b"\0" in raw:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _cap_data(pending: list[_Data], sources: list[str], max_file_bytes: int, max_data_bytes: int,
              skipped: list[tuple[str, str]]) -> list[_Data]:
    """The data files kept: each within ``max_file_bytes`` unless a source names it (the tests read it), and all
    within ``max_data_bytes``, smallest first; the others go to ``skipped`` with the cap that left them out."""
    joined = ""
    fits: list[_Data] = []
    for item in pending:
        if len(item.raw) > max_file_bytes:
            joined = joined or "\n".join(sources)
            if Path(item.rel).name not in joined:
                skipped.append((item.rel, f"data file of {len(item.raw)} bytes, over the {max_file_bytes}-byte cap "
                                          "per data file, and no source names it (--max-file-kb)"))
                continue
        fits.append(item)
    kept: list[_Data] = []
    total = 0
    for item in sorted(fits, key=lambda d: (len(d.raw), d.rel)):
        if total + len(item.raw) > max_data_bytes:
            skipped.append((item.rel, f"data file of {len(item.raw)} bytes, past the snapshot's {max_data_bytes}-byte "
                                      "cap on all data files (--max-data-mb)"))
            continue
        total += len(item.raw)
        kept.append(item)
    return kept


def _check_source_size(base: Path, sources: Mapping[str, str]) -> None:
    total = sum(len(text.encode("utf-8")) for text in sources.values())
    if total > MAX_SOURCE_BYTES:
        largest = sorted(sources, key=lambda p: -len(sources[p]))[:5]
        raise TaskError(f"{base}: {total} bytes of Python source, over {MAX_SOURCE_BYTES} (every task carries the "
                        f"whole snapshot); the largest: {', '.join(largest)}; point PATH at the project's own folder "
                        "(its package and its tests), not at a folder of vendored or generated code")


# ---- hidden-test selection ------------------------------------------------------------------------------------
def test_key(nodeid: str) -> tuple[str, str]:
    """``file.py::Class::test[param]`` -> (``file.py``, ``Class::test``)."""
    file, _, rest = nodeid.partition("::")
    return file, re.sub(r"\[.*\]$", "", rest)


def select_tests(source: str, keep: set[str], collected: set[str]) -> str:
    """``source`` without the collected tests (``name`` or ``Class::name`` keys) that are not in ``keep``.

    Everything else (imports, helpers, fixtures) is left as it was. A test method stays when its name is kept under
    any class (subclasses inherit it); a class goes only when neither it nor a kept subclass needs it.
    """
    tree = pysyntax.parse(source)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    kept_methods = {k.rpartition("::")[2] for k in keep if "::" in k}
    needed = {k.partition("::")[0] for k in keep if "::" in k}
    todo = list(needed)
    while todo:  # bases of kept classes are needed too
        cls = classes.get(todo.pop())
        for base in cls.bases if cls else []:
            if isinstance(base, ast.Name) and base.id not in needed:
                needed.add(base.id)
                todo.append(base.id)
    collected_methods = {k.rpartition("::")[2] for k in collected if "::" in k}
    keep = keep | _tests_used_as_helpers(tree, keep, collected, needed)
    drop: list[tuple[int, int]] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in collected \
                and node.name not in keep:
            drop.append(_span(node))
        elif isinstance(node, ast.ClassDef) and any(k.startswith(node.name + "::") for k in collected):
            if node.name not in needed:
                drop.append(_span(node))
                continue
            drop += [_span(m) for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and m.name in collected_methods and m.name not in kept_methods]
    lines = source.splitlines(keepends=True)
    for start, end in sorted(drop, reverse=True):
        indent = lines[start - 1][: len(lines[start - 1]) - len(lines[start - 1].lstrip())]
        lines[start - 1:end] = [f"{indent}pass\n"] if indent else []
    return "".join(lines)


def _tests_used_as_helpers(tree: ast.Module, keep: set[str], collected: set[str], needed: set[str]) -> set[str]:
    """Collected test functions that kept tests call (``def test_b(): test_a(check=other)``): they must stay."""
    funcs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    todo = [n for n in tree.body if (isinstance(n, ast.ClassDef) and n.name in needed) or
            (isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in keep)]
    found: set[str] = set()
    while todo:
        for name in {n.id for n in ast.walk(todo.pop()) if isinstance(n, ast.Name)}:
            if name in collected and name in funcs and name not in keep and name not in found:
                found.add(name)
                todo.append(funcs[name])
    return found


def _span(node: ast.stmt) -> tuple[int, int]:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)]), node.end_lineno or node.lineno


def imported_tests(path: str, source: str, tests: Mapping[str, str]) -> dict[str, set[str]]:
    """Other test modules of ``tests`` that the test file ``path`` imports -> the names it takes from each.

    ``from test_pkg.test_base import TestBase`` or ``from .test_base import TestBase`` -> ``{".../test_base.py":
    {"TestBase"}}``; ``import test_pkg.test_base`` -> an empty set (the whole module). Matched by path suffix, as
    pytest's rootdir-relative imports resolve them.
    """
    try:
        tree = pysyntax.parse(source)
    except SyntaxError:
        return {}
    here = path.split("/")[:-1]
    wanted: list[tuple[list[str], set[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            wanted += [(a.name.split("."), set()) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = (here[: len(here) - node.level + 1] if node.level else []) + (node.module or "").split(".")
            base = [p for p in base if p]
            names = {a.name for a in node.names}
            wanted.append((base, names))
            wanted += [([*base, n], set()) for n in names]  # ``from pkg import test_mod``
    found: dict[str, set[str]] = {}
    for parts, names in wanted:
        if not parts:
            continue
        suffix = "/".join(parts) + ".py"
        for other in tests:
            if other != path and (other == suffix or other.endswith("/" + suffix)):
                found.setdefault(other, set()).update(names)
    return found


def with_imported_tests(names: set[str], tests: Mapping[str, str]) -> set[str]:
    """``names`` and every test module they import, transitively (``from test_pkg.test_base import TestBase``)."""
    todo, seen = list(names), set(names)
    while todo:
        name = todo.pop()
        for dep in imported_tests(name, tests[name], tests):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def keys_with_imports(keep: set[tuple[str, str]], tests: Mapping[str, str]) -> dict[str, set[str]]:
    """Test keys to keep per file: ``keep``, plus what other kept files import from test modules.

    A test module that another one imports is shipped too; a class imported from it keeps the tests that the
    importing file keeps by method name (its subclasses inherit them), the rest of its tests are dropped.
    """
    keys: dict[str, set[str]] = defaultdict(set)
    for f, k in keep:
        keys[f].add(k)
    changed = True
    while changed:
        changed = False
        for f in list(keys):
            methods = {k.rpartition("::")[2] for k in keys[f] if "::" in k}
            for dep, names in imported_tests(f, tests[f], tests).items():
                extra = {f"{n}::{m}" for n in names for m in methods} - keys[dep]
                if extra or dep not in keys:
                    keys[dep] |= extra
                    changed = True
    return dict(sorted(keys.items()))
