"""from-repo on a project laid out like real ones: a src layout, conftest fixtures, a helper module and a data
file under tests/, package-relative imports, a test module importing another one's test class, and the project's
own pytest configuration (pyproject.toml: warnings as errors, declared markers under --strict-markers). Everything
the tests need travels with them as hidden files."""

from __future__ import annotations

import pytest

from sandgym.agents.scripted import NoopAgent, OracleAgent, run_episode
from sandgym.private.fromrepo import FromRepoConfig, diagnose, from_repo

FILES = {
    "pyproject.toml": (
        "[project]\nname = 'shapes'\nversion = '0.1'\n\n[tool.pytest.ini_options]\n"
        "addopts = '--strict-markers --cov=shapes -p no:cacheprovider'\nfilterwarnings = ['error']\n"
        "markers = ['slow: a slow test']\ntestpaths = ['tests']\n"),
    "src/shapes/__init__.py": "from shapes.area import legacy_area, rect_area, square_area, total_area\n",
    "src/shapes/area.py": (
        "def rect_area(w, h):\n    \"\"\"Area of a w x h rectangle.\"\"\"\n    return w * h\n\n\n"
        "def square_area(s):\n    \"\"\"Area of a square of side s.\"\"\"\n    return rect_area(s, s)\n\n\n"
        "def total_area(sizes):\n    \"\"\"Sum of the areas of (w, h) pairs.\"\"\"\n    total = 0\n"
        "    for w, h in sizes:\n        total += rect_area(w, h)\n    return total\n\n\n"
        "def legacy_area(w, h):\n    \"\"\"Deprecated: rect_area.\"\"\"\n    import warnings\n\n"
        "    warnings.warn('use rect_area', DeprecationWarning)\n    return rect_area(w, h)\n"),
    "tests/__init__.py": "",
    "tests/conftest.py": (
        "import pytest\n\n\n@pytest.fixture\ndef unit_square():\n    return (1, 1)\n\n\n"
        "@pytest.fixture(autouse=True)\ndef _shapes_in_doctests(doctest_namespace):  # the doctest plugin's fixture\n"
        "    doctest_namespace['unit'] = 1\n"),
    "tests/helpers.py": "def read_sizes(path):\n    return [tuple(map(int, line.split())) for line in open(path)]\n",
    "tests/data/sizes.txt": "2 3\n4 5\n",
    "tests/unit/__init__.py": "",
    "tests/unit/test_area.py": (
        "from pathlib import Path\n\nimport pytest\n\nfrom shapes import legacy_area, rect_area, square_area, total_area\n\n"
        "from ..helpers import read_sizes\n\nDATA = Path(__file__).parent.parent / 'data' / 'sizes.txt'\n\n\n"
        "def test_rect(unit_square):\n    assert rect_area(*unit_square) == 1\n    assert rect_area(2, 3) == 6\n\n\n"
        "def test_square():\n    assert square_area(3) == 9\n\n\n"
        "def test_total_from_data():\n    assert total_area(read_sizes(DATA)) == 26\n\n\n"
        "@pytest.mark.parametrize('impl', [rect_area, pytest.param(None, marks=pytest.mark.skipif(True, "
        "reason='no speedups'))])\ndef test_rect_impls(impl):  # one instance always skipped\n"
        "    assert impl(2, 5) == 10\n\n\n"
        "@pytest.mark.slow\ndef test_legacy_warns():  # passes only with the project's filterwarnings = error\n"
        "    with pytest.raises(DeprecationWarning):\n        legacy_area(1, 2)\n"),
    "tests/unit/test_base.py": (
        "from shapes import square_area\n\n\nclass TestSquares:\n    factor = 1\n\n"
        "    def test_square_scaled(self):\n        assert square_area(2 * self.factor) == 4 * self.factor ** 2\n"),
    "tests/unit/test_scaled.py": (
        "from shapes import rect_area\nfrom tests.unit.test_base import TestSquares\n\n\n"
        "class TestScaled(TestSquares):\n    factor = 3\n\n"
        "    def test_rect_scaled(self):\n        assert rect_area(self.factor, 2) == 2 * self.factor\n"),
    "src/shapes/scale.py": (
        "from pathlib import Path\n\n\ndef unit_scale():\n    \"\"\"The scale in the package's binary data file.\"\"\"\n"
        "    raw = (Path(__file__).parent / 'data' / 'scale.bin').read_bytes()\n    return raw[1] * raw[2]\n"),
    "tests/unit/test_scale.py": (
        "from pathlib import Path\n\nfrom shapes.scale import unit_scale\n\n\n"
        "def test_scale_matches_the_binary_fixture():\n"
        "    raw = (Path(__file__).parent.parent / 'data' / 'expected.bin').read_bytes()\n"
        "    assert unit_scale() == raw[0]\n"),
}
BINARY = {"src/shapes/data/scale.bin": b"\x00\x02\x03\xff", "tests/data/expected.bin": b"\x06\x00\xfe",
          "src/shapes/_speedups.so": b"\x7fELF\x00"}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from sandgym.sandbox import LocalSandbox

    try:
        LocalSandbox().close()
    except Exception as exc:  # no namespaces here: the sandbox's own tests cover that
        pytest.skip(f"local sandbox unavailable: {exc}")
    repo = tmp_path_factory.mktemp("shapes")
    for path, text in FILES.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    for path, raw in BINARY.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_bytes(raw)
    return from_repo(FromRepoConfig(repo=str(repo), out=str(repo / "out"), name="shapes", seed=0,
                                    kinds=("reimplement", "bugfix")))


