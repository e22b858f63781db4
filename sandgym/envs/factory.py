"""One way to make fresh environments for rollouts, shared by training and evaluation.

Without an env id, :func:`tool_env_factory` makes sandgym's generic :class:`~sandgym.envs.tool_env.ToolEnv`. With
one (``rollout.env`` of a training or evaluation config), :func:`rollout_env_factory` makes that registered env
through ``gymnasium.make`` and passes it the same rollout settings the generic env gets (:data:`ROLLOUT_ENV_KWARGS`):
in particular ``max_turns``, so an episode the rollout cuts at its turn budget is cut (and graded, with partial
credit) by the env itself rather than dropped ungraded.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import gymnasium

from sandgym.envs.builtin_tools import builtin_tools
from sandgym.envs.env_checks import check_env_kwargs, env_ids
from sandgym.envs.registration import env_parameters
from sandgym.envs.tool_env import ToolEnv
from sandgym.errors import ConfigError

ROLLOUT_ENV_KWARGS: Mapping[str, str] = {"max_turns": "max_turns", "sandbox": "backend",
                                         "code_action": "code_action", "tools": "tools"}
"""Rollout setting -> the env keyword argument it is passed as."""


def tool_env_factory(
    *,
    backend: str = "local",
    code_action: str = "submit",
    tools: Sequence[str] = (),
    max_turns: int | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
) -> Callable[[], Any]:
    """A callable returning a fresh :class:`~sandgym.envs.tool_env.ToolEnv` (tasks are given per episode through
    ``reset(options={"task": ...})``). ``code_action="none"`` disables code actions; empty ``tools`` offers all."""

    action = None if code_action == "none" else code_action
    names = list(tools) or None
    extra = dict(env_kwargs or {})

    def make() -> Any:
        return ToolEnv(tasks=[], backend=backend, code_action=action, max_turns=max_turns,  # type: ignore[arg-type]
                       tools=builtin_tools(names) if names else None, **extra)

    return make


def rollout_env_factory(
    env_id: str,
    settings: Mapping[str, Any],
    env_kwargs: Mapping[str, Any] | None = None,
    *,
    explicit: Collection[str] = (),
    prefix: str = "rollout.",
) -> Callable[[], Any]:
    """A callable making a fresh ``env_id`` (a registered Gymnasium id, or ``"my_pkg.envs:my/Env-v0"``) with the
    rollout ``settings`` it takes (keys of :data:`ROLLOUT_ENV_KWARGS`: ``max_turns``, ``sandbox``, ``code_action``,
    ``tools``), plus ``env_kwargs``; an empty ``env_id`` gives :func:`tool_env_factory`'s env. The caller is
    :meth:`sandgym.rollout.spec.RolloutSpec.env_factory`.

    Checked now, not at the first episode (:func:`rollout_env_kwargs`): each setting in ``explicit`` (set away from
    its default in the config) that the env's constructor does not take is a :class:`ConfigError` naming it, as is
    an ``env_kwargs`` key that repeats a setting with another value. ``prefix`` names the config section in errors.
    """
    settings = {**settings, "tools": tuple(settings.get("tools", ()))}
    kwargs = rollout_env_kwargs(env_id, settings, env_kwargs or {}, explicit=explicit, prefix=prefix)
    if not env_id:
        return tool_env_factory(backend=kwargs.pop("backend"), code_action=kwargs.pop("code_action") or "none",
                                tools=kwargs.pop("tools", ()), max_turns=kwargs.pop("max_turns"), env_kwargs=kwargs)

    params = env_parameters(env_id)
    names = kwargs.pop("tools", None)
    tool_objects = params is not None and _is_tool_env(params.creator)

    def make() -> Any:
        extra = dict(kwargs)
        if names:
            if tool_objects:  # a ToolEnv takes Tool objects; other envs get the names
                extra["tools"] = builtin_tools(list(names))
            else:
                extra["tools"] = tuple(names)
        return gymnasium.make(env_id, disable_env_checker=True, **extra)

    return make


def rollout_env_kwargs(
    env_id: str,
    settings: Mapping[str, Any],
    env_kwargs: Mapping[str, Any],
    *,
    explicit: Collection[str] = (),
    prefix: str = "rollout.",
) -> dict[str, Any]:
    """The keyword arguments ``env_id`` is made with: each rollout setting of ``settings`` (keys of
    :data:`ROLLOUT_ENV_KWARGS`) under its env keyword when the env takes it, then ``env_kwargs``.

    ConfigError, naming the key and the fix, when: the id is unknown; a setting in ``explicit`` is one the env does
    not take (it would be silently dropped; ``max_turns`` is exempt, the rollout enforces it anyway); ``env_kwargs``
    repeats a setting with another value (``max_turns`` always: an env allowed more turns than the rollout never
    grades the episodes the rollout cuts); or an ``env_kwargs`` key or value the env does not take. Empty ``tools``
    means the env's default tools and is not passed."""

    try:
        params = env_parameters(env_id) if env_id else None
    except (gymnasium.error.Error, ImportError) as exc:
        ids = env_ids()
        if isinstance(exc, ImportError):
            why = f"cannot import the module that registers it ({exc})"
        else:
            close = difflib.get_close_matches(env_id, ids, n=1)
            why = "is not a registered env id" + (f"; did you mean {close[0]!r}?" if close else "")
        raise ConfigError(f"{prefix}env={env_id!r} {why}; use a registered id ({', '.join(ids)}) or "
                          "'my_pkg.envs:my/Env-v0' to import the module that registers it") from None
    if env_id:
        takes: Callable[[str], bool] = params.takes if params is not None else (lambda name: True)
        where = env_id
    else:  # sandgym's generic ToolEnv takes every setting
        takes, where = (lambda name: True), "the tool environment"
    out: dict[str, Any] = {}
    for setting, kwarg in ROLLOUT_ENV_KWARGS.items():
        value = settings[setting]
        if setting == "code_action" and value == "none":
            value = None
        if setting == "tools" and not value:  # empty: the env's default tools
            continue
        if kwarg in env_kwargs:
            given = env_kwargs[kwarg]
            if setting == "tools" and isinstance(given, list):
                given = tuple(given)
            if given != value and (setting == "max_turns" or setting in explicit):
                raise ConfigError(
                    f"{prefix}env_kwargs.{kwarg}={env_kwargs[kwarg]!r} disagrees with {prefix}{setting}="
                    f"{settings[setting]!r}: set {prefix}{setting} only (it is passed to {where} as {kwarg!r})")
            continue  # env_kwargs gives it (the same value, or the setting was left at its default)
        if takes(kwarg):
            out[kwarg] = value
        elif setting in explicit and setting != "max_turns":
            names = ", ".join(params.names) if params is not None else "?"
            raise ConfigError(
                f"{prefix}{setting}={settings[setting]!r}: {where} does not take {kwarg!r} (it takes: {names}), "
                f"so the setting would be ignored; remove {prefix}{setting} or use an env that takes {kwarg!r}")
    check_env_kwargs(env_id or "the tool environment", env_kwargs, label=f"{prefix}env_kwargs key",
                     example=f"{prefix}env_kwargs = {{max_turns = 4}}", creator=None if env_id else ToolEnv)
    out.update(env_kwargs)
    return out


def _is_tool_env(creator: Any) -> bool:
    return inspect.isclass(creator) and issubclass(creator, ToolEnv)


def explicit_settings(obj: Any, names: Collection[str] = tuple(ROLLOUT_ENV_KWARGS)) -> frozenset[str]:
    """The fields of dataclass ``obj`` among ``names`` whose value differs from the field's default."""

    out = set()
    for f in dataclasses.fields(obj):
        if f.name not in names:
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            out.add(f.name)
            continue
        if getattr(obj, f.name) != default:
            out.add(f.name)
    return frozenset(out)
