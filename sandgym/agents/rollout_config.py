"""``RolloutConfig``: budgets and sampling of one rollout call (light; the engine is :mod:`sandgym.agents.rollout`,
which re-exports it). Training and evaluation build it from their ``[rollout]`` table with
:meth:`sandgym.rollout.spec.RolloutSpec.rollout_config`."""

from __future__ import annotations

from dataclasses import dataclass

from sandgym.agents.policy import SamplingParams
from sandgym.errors import ConfigError


@dataclass(frozen=True)
class RolloutConfig:
    """Budgets and sampling of one rollout call."""

    max_new_tokens: int = 256
    """Per model turn; hitting it ends the episode (truncation_reason 'max_new_tokens') unless
    ``truncated_turn='continue'``."""
    truncated_turn: str = "end"
    """'end': a turn cut by max_new_tokens ends the episode (truncated). 'continue': its text still goes to the
    env and the episode goes on; the turn keeps ``Turn.truncated=True`` and ``metadata['truncated_turns']``
    counts such turns."""
    max_total_tokens: int = 4096
    """Per trajectory (prompt + every turn + env insertions); 'max_total_tokens'."""
    max_turns: int = 8
    """Model turns per episode; 'max_turns'."""
    temperature: float = 1.0
    """Sampling temperature; stored log-probs are log_softmax(logits / temperature). 0 = greedy."""
    top_p: float = 1.0
    seed: int = 0
    """Each episode samples from its own generator seeded by (seed, group_id, sample_idx): vary it per step."""
    stop_strings: tuple[str, ...] = ("</tool_call>",)
    max_batch_size: int = 64
    """Rows per generation call."""
    env_workers: int = 8
    """Threads running env reset/step/close."""
    batch_window_s: float = 0.05
    """When some episodes are ready to generate and others still have an env call in flight, wait up to this long
    for more of them before starting a round: a round decodes its rows in lock-step, so two half-full rounds cost
    nearly twice one full round (one turn of 8 episodes whose resets finished a few ms apart ran as 2 rounds).
    0 starts a round with whatever is ready."""
    sync_turns: bool = False
    """Wait for every pending env step before each generation round: batch composition (hence floats) becomes
    independent of thread timing, for bitwise reproducibility; costs the overlap."""
    check_retokenization: bool = True
    policy_version: int = 0

    def __post_init__(self) -> None:
        for name in ("max_new_tokens", "max_total_tokens", "max_turns", "max_batch_size", "env_workers"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"RolloutConfig.{name}={getattr(self, name)} must be a positive integer")
        if self.truncated_turn not in ("end", "continue"):
            raise ConfigError(f"RolloutConfig.truncated_turn={self.truncated_turn!r}; use 'end' or 'continue'")
        if self.batch_window_s < 0:
            raise ConfigError(f"RolloutConfig.batch_window_s={self.batch_window_s} must be >= 0 (0 = no wait)")
        if self.temperature < 0:
            raise ConfigError(f"RolloutConfig.temperature={self.temperature} must be >= 0 (0 = greedy)")
        if not 0.0 < self.top_p <= 1.0:
            raise ConfigError(f"RolloutConfig.top_p={self.top_p} must be in (0, 1]")

    @property
    def sampling(self) -> SamplingParams:
        return SamplingParams(temperature=self.temperature, top_p=self.top_p, stop_strings=self.stop_strings)


__all__ = ["RolloutConfig"]
