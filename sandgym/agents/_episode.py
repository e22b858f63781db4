"""One episode's state inside the rollout engine (internal).

States: ``resetting`` -> ``ready`` (waits for the model) -> ``generating`` -> ``stepping`` (env step in a worker)
-> ``ready`` ... -> ``done``. Env calls (``do_reset``/``do_step``/``close_env``) run in worker threads and only
return values; every state change (``after_*``, ``record_generation``, ``fail_infra``) runs in the engine's thread.

The episode's result is the env's ``EpisodeOutcome`` (``info["outcome"]`` of the last step): the trajectory carries
it and reads ``success``/``failure_mode`` from it. Only an episode the env never graded (the engine's token or turn
budget ran out, an env call raised, or an env that reports no outcome) is decided here: not a success, failure
mode ``infra``, ``budget`` (truncated) or "" (unknown).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, is_dataclass
from typing import TYPE_CHECKING, Any

from sandgym.agents.policy import Generation
from sandgym.agents.prompting import ChatFormat
from sandgym.agents.trajectory import Trajectory, Turn
from sandgym.envs.outcome import EpisodeOutcome

if TYPE_CHECKING:
    import torch

    from sandgym.agents.rollout_config import RolloutConfig


class Episode:
    def __init__(
        self,
        key: int,
        task: Any,
        group_id: int,
        sample_idx: int,
        generator: torch.Generator,
        seed: int,
        config: RolloutConfig,
        fmt: ChatFormat | None,
    ) -> None:
        self.key, self.task, self.group_id, self.sample_idx = key, task, group_id, sample_idx
        self.generator, self.seed, self.config, self.fmt = generator, seed, config, fmt
        self.state = "resetting"
        self.env: Any = None
        self.messages: list[dict[str, Any]] = []
        self.tools: list[Any] = []
        self.system_prompt: str | None = None
        self.token_ids: list[int] = []
        self.pending_prompt: list[int] = []
        self.turns: list[Turn] = []
        self.cur: dict[str, Any] = {}
        self.last_obs = ""
        self.last_info: Mapping[str, Any] = {}
        self.last_text = ""
        self.last_ended = False
        self.turn_budget_is_total = False
        self.reward = 0.0
        self.final_info: Mapping[str, Any] = {}
        self.outcome: EpisodeOutcome | None = None
        self.terminated = False
        self.truncation_reason: str | None = None
        self.infra_error: str | None = None
        self.mismatch = False
        self.truncated_turns = 0
        self.turn_rewards: list[float] = []

    @property
    def task_id(self) -> str:
        return str(getattr(self.task, "id", self.task))

    # ---- worker-thread calls (no state changes) ------------------------------------------------------------------
    def do_reset(self, env_factory: Callable[[], Any]) -> tuple[Any, Any, Mapping[str, Any]]:
        env = env_factory()
        try:
            obs, info = env.reset(seed=self.seed % (1 << 31), options={"task": self.task})
        except BaseException:
            env.close()
            raise
        return env, obs, info

    def do_step(self, text: str) -> tuple[Any, float, bool, bool, Mapping[str, Any]]:
        return self.env.step(text)

    def close_env(self, env_factory: Callable[[], Any] | None = None) -> None:
        """Close the env, or give it back to a factory with ``release`` (an :class:`~sandgym.agents.env_pool.
        EnvPool`) when the episode ended without an infrastructure failure (a broken env is never reused)."""
        release = getattr(env_factory, "release", None)
        if release is not None and self.infra_error is None and self.state == "done":
            release(self.env)
        else:
            self.env.close()

    # ---- engine-thread transitions ------------------------------------------------------------------------------
    def after_reset(self, env: Any, obs: Any, info: Mapping[str, Any]) -> None:
        self.env = env
        self.last_obs, self.last_info = str(obs), info
        self.system_prompt = info.get("system_prompt")
        self.tools = list(info.get("tools") or [])
        self.messages = [dict(m) for m in info.get("messages") or []]
        if not self.messages:
            self.messages = [{"role": "user", "content": str(obs)}]
        if self.fmt is not None:
            self.messages = self.fmt.normalize(self.messages, self.system_prompt)
            self._queue_prompt(self.fmt.prompt_ids(self.messages, self.tools, self.system_prompt))
        else:
            self.state = "ready"

    def _queue_prompt(self, ids: list[int]) -> None:
        if len(self.token_ids) + len(ids) >= self.config.max_total_tokens:
            if not self.turns:  # the prompt alone does not fit: keep it visible, generate nothing
                self.turns.append(Turn(tuple(ids), (), (), ""))
                self.token_ids.extend(ids)
            self.finish(truncation="max_total_tokens")
            return
        self.pending_prompt = ids
        self.token_ids.extend(ids)
        self.state = "ready"

    def record_generation(self, gen: Generation, *, token_level: bool, mismatch: bool) -> bool:
        """Store the model's turn; True when the env should now step it."""
        ids, lps, ended = tuple(gen.token_ids), tuple(gen.logprobs), gen.ended
        if not token_level and self.fmt is not None:  # scripted text with a tokenizer: record ids for SFT
            ids = tuple(self.fmt.completion_ids(gen.text))
            lps, ended = (0.0,) * len(ids), True
        if not token_level and self.fmt is None:
            ids, lps = (), ()
        self.token_ids.extend(ids)
        self.mismatch = self.mismatch or mismatch
        self.cur = {"prompt": tuple(self.pending_prompt), "ids": ids, "lps": lps, "text": gen.text, "truncated": gen.truncated}
        self.last_text, self.last_ended = gen.text, ended
        self.messages.append({"role": "assistant", "content": gen.text})
        if gen.truncated:
            self.truncated_turns += 1
            if self.turn_budget_is_total or self.config.truncated_turn == "end":
                self._close_turn("")
                self.finish(truncation="max_total_tokens" if self.turn_budget_is_total else "max_new_tokens")
                return False
        self.state = "stepping"
        return True

    def _close_turn(self, observation: str) -> None:
        c = self.cur
        self.turns.append(Turn(c["prompt"], c["ids"], c["lps"], c["text"], observation, c["truncated"]))
        self.cur = {}

    def after_step(self, obs: Any, reward: float, terminated: bool, truncated: bool, info: Mapping[str, Any]) -> None:
        self.reward += float(reward)
        # per-turn credit: the step's reward plus any intermediate-state term the env reports for this turn
        self.turn_rewards.append(float(reward) + float(info.get("turn_reward", 0.0) or 0.0))
        self.last_obs, self.last_info = str(obs), info
        new_msgs = [dict(m) for m in info.get("messages") or []]
        if not new_msgs and obs:
            new_msgs = [{"role": "user", "content": str(obs)}]
        self._close_turn(str(obs))
        if terminated or truncated or info.get("infra_failure"):
            self.terminated = bool(terminated)
            self.final_info = info
            outcome = info.get("outcome")
            self.outcome = outcome if isinstance(outcome, EpisodeOutcome) else None
            self.infra_error = str(info.get("error") or "env reported infra_failure") if info.get("infra_failure") else None
            reason = None
            if truncated:
                reason = str((self.outcome and self.outcome.truncation) or info.get("truncation_reason") or "env")
            self.finish(truncation=reason)
            return
        if len(self.turns) >= self.config.max_turns:
            self.messages.extend(new_msgs)
            self.finish(truncation="max_turns")
            return
        if self.fmt is not None:
            delta = self.fmt.delta_ids(self.messages, new_msgs, self.tools, completion_ended=self.last_ended, system_prompt=self.system_prompt)
            self.messages.extend(new_msgs)
            self._queue_prompt(delta)
        else:
            self.messages.extend(new_msgs)
            self.state = "ready"

    def fail_infra(self, error: str) -> None:
        if self.cur:
            self._close_turn("")
        self.infra_error = error
        self.finish(truncation=None)

    def finish(self, *, truncation: str | None) -> None:
        self.truncation_reason = truncation
        self.state = "done"

    # ---- result ----------------------------------------------------------------------------------------------------
    def trajectory(self) -> Trajectory:
        info, outcome = self.final_info, self.outcome
        verdict: dict[str, Any] = {}
        if outcome is None:  # the env never graded it: the engine's budget, an env error, or no outcome reported
            infra = self.infra_error is not None or bool(info.get("infra_failure"))
            verdict = {"success": False, "infra_failure": infra,
                       "failure_mode": "infra" if infra else "budget" if self.truncation_reason else ""}
        meta: dict[str, Any] = {"seed": self.seed, "truncated_turns": self.truncated_turns}
        # a term paid on any turn (an episode with no turn has none)
        paid = any(self.turn_rewards[:-1]) or self.turn_rewards[-1:] not in ([], [self.reward])
        if paid and len(self.turn_rewards) == len(self.turns):
            meta["turn_rewards"] = list(self.turn_rewards)
        if self.infra_error:
            meta["infra_error"] = self.infra_error
        running = self.last_info.get("actions")
        if outcome is None and running is not None:  # cut by the engine: what the agent had done so far
            meta["actions"] = asdict(running) if is_dataclass(running) and not isinstance(running, type) else running
        task = self.task
        return Trajectory.from_turns(
            self.turns,
            task_id=self.task_id,
            domain=str(getattr(task, "domain", "")),
            family=str(getattr(task, "family", "")),
            split=str(getattr(task, "split", "")),
            reward=self.reward,
            reward_components=_floats(info.get("reward_components") or {}),
            runtime=_floats(info.get("runtime") or {}),
            truncated=self.truncation_reason is not None,
            truncation_reason=self.truncation_reason,
            terminated=self.terminated,
            group_id=self.group_id,
            sample_idx=self.sample_idx,
            policy_version=self.config.policy_version,
            retokenization_mismatch=self.mismatch,
            metadata=meta,
            outcome=outcome,
            **verdict,
        )


def _floats(d: Mapping[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in d.items():
        try:
            out[str(k)] = float(v)
        except (TypeError, ValueError):
            continue
    return out
