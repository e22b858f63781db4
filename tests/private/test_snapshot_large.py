"""from-repo on a package whose modules are larger than the old 64,000-byte per-file limit: source of any size is
kept (a big main module, a generated table module), only data files are capped (per file unless a source names
them, and all together), and a baseline that cannot import the project's own module says so instead of advising
``--requirement`` for the project itself. The fixture package is built in tmp_path at test time."""

from __future__ import annotations

from pathlib import Path

import pytest

import sandgym.private.snapshot as snapshot
from sandgym.agents.scripted import NoopAgent, OracleAgent, run_episode
from sandgym.errors import TaskError
from sandgym.private.fromrepo import FromRepoConfig, FromRepoResult, diagnose, from_repo
from sandgym.private.snapshot import read_repo

OLD_LIMIT = 64_000

CORE_HEAD = '''"""Text helpers: the package's main module (padded past 64 KB with documented helpers, as real ones are)."""

from bigpkg.table import WIDTHS


def clamp(value, low, high):
    """``value`` limited to the closed range [low, high]."""
    if value < low:
        return low
    if value > high:
        return high
    return value


def mean(values):
    """The arithmetic mean of a non-empty sequence of numbers."""
    total = 0
    for v in values:
        total += v
    return total / len(values)


def text_width(text):
    """Display columns of ``text``: each character's width from the generated table, 1 when it is not listed."""
    width = 0
    for ch in text:
        width += WIDTHS.get(ord(ch), 1)
    return width
'''

TESTS = '''from pathlib import Path

from bigpkg import clamp, mean, text_width

CASES = Path(__file__).parent / "data" / "mean_cases.txt"


def test_clamp():
    assert clamp(5, 0, 10) == 5
    assert clamp(-3, 0, 10) == 0
    assert clamp(42, 0, 10) == 10


def test_mean_small():
    assert mean([1, 2, 3]) == 2
    assert mean([4]) == 4


def test_mean_from_the_data_file():  # the data file is over the per-file cap, and named here: it is kept
    lines = CASES.read_text().splitlines()
    assert len(lines) > 1000
    for line in lines[:50]:
        *values, expected = (int(x) for x in line.split())
        assert mean(values) == expected


def test_text_width():
    assert text_width("ab") == 2
    assert text_width("\\u4e00\\u4e01") == 4
    assert text_width("") == 0
'''


def _padding(n: int) -> str:
    """``n`` documented helper functions that no test names (real code, not a comment blob)."""
    return "".join(
        f'\n\ndef scaled_offset_{i}(value, factor={i % 7 + 1}):\n'
        f'    """Return ``value`` times {i % 7 + 1} plus {i}: one of a family of generated adapters kept for old\n'
        f'    callers of the public helpers above, each with its own offset so that none is a copy of another."""\n'
        f'    return value * factor + {i}\n' for i in range(n))


def _build(root: Path) -> Path:
    files = {
        "pyproject.toml": "[project]\nname = 'bigpkg'\nversion = '1.0'\n",
        "bigpkg/__init__.py": "from bigpkg.core import clamp, mean, text_width\n",
        "bigpkg/core.py": CORE_HEAD + _padding(300),
        # a generated table module, as unicode-width packages ship: data, but Python the package imports
        "bigpkg/table.py": "WIDTHS = {\n" + "".join(f"    {cp}: 2,\n" for cp in range(0x4E00, 0x4E00 + 6000)) + "}\n",
        "tests/test_core.py": TESTS,
        "tests/data/mean_cases.txt": "".join(f"{i} {i + 2} {i + 4} {i + 2}\n" for i in range(6000)),
    }
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    (root / "tests/data/unused_blob.bin").write_bytes(bytes(range(256)) * 300)  # 76,800 bytes no source names
    (root / "bigpkg/assets").mkdir()
    (root / "bigpkg/assets/small.bin").write_bytes(b"\x00\x01" * 10)
    return root


def test_source_of_any_size_is_kept_and_only_data_is_capped(tmp_path: Path) -> None:
    repo = _build(tmp_path)
    assert (repo / "bigpkg/core.py").stat().st_size > OLD_LIMIT and (repo / "bigpkg/table.py").stat().st_size > OLD_LIMIT
    snap = read_repo(repo)
    assert {"bigpkg/__init__.py", "bigpkg/core.py", "bigpkg/table.py"} <= set(snap.files)
    assert snap.files["bigpkg/core.py"] == (repo / "bigpkg/core.py").read_text()
    assert "tests/data/mean_cases.txt" in snap.support  # over the per-file cap, but the tests name it
    assert snap.data == {"bigpkg/assets/small.bin": b"\x00\x01" * 10}
    reasons = dict(snap.skipped)
    assert set(reasons) == {"tests/data/unused_blob.bin"}, snap.skipped
    assert "over the 64000-byte cap per data file" in reasons["tests/data/unused_blob.bin"]
    assert "--max-file-kb" in reasons["tests/data/unused_blob.bin"]


