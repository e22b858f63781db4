"""Registers sandgym's environments with Gymnasium, and third-party ones from the ``sandgym.envs`` group.

A plugin package declares, in its ``pyproject.toml``::

    [project.entry-points."sandgym.envs"]
    my_envs = "my_pkg.envs:register"

Each entry point loads to either a callable (called with no arguments; it calls ``gymnasium.register`` itself), an
``EnvSpec``, or a dict of ``gymnasium.register`` keyword arguments (``id``, ``entry_point``, ``kwargs``, ...);
a list or tuple of these is also accepted. A broken plugin gives a warning, never a failed ``import sandgym``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

__all__ = ["BUILTIN_ENVS", "ENTRY_POINT_GROUP", "register_envs", "register_plugins", "plugin_env_ids",
           "describe"]

ENTRY_POINT_GROUP = "sandgym.envs"

BUILTIN_ENVS: Mapping[str, dict[str, Any]] = {
    "sandgym/Coding-v0": {
        "entry_point": "sandgym.envs.coding:CodingEnv",
        "kwargs": {"tasks": "coding:train"},
        "description": "implement or fix Python code in a workspace; hidden tests decide",
    },
    "sandgym/RepoFix-v0": {
        "entry_point": "sandgym.envs.coding:RepoFixEnv",
        "kwargs": {"tasks": "coding/repo_fix:train"},
        "description": "multi-file repo with a failing behaviour: explore, edit, test; regression tests hidden",
    },
    "sandgym/LongContext-v0": {
        "entry_point": "sandgym.envs.long_context:LongContextEnv",
        "kwargs": {"tasks": "long_context:train"},
        "description": "questions over 1K-64K-token documents, inline or only via read_file/grep",
    },
}

_plugin_ids: dict[str, str] = {}
"""env id -> entry point name, for ids registered by plugins."""


def register_envs() -> None:
    """Register every built-in env id, then the plugins; cheap (entry points are strings, nothing heavy loads)."""
    for env_id, spec in BUILTIN_ENVS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=spec["entry_point"], kwargs=dict(spec["kwargs"]),
                         disable_env_checker=True)
    register_plugins()


def _register_one(obj: Any, ep: EntryPoint) -> None:
    if isinstance(obj, (list, tuple)):
        for item in obj:
            _register_one(item, ep)
    elif isinstance(obj, EnvSpec):
        if obj.id not in gym.registry:
            gym.register(**{k: getattr(obj, k) for k in ("id", "entry_point", "max_episode_steps", "kwargs",
                                                          "nondeterministic", "disable_env_checker")})
        _plugin_ids[obj.id] = ep.name
    elif isinstance(obj, Mapping):
        if "id" not in obj or "entry_point" not in obj:
            raise TypeError(f"register kwargs need 'id' and 'entry_point', got keys {sorted(obj)}")
        if obj["id"] not in gym.registry:
            gym.register(**dict(obj))
        _plugin_ids[str(obj["id"])] = ep.name
    elif callable(obj):
        before = set(gym.registry)
        result = obj()
        if result is not None:
            _register_one(result, ep)
        for env_id in set(gym.registry) - before:
            _plugin_ids[env_id] = ep.name
    else:
        raise TypeError(
            f"entry point {ep.value!r} gave {type(obj).__name__}; expected a callable, an EnvSpec, "
            "a dict of gymnasium.register kwargs, or a list of these"
        )


def register_plugins() -> list[str]:
    """Load every ``sandgym.envs`` entry point not loaded yet; returns the ids plugins registered so far."""
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        key = f"{ep.name}={ep.value}"
        if key in _loaded:
            continue
        _loaded.add(key)
        try:
            _register_one(ep.load(), ep)
        except Exception as exc:  # a broken plugin must not break `import sandgym`
            warnings.warn(f"sandgym.envs plugin {ep.name!r} ({ep.value}) failed to register: {exc}", stacklevel=2)
    return plugin_env_ids()


_loaded: set[str] = set()


def plugin_env_ids() -> list[str]:
    return sorted(_plugin_ids)


def describe(env_id: str) -> str:
    """One line about an env: the built-in description, else the first docstring line of its entry point."""
    if env_id in BUILTIN_ENVS:
        return str(BUILTIN_ENVS[env_id]["description"])
    spec = gym.spec(env_id)
    try:
        target = gym.envs.registration.load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) \
            else spec.entry_point
    except Exception as exc:  # noqa: BLE001
        return f"(cannot load {spec.entry_point}: {exc})"
    doc = (getattr(target, "__doc__", None) or "").strip()
    return doc.splitlines()[0] if doc else ""
