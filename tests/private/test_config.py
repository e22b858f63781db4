"""examples/from_repo.toml loads as a training config whose suite is a from-repo JSONL (train split)."""

from __future__ import annotations

from pathlib import Path

from sandgym.tasks.registry import load_suite
from sandgym.tasks.task import Reference, Task, Verifier
from sandgym.train.config import load_config

EXAMPLE = Path(__file__).parents[2] / "examples" / "from_repo.toml"


def test_example_config_loads() -> None:
    config = load_config(EXAMPLE)
    (domain,) = config.domains.mix
    assert domain.suite.endswith("tasks.jsonl:train") and "from_repo" in domain.suite
    assert "submit" in config.rollout.tools and config.rollout.max_turns > 1


def test_from_repo_style_jsonl_loads_by_split(tmp_path: Path) -> None:
    from sandgym.tasks.load import save_jsonl

    def task(i: int, split: str) -> Task:
        return Task(id=f"r/reimplement/m.f{i}", domain="coding", family="repo_reimplement", split=split,  # type: ignore[arg-type]
                    prompt="fix", verifier=Verifier(kind="tests", tests={"test_m.py": "def test_a(): pass\n"},
                                                    expected_tests=1),
                    files={"pkg/m.py": "x"}, reference=Reference(files={"pkg/m.py": "y"}))

    path = save_jsonl([task(0, "train"), task(1, "heldout"), task(2, "train")], tmp_path / "tasks.jsonl")
    assert [t.id for t in load_suite(f"{path}:train")] == ["r/reimplement/m.f0", "r/reimplement/m.f2"]
    assert [t.split for t in load_suite(f"{path}:heldout")] == ["heldout"]
