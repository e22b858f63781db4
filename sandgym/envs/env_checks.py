"""Checks of an env id and its kwargs before anything starts: unknown ids and keys (with a suggestion) and values
of the wrong type are a ConfigError naming the fix."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from sandgym.envs.registration import BUILTIN_ENVS, creator_parameters, env_parameters, plugin_env_ids
from sandgym.errors import ConfigError
from sandgym.tasks.validate import type_error, type_name

GYM_MAKE_KWARGS = ("max_episode_steps", "disable_env_checker")
"""Keywords ``gymnasium.make`` takes itself rather than passing to the env."""


def env_ids() -> list[str]:
    """The registered sandgym env ids (built-in first, then plugins)."""

    return list(BUILTIN_ENVS) + [i for i in plugin_env_ids() if i in gym.registry and i not in BUILTIN_ENVS]


def check_env(env_id: str, env_kwargs: Any) -> None:
    """ConfigError for an unknown env id (listing the registered ids) or env kwargs the env does not take
    (unknown keys with a suggestion, wrong types, not a JSON object), before any env or progress bar starts."""

    if not isinstance(env_kwargs, dict):
        raise ConfigError(f"env kwargs must be a JSON object such as {{\"max_turns\": 4}}, got "
                          f"{type(env_kwargs).__name__} {json.dumps(env_kwargs)[:60]}")
    ids = env_ids()
    if env_id not in gym.registry:
        close = difflib.get_close_matches(env_id, ids, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(f"unknown env id {env_id!r}; {hint}registered ids: {', '.join(ids)} "
                          "(`sandgym envs` describes them)")
    check_env_kwargs(env_id, env_kwargs)


def check_env_kwargs(env_id: str, env_kwargs: Mapping[str, Any], *, label: str = "env kwarg",
                     example: str = "--env-kwargs '{\"max_turns\": 4}'", creator: Any = None) -> None:
    """ConfigError for a key of ``env_kwargs`` that ``env_id``'s constructor does not take (with a suggestion) or
    a value of the wrong type; nothing when the signature cannot be told. ``label`` names the keys in errors.
    ``creator``: check against this env class or function instead of a registered id (``env_id`` then only
    names it in errors)."""

    params = env_parameters(env_id) if creator is None else creator_parameters(creator)
    if params is None or not params.closed:
        return
    known, hints = [n for n in params.names if creator is None or n != "tasks"], params.hints  # the run's tasks
    for key in env_kwargs:
        if key not in known and key not in GYM_MAKE_KWARGS:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"{env_id} takes: {', '.join(known)}"
            raise ConfigError(f"{label} {key!r} is not a parameter of {env_id}; {hint}")

    for key, value in env_kwargs.items():
        if key in hints:
            err = type_error(value, hints[key])
            if err:
                raise ConfigError(f"{label} {key!r}: {err}; pass a value of type "
                                  f"{_type_name(hints[key])} (e.g. {example})")


def _type_name(tp: Any) -> str:
    return type_name(tp)


__all__ = ["GYM_MAKE_KWARGS", "check_env", "check_env_kwargs", "env_ids"]