def test_all_data_together_is_capped_smallest_first(tmp_path: Path) -> None:
    repo = _build(tmp_path)
    snap = read_repo(repo, max_file_bytes=100_000, max_data_bytes=50_000)
    assert "bigpkg/assets/small.bin" in snap.data  # 20 bytes: fits first
    reasons = dict(snap.skipped)
    assert "tests/data/mean_cases.txt" not in snap.support and "tests/data/unused_blob.bin" not in snap.support_data
    for path in ("tests/data/mean_cases.txt", "tests/data/unused_blob.bin"):
        assert "cap on all data files (--max-data-mb)" in reasons[path], reasons
    assert "bigpkg/core.py" in snap.files  # source never counts against the data caps


def test_more_source_than_a_snapshot_can_carry_is_refused_by_name(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _build(tmp_path)
    monkeypatch.setattr(snapshot, "MAX_SOURCE_BYTES", 100_000)
    with pytest.raises(TaskError, match=r"bytes of Python source, over 100000.*the largest: bigpkg/table.py, "
                                        r"bigpkg/core.py.*point PATH at the project's own folder"):
        read_repo(repo)


def test_diagnose_tells_the_projects_own_modules_from_dependencies(tmp_path: Path) -> None:
    repo = _build(tmp_path)
    (repo / "bigpkg/_native.cpython-312-x86_64-linux-gnu.so").write_bytes(b"\x7fELF\x00")
    (repo / "lib/vendored").mkdir(parents=True)
    (repo / "lib/vendored/__init__.py").write_text("X = 1\n")
    snap = read_repo(repo)
    found = diagnose(["ModuleNotFoundError: No module named 'bigpkg._native'",
                      "ModuleNotFoundError: No module named 'freezegun'",
                      "ModuleNotFoundError: No module named 'vendored'"], snap)
    assert found["missing_modules"] == ["freezegun"]  # only a real dependency is one to install
    own = {entry["module"]: entry for entry in found["missing_own_modules"]}
    assert set(own) == {"bigpkg._native", "vendored"}
    native = own["bigpkg._native"]
    assert native["skipped"] == [["bigpkg/_native.cpython-312-x86_64-linux-gnu.so", "compiled build output"]]
    assert "left out bigpkg/_native.cpython-312-x86_64-linux-gnu.so (compiled build output)" in native["hint"]
    assert "not importable from the workspace root" in own["vendored"]["hint"]
    for entry in own.values():
        assert "not a package to install with --requirement" in entry["hint"] and "-r " not in entry["hint"]


def _sandbox_or_skip() -> None:
    from sandgym.sandbox import LocalSandbox

    try:
        LocalSandbox().close()
    except Exception as exc:  # no namespaces here: the sandbox's own tests cover that
        pytest.skip(f"local sandbox unavailable: {exc}")


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> FromRepoResult:
    _sandbox_or_skip()
    repo = _build(tmp_path_factory.mktemp("bigpkg"))
    return from_repo(FromRepoConfig(repo=str(repo), out=str(repo / "out"), name="bigpkg", seed=0, max_tasks=4))


def test_tasks_come_from_the_large_module(made: FromRepoResult) -> None:
    assert made.baseline["passed"] == made.baseline["collected"] == 4, made.baseline
    assert made.baseline["missing_modules"] == [] and made.baseline["missing_own_modules"] == []
    assert made.made == 4, made.report()["discards"]
    assert {t.metadata["entry_file"] for t in made.tasks} == {"bigpkg/core.py"}
    for t in made.tasks:
        assert len(t.reference.files["bigpkg/core.py"]) > OLD_LIMIT  # type: ignore[union-attr]
        assert len(t.files["bigpkg/table.py"]) > OLD_LIMIT
        assert "tests/data/mean_cases.txt" in t.verifier.tests


def test_oracle_solves_and_noop_fails(made: FromRepoResult) -> None:
    from sandgym.envs.tool_env import ToolEnv

    env = ToolEnv(tasks=list(made.tasks))
    try:
        for t in made.tasks:
            assert run_episode(env, OracleAgent(), t).success, t.id
            assert not run_episode(env, NoopAgent(), t).success, t.id
    finally:
        env.close()


def test_cli_names_the_own_module_left_out_and_never_advises_installing_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _sandbox_or_skip()
    from sandgym.cli import main

    repo = _build(tmp_path / "repo")
    (repo / "bigpkg/__init__.py").write_text("from bigpkg._native import fast\nfrom bigpkg.core import clamp, mean, "
                                             "text_width\n")
    (repo / "bigpkg/_native.cpython-312-x86_64-linux-gnu.so").write_bytes(b"\x7fELF\x00")
    code = main(["tasks", "from-repo", str(repo), "--out", str(tmp_path / "out"), "--max-tasks", "1"])
    out = capsys.readouterr().out
    assert code == 1  # no task: the package does not import
    assert "the project's own module 'bigpkg._native' did not import" in out, out
    assert "bigpkg/_native.cpython-312-x86_64-linux-gnu.so (compiled build output)" in out
    assert "-r bigpkg" not in out and "missing modules: bigpkg" not in out
