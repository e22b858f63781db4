"""Two plain OpenEnv environments built from openenv-core only (no sandgym): an echo env with a one-string action
and an adder whose action has two integer fields."""

from __future__ import annotations

from typing import Any

from openenv.core.env_server import Action, Environment, Observation, State, create_fastapi_app


class EchoAction(Action):
    message: str


class EchoObservation(Observation):
    echoed: str = ""


class EchoEnvironment(Environment[EchoAction, EchoObservation, State]):
    """Echoes the message; the episode ends with reward 1.0 when the message says DONE."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State()

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> EchoObservation:
        self._state = State(episode_id=episode_id, step_count=0)
        return EchoObservation(echoed="Say anything; say DONE to finish.", done=False, reward=0.0)

    def step(self, action: EchoAction, timeout_s: float | None = None, **kwargs: Any) -> EchoObservation:
        self._state.step_count += 1
        done = "DONE" in action.message
        return EchoObservation(echoed=action.message, done=done, reward=1.0 if done else 0.0)

    @property
    def state(self) -> State:
        return self._state


class AddAction(Action):
    a: int
    b: int


class AddObservation(Observation):
    total: int = 0
    target: int = 0


class AddEnvironment(Environment[AddAction, AddObservation, State]):
    """Find two integers that add up to 7: reward 1.0 and done when a + b == 7."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State()

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> AddObservation:
        self._state = State(episode_id=episode_id, step_count=0)
        return AddObservation(total=0, target=7, done=False, reward=0.0)

    def step(self, action: AddAction, timeout_s: float | None = None, **kwargs: Any) -> AddObservation:
        self._state.step_count += 1
        total = action.a + action.b
        return AddObservation(total=total, target=7, done=total == 7, reward=1.0 if total == 7 else 0.0)

    @property
    def state(self) -> State:
        return self._state


def echo_app() -> Any:
    return create_fastapi_app(EchoEnvironment, EchoAction, EchoObservation, max_concurrent_envs=2)


def add_app() -> Any:
    return create_fastapi_app(AddEnvironment, AddAction, AddObservation, max_concurrent_envs=2)
