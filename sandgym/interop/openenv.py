"""A sandgym env as an OpenEnv environment server (``sandgym serve``), with the real ``openenv-core`` classes.

Wire types (pydantic, OpenEnv's ``Action``/``Observation``/``State``):

- ``SandgymAction(text)``: the agent's whole turn (``<tool_call>`` JSON or a fenced code block), as ``env.step``;
- ``SandgymObservation``: ``text`` (the env's reply; on reset the task prompt), ``messages`` (on reset
  ``[system, user]``; then the new tool/user messages), ``tools`` (OpenAI schemas, on reset), ``task_id``,
  ``reward_components``, ``info`` (failure mode, truncation, runtime signals, infra flag) plus OpenEnv's
  ``done`` and ``reward`` (0.0 until the episode ends, then sandgym's reward);
- ``SandgymState``: ``episode_id``, ``step_count``, ``task_id``, ``done``.

Reset takes ``seed`` and ``task_id`` (a task of the env's suite; an id the suite does not hold is refused with the
suite, its task seed and the ``--task-seed`` that makes the client's tasks the server's). Each WebSocket session gets its own env
instance (``max_sessions`` at once); HTTP ``/reset`` and ``/step`` are OpenEnv's stateless endpoints (a fresh
env per request), so episodes need the WebSocket client (``SandgymEnvClient``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server import Action, Environment, Observation, State, create_fastapi_app
from pydantic import Field

import sandgym  # noqa: F401  (registers sandgym/* ids and plugins)
from sandgym.agents.env_pool import EnvPool
from sandgym.envs.registration import env_creator, resolve_env_id
from sandgym.envs.tool_env import ToolEnv
from sandgym.errors import ConfigError
from sandgym.interop.openenv_remote import TASK_REFUSED

__all__ = ["SandgymAction", "SandgymObservation", "SandgymState", "SandgymEnvironment", "SandgymEnvClient",
           "make_app", "serve"]


class SandgymAction(Action):
    text: str = Field(..., description="the agent's whole turn: <tool_call> JSON lines or a ```python block")


class SandgymObservation(Observation):
    text: str = ""
    messages: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    task_id: str = ""
    reward_components: dict[str, float] = Field(default_factory=dict)
    info: dict[str, Any] = Field(default_factory=dict)


class SandgymState(State):
    task_id: str = ""
    done: bool = False


def _plain(value: Any) -> Any:
    """JSON-safe copy of env info values (dataclasses and other objects become strings)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


class SandgymEnvironment(Environment[SandgymAction, SandgymObservation, SandgymState]):
    """One sandgym env (``gym.make(env_id, **env_kwargs)``) behind OpenEnv's ``Environment`` interface."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each session builds its own env and sandbox

    def __init__(self, env_id: str = "sandgym/Coding-v0", env_kwargs: Mapping[str, Any] | None = None,
                 pool: EnvPool | None = None) -> None:
        super().__init__()
        self.env_id = env_id
        self._pool = pool
        self.env = pool() if pool is not None else gym.make(env_id, **dict(env_kwargs or {}))
        self._state = SandgymState(done=True)

    def reset(self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None,
              **kwargs: Any) -> SandgymObservation:
        if task_id:
            self._check_task(task_id)
        options = {"task": task_id} if task_id else None
        text, info = self.env.reset(seed=seed, options=options)
        self._state = SandgymState(episode_id=episode_id, step_count=0, task_id=info["task_id"])
        return SandgymObservation(text=text, messages=_plain(info["messages"]), tools=_plain(info["tools"]),
                                  task_id=info["task_id"], done=False, reward=0.0,
                                  info={"max_turns": info["max_turns"], "env_id": self.env_id})

    def step(self, action: SandgymAction, timeout_s: float | None = None, **kwargs: Any) -> SandgymObservation:
        text, reward, terminated, truncated, info = self.env.step(action.text)
        done = bool(terminated or truncated)
        self._state.step_count += 1
        self._state.done = done
        keys = ("failure_mode", "truncation", "infra_failure", "runtime", "error", "turn_reward")
        extra: dict[str, Any] = {k: _plain(info[k]) for k in keys if k in info}
        extra["terminated"], extra["truncated"] = bool(terminated), bool(truncated)
        return SandgymObservation(
            text=text, messages=_plain(info.get("messages", [])), task_id=self._state.task_id, done=done,
            reward=float(reward), reward_components={k: float(v) for k, v in info.get("reward_components",
                                                                                       {}).items()},
            info=extra)

    def _check_task(self, task_id: str) -> None:
        """Refuse a task id the served suite does not hold, naming the flag that makes the client's tasks ours."""
        source = getattr(self.env.unwrapped, "task_source", None)
        if source is None or not isinstance(source.spec, str):
            return
        ids = {t.id for t in source.tasks}
        if task_id not in ids:
            raise ConfigError(f"task id {task_id!r} {TASK_REFUSED} {len(ids)} tasks of {source.spec!r}, "
                              f"drawn with task seed {source.seed}: draw the client's tasks with "
                              f"`--task-seed {source.seed}` (sandgym eval), or serve with the client's --task-seed")

    @property
    def state(self) -> SandgymState:
        return self._state

    def close(self) -> None:
        """End of the session: a warm env between episodes goes back to the pool (its sandbox kept, reset in place
        by the next episode); one mid-episode, or without a pool, is closed."""
        if self._pool is not None and self._state.done:
            self._pool.release(self.env)
        else:
            self.env.close()


