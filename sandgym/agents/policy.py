"""The ``Policy`` protocol the rollout engine and the evaluator drive, and the adapter for scripted agents.

A policy answers a batch of :class:`GenerationRequest` (one per active episode) with one :class:`Generation`
each. Token-level policies (``chat_format`` is not None, e.g. :class:`~sandgym.agents.hf.HFPolicy`) read
``request.token_ids`` and return the exact sampled ids and log-probs; text-level policies (scripted agents,
OpenAI-compatible endpoints) read ``request.messages`` / ``request.observation`` and return text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from sandgym.agents.prompting import ChatFormat, PromptConfig


@dataclass(frozen=True)
class SamplingParams:
    """Sampling controls shared by every request of one call."""

    temperature: float = 1.0
    top_p: float = 1.0
    stop_strings: tuple[str, ...] = ("</tool_call>",)
    """A turn also ends when its text contains one of these (the string is kept in the turn)."""


@dataclass(frozen=True)
class GenerationRequest:
    """What a policy sees for one episode's next turn."""

    key: int
    """The episode's id within the rollout (stable across its turns)."""
    messages: tuple[Mapping[str, Any], ...]
    """The chat so far (system, user, assistant, tool, ...), as text."""
    observation: str
    """The env's latest observation (the reset obs on turn 0)."""
    info: Mapping[str, Any]
    """The env's latest info dict (reset info on turn 0)."""
    max_new_tokens: int
    token_ids: tuple[int, ...] = ()
    """The whole token sequence so far (token-level policies only)."""
    tools: tuple[Any, ...] = ()
    turn: int = 0
    generator: Any = None
    """The episode's own torch.Generator (so samples do not depend on batch composition)."""
    seed: int | None = None
    last_turn: bool = False
    """No turn can follow this one (the turn budget): a policy need not keep state for the episode's next turn."""


@dataclass(frozen=True)
class Generation:
    """One turn's output. Token-level policies fill ``token_ids``/``logprobs``; text-level ones leave them empty."""

    text: str
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = ()
    truncated: bool = False
    """Stopped by max_new_tokens rather than a stop token/string."""
    ended: bool = False
    """The ids end with the end-of-turn/EOS token (the template need not close the turn again)."""
    metadata: Mapping[str, Any] = field(default_factory=dict)


OnDone = Callable[[int, Generation], None]


@runtime_checkable
class Policy(Protocol):
    """Anything the rollout engine can drive."""

    @property
    def chat_format(self) -> ChatFormat | None:
        """The renderer for token-level rollouts; None for a text-only policy without a tokenizer."""
        ...

    @property
    def token_level(self) -> bool:
        """True when ``generate`` consumes ``token_ids`` and returns sampled ids + log-probs."""
        ...

    def start_episode(self, key: int, task: Any) -> None: ...

    def end_episode(self, key: int) -> None: ...

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingParams, on_done: OnDone | None = None
    ) -> list[Generation]:
        """One turn for each request; ``on_done(i, gen)`` may be called as soon as request ``i`` is finished."""
        ...


class Agent(Protocol):
    """The scripted-agent interface of ``sandgym.agents.scripted`` (oracle, noop, random)."""

    def reset(self, task: Any) -> None: ...

    def act(self, observation: str, info: Mapping[str, Any]) -> str: ...


class TextPolicy:
    """Base of text-level policies: no tokenizer, nothing kept per episode, one :meth:`reply` per request.

    Subclasses implement ``reply(request, sampling) -> Generation``; override ``start_episode``/``end_episode``
    when they keep per-episode state, ``chat_format`` when they render tokens, ``generate`` to batch or fan out.
    """

    @property
    def chat_format(self) -> ChatFormat | None:
        return None

    @property
    def token_level(self) -> bool:
        return False

    def start_episode(self, key: int, task: Any) -> None:
        """Nothing kept per episode."""

    def end_episode(self, key: int) -> None:
        """Nothing kept per episode."""

    def reply(self, request: GenerationRequest, sampling: SamplingParams) -> Generation:
        raise NotImplementedError(f"{type(self).__name__} must implement reply(request, sampling)")

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingParams, on_done: OnDone | None = None
    ) -> list[Generation]:
        out = []
        for i, r in enumerate(requests):
            gen = self.reply(r, sampling)
            if on_done is not None:
                on_done(i, gen)
            out.append(gen)
        return out


class ScriptedPolicy(TextPolicy):
    """Adapts scripted agents (``reset(task)`` / ``act(observation, info)``) to :class:`Policy`.

    ``agent_factory`` makes one agent per episode (an agent class works). With a ``tokenizer`` the engine
    also records token ids (log-probs 0.0), e.g. for an SFT warm start on oracle trajectories.
    """

    def __init__(
        self, agent_factory: Callable[[], Agent], *, tokenizer: Any = None, prompt_config: PromptConfig | None = None
    ) -> None:
        self.agent_factory = agent_factory
        self._format = ChatFormat(tokenizer, prompt_config) if tokenizer is not None else None
        self._agents: dict[int, Agent] = {}

    @property
    def chat_format(self) -> ChatFormat | None:
        return self._format

    def start_episode(self, key: int, task: Any) -> None:
        agent = self.agent_factory()
        agent.reset(task)
        self._agents[key] = agent

    def end_episode(self, key: int) -> None:
        self._agents.pop(key, None)

    def reply(self, request: GenerationRequest, sampling: SamplingParams) -> Generation:
        return Generation(text=self._agents[request.key].act(request.observation, request.info))
