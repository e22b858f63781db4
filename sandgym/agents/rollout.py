"""The rollout engine: many episodes at once, batched generation, env steps overlapped in a thread pool.

Each round, every episode waiting for the model generates in one batched call (``Policy.generate``); a finished
row's env step is submitted to the worker pool the moment it finishes (``on_done``), so sandbox calls overlap with
the decoding of the other rows and rounds. Budgets (max_new_tokens per turn, max_total_tokens per trajectory,
max_turns) end an episode with ``truncated=True`` and the reason; nothing is cut silently. Env exceptions become
``infra_failure`` trajectories rather than crashing the batch.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

import torch

from sandgym.agents.policy import Generation, GenerationRequest, Policy
from sandgym.agents.prompting import retokenization_mismatch
from sandgym.agents.rollout_config import RolloutConfig
from sandgym.agents.trajectory import Trajectory
from sandgym.errors import ConfigError

from ._episode import Episode

log = logging.getLogger(__name__)

EnvFactory = Callable[[], Any]


@dataclass(frozen=True)
class RolloutStats:
    """Timing and counters of one rollout call (metric keys for the trainer's log)."""

    episodes: int
    wall_s: float
    generate_s: float
    env_wait_s: float
    generated_tokens: int
    generation_rounds: int
    truncations: Mapping[str, int] = field(default_factory=dict)
    infra_failures: int = 0
    retokenization_mismatches: int = 0

    @property
    def tokens_per_s(self) -> float:
        return self.generated_tokens / self.wall_s if self.wall_s > 0 else 0.0

    def as_metrics(self, prefix: str = "rollout/") -> dict[str, float]:
        out = {f"{prefix}{k}": float(v) for k, v in self.__dict__.items() if isinstance(v, (int, float))}
        out[f"{prefix}tokens_per_s"] = self.tokens_per_s
        out.update({f"{prefix}truncated/{k}": float(v) for k, v in self.truncations.items()})
        return out


class RolloutEngine:
    """Runs ``group_size`` episodes of each task with ``policy`` in fresh envs from ``env_factory``."""

    def __init__(self, policy: Policy, env_factory: EnvFactory, config: RolloutConfig | None = None) -> None:
        self.policy = policy
        self.env_factory = env_factory
        self.config = config or RolloutConfig()
        self.last_stats: RolloutStats | None = None
        self.retokenization_mismatches = 0

    def run(self, tasks: Sequence[Any], *, group_size: int = 1, first_group_id: int = 0) -> list[Trajectory]:
        """Trajectories ordered by (group_id, sample_idx); group_id = first_group_id + index of the task."""
        if group_size <= 0:
            raise ConfigError(f"group_size={group_size} must be a positive integer")
        cfg = self.config
        fmt = self.policy.chat_format
        if self.policy.token_level and fmt is None:
            raise ConfigError("a token-level policy needs a chat_format (tokenizer); got None")
        t0 = time.perf_counter()
        gen_s = wait_s = 0.0
        rounds = 0
        episodes: list[Episode] = []
        for gi, task in enumerate(tasks):
            for si in range(group_size):
                key = len(episodes)
                seed = _mix(cfg.seed, first_group_id + gi, si)
                ep = Episode(key, task, first_group_id + gi, si, torch.Generator().manual_seed(seed), seed, cfg, fmt)
                episodes.append(ep)
        pending: dict[Future[Any], tuple[Episode, str]] = {}
        with ThreadPoolExecutor(max_workers=cfg.env_workers, thread_name_prefix="sandgym-env") as pool:
            for ep in episodes:
                self.policy.start_episode(ep.key, ep.task)
                pending[pool.submit(ep.do_reset, self.env_factory)] = (ep, "reset")

            def submit_step(ep: Episode) -> None:
                pending[pool.submit(ep.do_step, ep.last_text)] = (ep, "step")

            try:
                while True:
                    self._harvest(pending, block=False)
                    ready = [e for e in episodes if e.state == "ready"]
                    if cfg.sync_turns and pending:
                        ready = []
                    if not ready:
                        if not pending:
                            break
                        tw = time.perf_counter()
                        self._harvest(pending, block=True)
                        wait_s += time.perf_counter() - tw
                        continue
                    if pending and len(ready) < cfg.max_batch_size and cfg.batch_window_s > 0:
                        tw = time.perf_counter()  # fill the round: more episodes are about to be ready
                        deadline = tw + cfg.batch_window_s
                        while pending and (left := deadline - time.perf_counter()) > 0:
                            self._harvest(pending, block=True, timeout=left)
                        wait_s += time.perf_counter() - tw
                        ready = [e for e in episodes if e.state == "ready"]
                    batch = ready[: cfg.max_batch_size]
                    tg = time.perf_counter()
                    self._generate_round(batch, submit_step)
                    gen_s += time.perf_counter() - tg
                    rounds += 1
            finally:
                for fut in list(pending):  # a policy error: let in-flight env calls finish
                    fut.cancel()
                wait(list(pending))
                for fut, (ep, kind) in pending.items():  # resets never harvested: close their envs too
                    if kind == "reset" and not fut.cancelled() and fut.exception() is None:
                        ep.env = fut.result()[0]
                for ep in episodes:
                    self.policy.end_episode(ep.key)
                    if ep.env is not None:
                        pool.submit(ep.close_env, self.env_factory)
        trajs = [ep.trajectory() for ep in episodes]
        mism = sum(t.retokenization_mismatch for t in trajs)
        self.retokenization_mismatches += mism
        self.last_stats = RolloutStats(
            episodes=len(trajs),
            wall_s=time.perf_counter() - t0,
            generate_s=gen_s,
            env_wait_s=wait_s,
            generated_tokens=sum(t.num_generated_tokens for t in trajs),
            generation_rounds=rounds,
            truncations=dict(Counter(t.truncation_reason for t in trajs if t.truncation_reason)),
            infra_failures=sum(t.infra_failure for t in trajs),
            retokenization_mismatches=mism,
        )
        return trajs

    def _generate_round(self, batch: list[Episode], submit_step: Callable[[Episode], None]) -> None:
        cfg = self.config
        requests = []
        for ep in batch:
            budget = cfg.max_total_tokens - len(ep.token_ids) if self.policy.token_level else cfg.max_new_tokens
            ep.turn_budget_is_total = budget < cfg.max_new_tokens
            requests.append(
                GenerationRequest(
                    key=ep.key,
                    messages=tuple(ep.messages),
                    observation=ep.last_obs,
                    info=ep.last_info,
                    max_new_tokens=min(cfg.max_new_tokens, budget),
                    token_ids=tuple(ep.token_ids),
                    tools=tuple(ep.tools),
                    turn=len(ep.turns),
                    generator=ep.generator,
                    seed=ep.seed + len(ep.turns),
                    last_turn=len(ep.turns) + 1 >= cfg.max_turns,
                )
            )
            ep.state = "generating"
        handled: set[int] = set()
        token_level = self.policy.token_level
        tokenizer = getattr(self.policy, "tokenizer", None)

        def on_done(i: int, gen: Generation) -> None:
            if i in handled:
                return
            handled.add(i)
            ep = batch[i]
            mismatch = bool(
                token_level and cfg.check_retokenization and tokenizer is not None and gen.token_ids
                and retokenization_mismatch(tokenizer, gen.token_ids)
            )
            if ep.record_generation(gen, token_level=token_level, mismatch=mismatch):
                submit_step(ep)
            elif ep.state == "done":
                self.policy.end_episode(ep.key)

        gens = self.policy.generate(requests, cfg.sampling, on_done)
        if len(gens) != len(requests):
            raise RuntimeError(f"policy returned {len(gens)} generations for {len(requests)} requests")
        for i, gen in enumerate(gens):
            on_done(i, gen)

    def _harvest(self, pending: dict[Future[Any], tuple[Episode, str]], *, block: bool,
                 timeout: float | None = None) -> None:
        if not pending:
            return
        if block:
            done, _ = wait(list(pending), timeout=timeout, return_when=FIRST_COMPLETED)
        else:
            done = {f for f in pending if f.done()}
        for fut in sorted(done, key=lambda f: pending[f][0].key):
            ep, kind = pending.pop(fut)
            exc = fut.exception()
            if exc is not None:
                log.warning("env %s failed for task %s: %r", kind, ep.task_id, exc)
                ep.fail_infra(f"{kind}: {type(exc).__name__}: {exc}")
            elif kind == "reset":
                ep.after_reset(*fut.result())
            else:
                ep.after_step(*fut.result())
            if ep.state == "done":  # free what the policy keeps for the episode (its KV cache) right away
                self.policy.end_episode(ep.key)


def rollout(
    policy: Policy,
    env_factory: EnvFactory,
    tasks: Sequence[Any],
    *,
    group_size: int = 1,
    config: RolloutConfig | None = None,
    first_group_id: int = 0,
) -> list[Trajectory]:
    """Run ``group_size`` episodes of each task; see :class:`RolloutEngine`."""
    return RolloutEngine(policy, env_factory, config).run(tasks, group_size=group_size, first_group_id=first_group_id)


def _mix(seed: int, group_id: int, sample_idx: int) -> int:
    x = (seed * 0x9E3779B97F4A7C15 + group_id * 0xBF58476D1CE4E5B9 + sample_idx * 0x94D049BB133111EB) % (1 << 64)
    x ^= x >> 31
    return x % (1 << 62)


__all__ = ["EnvFactory", "RolloutConfig", "RolloutEngine", "RolloutStats", "rollout"]
