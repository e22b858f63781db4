"""``EnvPool``: the rollout engine gives finished episodes' envs back, and later episodes reuse them."""

from __future__ import annotations

from typing import Any

from sandgym.agents.env_pool import EnvPool
from sandgym.agents.policy import ScriptedPolicy
from sandgym.agents.rollout import rollout
from sandgym.agents.rollout_config import RolloutConfig
from tests.train.toy_env import LettersEnv


class Counted(LettersEnv):
    made = 0
    closed = 0

    def __init__(self, broken: bool = False) -> None:
        super().__init__()
        Counted.made += 1
        self.broken = broken
        self.reuse_sandbox = False

    def step(self, action: str) -> Any:
        obs, reward, term, trunc, info = super().step(action)
        if self.broken:
            info = {**info, "infra_failure": True, "error": "sandbox died (test)", "outcome": None}
        return obs, reward, term, trunc, info

    def close(self) -> None:
        Counted.closed += 1


class Says:
    def reset(self, task: Any) -> None:
        pass

    def act(self, observation: str, info: Any) -> str:
        return "abc"


def _reset_counts() -> None:
    Counted.made = Counted.closed = 0


def test_envs_of_finished_episodes_are_reused_across_rollouts() -> None:
    _reset_counts()
    pool = EnvPool(Counted)
    for _ in range(3):
        trajs = rollout(ScriptedPolicy(Says), pool, ["t1", "t2"], group_size=2, config=RolloutConfig(max_turns=1))
        assert [t.reward for t in trajs] == [1.0] * 4
    assert (pool.made, pool.reused) == (4, 8)  # 4 at once, then the same 4 twice more
    assert Counted.made == 4 and Counted.closed == 0
    pool.close()
    assert Counted.closed == 4


def test_an_env_that_failed_in_its_sandbox_is_closed_not_reused() -> None:
    _reset_counts()
    pool = EnvPool(lambda: Counted(broken=True))
    trajs = rollout(ScriptedPolicy(Says), pool, ["t1"], group_size=2, config=RolloutConfig(max_turns=1))
    assert all(t.infra_failure for t in trajs)
    assert Counted.closed == 2 and pool.made == 2
    rollout(ScriptedPolicy(Says), pool, ["t1"], group_size=1, config=RolloutConfig(max_turns=1))
    assert pool.reused == 0 and pool.made == 3


def test_pooled_envs_get_sandbox_reuse_and_a_full_pool_closes() -> None:
    _reset_counts()
    pool = EnvPool(Counted, max_idle=1)
    a, b = pool(), pool()
    assert a.reuse_sandbox and b.reuse_sandbox  # the pool resets envs between episodes, so may their sandboxes
    pool.release(a)
    pool.release(b)  # over max_idle: closed
    assert Counted.closed == 1 and pool() is a
