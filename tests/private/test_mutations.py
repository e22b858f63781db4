"""Mutations, body removal, hidden-test selection and the repository snapshot (no sandbox)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sandgym.errors import TaskError
from sandgym.private.fromrepo import split_files, split_of, split_units
from sandgym.private.snapshot import read_repo, select_tests
from sandgym.tasks.mutations import MUTATION_OPERATORS, bug_mutations, find_targets, remove_body

SRC = '''"""Module."""


def f(xs, n):
    """Docstring stays."""
    total = 0
    for i in range(len(xs)):
        if xs[i] < n:
            total = total + max(xs[i], 1)
    return total


def one_liner(x): return x


def stub():
    """Only a docstring."""


class C:
    def m(self, a, b):
        # comment kept
        return a * b
'''


def test_targets_skip_stubs_and_one_liners() -> None:
    assert [t.qualname for t in find_targets(SRC, "m.py")] == ["f", "C.m"]
    assert find_targets("def broken(:\n", "x.py") == []


def test_remove_body_keeps_signature_and_docstring() -> None:
    target = find_targets(SRC, "m.py")[0]
    mut = remove_body(SRC, target)
    assert '    """Docstring stays."""\n    raise NotImplementedError\n' in mut.source
    assert "def f(xs, n):" in mut.source and "total = 0" not in mut.source and "def one_liner" in mut.source
    ast.parse(mut.source)
    method = remove_body(SRC, find_targets(SRC, "m.py")[1])
    assert "        raise NotImplementedError\n" in method.source and "a * b" not in method.source


def test_every_operator_applies_once_and_parses() -> None:
    muts = bug_mutations(SRC, find_targets(SRC, "m.py")[0], seed=1)
    ops = {m.operator for m in muts}
    assert ops == set(MUTATION_OPERATORS)
    assert [m.operator for m in muts[: len(ops)]] == list(dict.fromkeys(m.operator for m in muts))[: len(ops)]
    original = ast.dump(ast.parse(SRC))
    for m in muts:
        assert ast.dump(ast.parse(m.source)) != original
        diff = [(a, b) for a, b in zip(SRC.splitlines(), m.source.splitlines(), strict=True) if a != b]
        assert len(diff) == 1  # one line changed, comments and formatting elsewhere intact
    flip = next(m for m in muts if m.operator == "flip_comparison")
    assert (flip.before, flip.after) == ("xs[i] < n", "xs[i] >= n")
    swap = next(m for m in muts if m.operator == "swap_arguments")
    assert swap.after == "max(1, xs[i])"
    assert bug_mutations(SRC, find_targets(SRC, "m.py")[0], seed=1) == muts  # seeded, deterministic


def test_wrong_operator_keeps_precedence() -> None:
    src = "def g(a, b, c):\n    y = 0\n    return a - b * c\n"
    muts = [m for m in bug_mutations(src, find_targets(src)[0]) if m.operator == "wrong_operator"]
    assert "return a - (b + c)" in {m.source.splitlines()[-1].strip() for m in muts}


TESTS = '''import pytest


def helper():
    return 1


def test_a():
    assert helper()


def test_b():
    assert True


class TestBase:
    def test_x(self):
        pass

    def test_y(self):
        pass


class TestChild(TestBase):
    pass
'''


def test_select_tests_keeps_only_chosen_and_helpers() -> None:
    collected = {"test_a", "test_b", "TestBase::test_x", "TestBase::test_y", "TestChild::test_x",
                 "TestChild::test_y"}
    out = select_tests(TESTS, {"test_a", "TestChild::test_x"}, collected)
    tree = ast.parse(out)
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert names == {"helper", "test_a", "TestBase", "TestChild"}  # the base stays: the child inherits test_x
    assert "def test_x" in out and "def test_y" not in out and "def test_b" not in out
    only_a = select_tests(TESTS, {"test_a"}, collected)
    assert "class TestBase" not in only_a and "class TestChild" not in only_a


def test_select_tests_keeps_a_test_that_a_kept_test_calls() -> None:
    src = ("def test_valid(check=len, empty=0):\n    assert check([]) == empty\n\n\n"
           "def test_partial():\n    test_valid(check=lambda x: 0)\n\n\ndef test_other():\n    pass\n")
    out = select_tests(src, {"test_partial"}, {"test_valid", "test_partial", "test_other"})
    assert "def test_valid" in out and "def test_partial" in out and "def test_other" not in out


def test_snapshot_skips_and_flattens(tmp_path: Path) -> None:
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "__init__.py").write_text("X = 1\n")
    (tmp_path / "src" / "pkg" / "big.dat").write_text("x" * 5000 + "\n")  # data over the cap, named by no source
    (tmp_path / "src" / "pkg" / "bin.py").write_bytes(b"\0\1\2")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "hook.py").write_text("print(1)\n")
    (tmp_path / "build" / "lib").mkdir(parents=True)
    (tmp_path / "build" / "lib" / "copy.py").write_text("X = 1\n")
    for sub in ("tests/unit", "tests/integration"):
        (tmp_path / sub).mkdir(parents=True)
        (tmp_path / sub / "test_pkg.py").write_text("from pkg import X\n\n\ndef test_x():\n    assert X == 1\n")
    (tmp_path / "tests" / "conftest.py").write_text("")
    snap = read_repo(tmp_path, max_file_bytes=1000)
    assert set(snap.files) == {"pkg/__init__.py"}
    assert snap.repo_path("pkg/__init__.py") == "src/pkg/__init__.py"
    assert set(snap.tests) == {"tests/unit/test_pkg.py", "tests/integration/test_pkg.py"}  # layout kept
    reasons = dict(snap.skipped)
    assert "over the 1000-byte cap" in reasons["src/pkg/big.dat"] and reasons["src/pkg/bin.py"] == "binary"
    assert "tests/conftest.py" in snap.support and "tests/conftest.py" not in snap.files
    fewer = read_repo(tmp_path, max_file_bytes=1000, exclude_tests=("tests/integration/*",))
    assert set(fewer.tests) == {"tests/unit/test_pkg.py"}
    assert ("tests/integration/test_pkg.py", "excluded by --exclude-tests") in fewer.skipped


def test_snapshot_errors_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="not a folder"):
        read_repo(tmp_path / "missing")
    (tmp_path / "m.py").write_text("X = 1\n")
    with pytest.raises(TaskError, match="no pytest files"):
        read_repo(tmp_path)


def test_split_whole_files_both_sides() -> None:
    files = [f"pkg/m{i}.py" for i in range(10)]
    split = split_files(files, 0.3, seed=0)
    assert sum(v == "heldout" for v in split.values()) == 3 and split == split_files(files, 0.3, seed=0)
    assert set(split_files(files[:2], 0.1, seed=0).values()) == {"train", "heldout"}
    assert set(split_files(files, 0.0, seed=0).values()) == {"train"}


def test_a_one_file_project_is_split_by_top_level_definition() -> None:
    src = "".join(f"def f{i}(x):\n    y = x + {i}\n    return y\n\n" for i in range(6))
    src += "class C:\n    def m(self):\n        z = 1\n        return z\n\n    def n(self):\n        return 2\n"
    split = split_units({"pkg/__init__.py": src}, 0.3, seed=0)
    assert set(split.values()) == {"train", "heldout"} and sum(v == "heldout" for v in split.values()) == 2
    methods = {split_of(split, t) for t in find_targets(src, "pkg/__init__.py") if t.qualname.startswith("C.")}
    assert len(methods) == 1  # a class's methods stay on one side
    two = {"a.py": src, "b.py": src}
    assert split_units(two, 0.3, seed=0) == split_files(list(two), 0.3, seed=0)  # two files: whole files
    assert set(split_units({"pkg/__init__.py": src}, 0.0, seed=0).values()) == {"train"}


def test_property_and_setter_are_separate_targets() -> None:
    src = ("class P:\n    @property\n    def x(self):\n        y = 1\n        return y\n\n    @x.setter\n"
           "    def x(self, v):\n        self._x = v\n        return None\n")
    targets = find_targets(src)
    assert [(t.qualname, t.lineno) for t in targets] == [("P.x", 3), ("P.x", 8)]
    assert "self._x = v" in remove_body(src, targets[0]).source
    assert "self._x = v" not in remove_body(src, targets[1]).source