class SandgymEnvClient(EnvClient[SandgymAction, SandgymObservation, SandgymState]):
    """OpenEnv's WebSocket client for a ``sandgym serve`` server (``.sync()`` for blocking use)."""

    def _step_payload(self, action: SandgymAction) -> dict[str, Any]:
        return action.model_dump()

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[SandgymObservation]:
        obs = SandgymObservation(**payload.get("observation", {}), done=payload.get("done", False),
                                 reward=payload.get("reward"))
        return StepResult(observation=obs, reward=payload.get("reward"), done=bool(payload.get("done", False)))

    def _parse_state(self, payload: dict[str, Any]) -> SandgymState:
        return SandgymState(**payload)


def make_app(env_id: str = "sandgym/Coding-v0", env_kwargs: Mapping[str, Any] | None = None,
             max_sessions: int = 4, warm: bool = True, task_seed: int | None = None) -> Any:
    """The FastAPI app of OpenEnv's ``HTTPEnvServer`` serving ``env_id`` (the env id is checked here).

    ``warm``: sessions take their env from a shared ``EnvPool`` (``app.state.sandgym_pool``) and give it back when
    they end, so a new session starts on a warm env and sandbox (reset in place between episodes) instead of
    starting a sandbox; at most ``max_sessions`` envs are kept. ``task_seed``: the seed of a sandgym env's suite
    (its ``suite_seed``, unless ``env_kwargs`` sets one); None keeps the env's own."""

    env_id = resolve_env_id(env_id)
    kwargs = dict(env_kwargs or {})
    if task_seed is not None and "suite_seed" not in kwargs and _takes_suite_seed(env_id):
        kwargs["suite_seed"] = task_seed
    probe = gym.make(env_id, **kwargs)  # fail now (bad id, kwargs or suite), not in the first session
    pool = EnvPool(lambda: gym.make(env_id, **kwargs), max_idle=max_sessions) if warm else None
    probe.close()

    def factory() -> SandgymEnvironment:
        return SandgymEnvironment(env_id, kwargs, pool)

    app = create_fastapi_app(factory, SandgymAction, SandgymObservation, max_concurrent_envs=max_sessions)
    app.state.sandgym_pool = pool
    return app


def _takes_suite_seed(env_id: str) -> bool:
    """Whether ``env_id`` is one of sandgym's tool envs (its tasks a suite with a seed), not a plugin's own class."""
    creator = env_creator(env_id)
    return isinstance(creator, type) and issubclass(creator, ToolEnv)


def serve(env_id: str = "sandgym/Coding-v0", *, env_kwargs: Mapping[str, Any] | None = None,
          host: str = "127.0.0.1", port: int = 8000, max_sessions: int = 4, warm: bool = True,
          task_seed: int | None = None) -> None:
    """Run the server until interrupted (uvicorn)."""
    import uvicorn

    uvicorn.run(make_app(env_id, env_kwargs, max_sessions, warm, task_seed), host=host, port=port, log_level="info")
