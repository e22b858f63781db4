"""Registers sandgym's environments with Gymnasium, and third-party ones from the ``sandgym.envs`` group.

A plugin package declares, in its ``pyproject.toml``::

    [project.entry-points."sandgym.envs"]
    my_envs = "my_pkg.envs:register"

Each entry point loads to either a callable (called with no arguments; it calls ``gymnasium.register`` itself), an
``EnvSpec``, or a dict of ``gymnasium.register`` keyword arguments (``id``, ``entry_point``, ``kwargs``, ...);
a list or tuple of these is also accepted. A broken plugin gives a warning, never a failed ``import sandgym``.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import typing
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

__all__ = ["BUILTIN_ENVS", "ENTRY_POINT_GROUP", "register_envs", "register_plugins", "plugin_env_ids",
           "describe", "resolve_env_id", "env_creator", "EnvParameters", "env_parameters"]

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


def resolve_env_id(env_id: str) -> str:
    """The registered id of ``env_id``, importing the module of a ``"my_pkg.envs:my/Env-v0"`` id first (as
    ``gymnasium.make`` does). Raises ``gymnasium.error.Error`` for an id that is not registered."""

    module, sep, name = env_id.rpartition(":")
    if sep:
        importlib.import_module(module)
    gym.spec(name)
    return name


def env_creator(env_id: str) -> Any:
    """The class or function that makes ``env_id`` (its spec's entry point, loaded)."""
    spec = gym.spec(resolve_env_id(env_id))
    if callable(spec.entry_point):
        return spec.entry_point
    return gym.envs.registration.load_env_creator(str(spec.entry_point))


@dataclass(frozen=True)
class EnvParameters:
    """The keyword arguments an env's constructor takes (its ``__init__`` and those of the bases it passes
    ``**kwargs`` on to), their type hints, and whether that list is complete."""

    names: tuple[str, ...]
    hints: Mapping[str, Any] = field(default_factory=dict)
    closed: bool = True
    """False when some ``**kwargs`` end nowhere visible: any keyword may be accepted."""
    creator: Any = None

    def takes(self, name: str) -> bool:
        return name in self.names or not self.closed


def env_parameters(env_id: str) -> EnvParameters | None:
    """What ``env_id``'s constructor accepts, or None when it cannot be told (the entry point does not load, or
    its signature cannot be read). Raises ``gymnasium.error.Error`` for an unknown id, ImportError when the module
    of a ``"module:id"`` id does not import."""

    name = resolve_env_id(env_id)  # an unknown id or a module that does not import: raised here
    try:
        creator = env_creator(name)
    except Exception:  # noqa: BLE001 - a broken plugin is reported when the env is made
        return None
    return creator_parameters(creator)


def creator_parameters(creator: Any) -> EnvParameters | None:
    """What an env class or factory function accepts as keywords (None when its signature cannot be read)."""

    # a subclass's __init__(**kwargs) passes them on: collect parameters down the MRO until a closed signature
    targets = [c.__dict__["__init__"] for c in creator.__mro__ if "__init__" in c.__dict__] \
        if inspect.isclass(creator) else [creator]
    known: list[str] = []
    hints: dict[str, Any] = {}
    for target in targets:
        try:
            params = inspect.signature(target).parameters
        except (TypeError, ValueError):
            return None
        known += [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                  and n != "self" and n not in known]
        with contextlib.suppress(Exception):  # unresolvable annotations: the env checks its own arguments
            hints = {**typing.get_type_hints(target), **hints}
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return EnvParameters(tuple(known), hints, True, creator)
    return EnvParameters(tuple(known), hints, False, creator)