def test_baseline_collects_and_passes_everything(made) -> None:  # type: ignore[no-untyped-def]
    assert (made.baseline["collected"], made.baseline["passed"]) == (11, 10), made.baseline  # one skipped
    cfg = made.baseline["pytest_config"]
    assert cfg["source"] == "pyproject.toml [tool.pytest.ini_options]"
    assert cfg["options"] == {"filterwarnings": "error", "markers": "slow: a slow test", "addopts": "--strict-markers"}
    assert any(d.startswith("--cov=shapes") for d in cfg["dropped"]) and any(d.startswith("testpaths") for d in
                                                                             cfg["dropped"])


def test_a_test_with_a_skipped_instance_decides_tasks(made) -> None:  # type: ignore[no-untyped-def]
    users = [t for t in made.tasks if "tests/unit/test_area.py::test_rect_impls" in t.metadata["hidden_tests"]]
    assert users, made.report()["discards"]  # its passing instance counts; the skipped one is no fault


def test_the_projects_pytest_configuration_decides_tasks(made) -> None:  # type: ignore[no-untyped-def]
    legacy = [t for t in made.tasks if t.metadata["function"] == "legacy_area"]
    assert legacy, made.report()["discards"]
    for t in legacy:
        assert "filterwarnings = error" in t.verifier.tests["pytest.ini"]


def test_binary_package_data_and_test_data_travel_as_bytes(made) -> None:  # type: ignore[no-untyped-def]
    scale = [t for t in made.tasks if t.metadata["function"] == "unit_scale"]
    assert scale, made.report()["discards"]
    for t in made.tasks:
        assert t.workspace_files["shapes/data/scale.bin"] == b"\x00\x02\x03\xff"
        assert t.verifier.hidden_files["tests/data/expected.bin"] == b"\x06\x00\xfe"
        assert "shapes/_speedups.so" not in t.workspace_files
    assert ("src/shapes/_speedups.so", "compiled build output") in made.skipped


def test_a_test_module_imported_by_another_travels_with_it(made) -> None:  # type: ignore[no-untyped-def]
    scaled = [t for t in made.tasks if "tests/unit/test_scaled.py" in t.verifier.tests]
    assert scaled, made.report()["discards"]
    for t in scaled:
        assert "class TestSquares" in t.verifier.tests["tests/unit/test_base.py"]


def test_tasks_carry_what_the_tests_need(made) -> None:  # type: ignore[no-untyped-def]
    assert made.tasks, made.report()["discards"]
    for t in made.tasks:
        hidden = set(t.verifier.tests)
        assert {"tests/conftest.py", "tests/helpers.py", "tests/data/sizes.txt", "pytest.ini"} <= hidden
        assert "shapes/area.py" in t.files and not any(p.startswith("tests/") for p in t.files)


def test_oracle_solves_and_noop_fails(made) -> None:  # type: ignore[no-untyped-def]
    from sandgym.envs.tool_env import ToolEnv

    env = ToolEnv(tasks=list(made.tasks))
    try:
        for t in made.tasks:
            assert run_episode(env, OracleAgent(), t).success, t.id
            assert not run_episode(env, NoopAgent(), t).success, t.id
    finally:
        env.close()


def test_the_baseline_says_which_modules_are_missing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from sandgym.sandbox import LocalSandbox

    try:
        LocalSandbox().close()
    except Exception as exc:
        pytest.skip(f"local sandbox unavailable: {exc}")
    files = {"calc.py": "def add(a, b):\n    return a + b\n",
             "tests/test_ok.py": "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
             "tests/test_frozen.py": "import freezegun_not_installed\nfrom calc import add\n\n\n"
                                     "def test_add_frozen():\n    assert add(2, 2) == 4\n"}
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    made = from_repo(FromRepoConfig(repo=str(tmp_path), out=str(tmp_path / "out"), kinds=("reimplement",)))
    assert made.baseline["passed"] == 1 and made.baseline["missing_modules"] == ["freezegun_not_installed"]
    assert any("freezegun_not_installed" in e for e in made.baseline["collection_errors"])
    assert diagnose(["URLError: <urlopen error [Errno -3] Temporary failure in name resolution>"]) == {
        "missing_modules": [], "missing_own_modules": [], "network_errors": 1}
