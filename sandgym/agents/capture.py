"""Token capture for external agents: every call an agent makes to a capturing endpoint (``sandgym serve-model``'s
``/capture/<session>/v1/...``) is kept with its exact prompt ids, sampled ids and log-probs, and a session's calls
become trajectories the trainer can reward and train on, without rewriting the agent.

A session's calls form one trajectory when each call's prompt extends the previous call's prompt and completion
(the agent sent its history back and the chat template rendered it to the same tokens). When a prompt does not
(the agent edited its history, or re-rendered text tokenised differently), a new trajectory starts there, and the
trajectories of the session are flagged ``retokenization_mismatch``: the learner never trains on tokens the model
did not sample in that context.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from sandgym.agents.trajectory import Trajectory, Turn


@dataclass(frozen=True)
class CapturedCall:
    """One completion the model produced for an external agent."""

    prompt_token_ids: tuple[int, ...]
    completion_token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    text: str
    model: str
    finish_reason: str

    def to_json(self) -> dict[str, object]:
        return {"prompt_token_ids": list(self.prompt_token_ids), "completion_token_ids": list(self.completion_token_ids),
                "logprobs": list(self.logprobs), "text": self.text, "model": self.model,
                "finish_reason": self.finish_reason}


class CaptureStore:
    """Calls per session, in arrival order (thread-safe)."""

    def __init__(self) -> None:
        self._calls: dict[str, list[CapturedCall]] = {}
        self._lock = threading.Lock()

    def record(self, session: str, call: CapturedCall) -> None:
        with self._lock:
            self._calls.setdefault(session, []).append(call)

    def calls(self, session: str) -> list[CapturedCall]:
        with self._lock:
            return list(self._calls.get(session, ()))

    def pop(self, session: str) -> list[CapturedCall]:
        """The session's calls, forgotten here."""
        with self._lock:
            return self._calls.pop(session, [])

    def sessions(self) -> list[str]:
        with self._lock:
            return list(self._calls)


def captured_trajectories(calls: Sequence[CapturedCall], *, task_id: str, reward: float = 0.0,
                          domain: str = "external", family: str = "", split: str = "",
                          policy_version: int = 0) -> list[Trajectory]:
    """The session's calls as trajectories (usually one; see the module docstring), each with ``reward``."""
    chains: list[list[Turn]] = []
    prefix: tuple[int, ...] = ()
    for call in calls:
        p = call.prompt_token_ids
        if chains and len(p) >= len(prefix) and p[: len(prefix)] == prefix:
            new = p[len(prefix):]
        else:
            chains.append([])
            new = p
        chains[-1].append(Turn(prompt_token_ids=new, completion_token_ids=call.completion_token_ids,
                               completion_logprobs=call.logprobs, text=call.text,
                               truncated=call.finish_reason == "length"))
        prefix = p + call.completion_token_ids
    broken = len(chains) > 1
    return [Trajectory.from_turns(turns, task_id=task_id, domain=domain, family=family, split=split, reward=reward,
                                  policy_version=policy_version, retokenization_mismatch=broken, sample_idx=i,
                                  metadata={"captured_calls": len(turns)})
            for i, turns in enumerate(chains)]
