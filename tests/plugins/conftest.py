"""The example plugin (examples/plugin_env) pip-installed offline into a temp dir, for the whole package's tests."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest

from sandgym.envs import host_verifiers, registration
from sandgym.envs.registration import register_plugins
from sandgym.tasks import registry

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugin_env"


def _reset_plugin_caches() -> None:
    for env_id in [k for k in gym.registry if k.startswith("sandgym_plugin_example/")]:
        del gym.registry[env_id]
        registration._plugin_ids.pop(env_id, None)
    registry._plugin_suites.cache_clear()
    host_verifiers._loaded_plugins.clear()
    for name in [n for n in host_verifiers.HOST_VERIFIERS if n.startswith("plugin_example.")]:
        del host_verifiers.HOST_VERIFIERS[name]


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The plugin's install dir (on ``sys.path`` while the tests run; entry points found through its dist-info)."""
    src = tmp_path_factory.mktemp("src") / "plugin_env"
    shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "--quiet",
         "--disable-pip-version-check", "--target", str(target), str(src)],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr
    sys.path.insert(0, str(target))
    importlib.invalidate_caches()
    _reset_plugin_caches()
    register_plugins()  # `import sandgym` ran before the plugin was on sys.path
    yield target
    sys.path.remove(str(target))
    _reset_plugin_caches()
    for name in [m for m in sys.modules if m.startswith("sandgym_plugin_example")]:
        del sys.modules[name]


@pytest.fixture(scope="session")
def plugin_env(installed: Path) -> dict[str, str]:
    """Environment variables for a ``python -m sandgym`` subprocess that sees the plugin."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(installed), os.environ.get("PYTHONPATH", "")]))
