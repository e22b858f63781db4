"""What one training step logs: namespaced metrics (``rollout/``, ``losses/``, ``domain/<name>/``, ``perf/``)."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from sandgym.agents.trajectory import Trajectory
from sandgym.train.domains import DomainMixer
from sandgym.train.logger import read_jsonl
from sandgym.train.step import StepStats


def batch_hash(trajs: Sequence[Trajectory]) -> float:
    """A number identifying which tasks a step trained on (equal across runs iff the batches are equal)."""
    return float(zlib.crc32(",".join(sorted({f"{t.group_id}:{t.task_id}" for t in trajs})).encode()))


def step_metrics(
    step: int,
    trajs: Sequence[Trajectory],
    valid: Sequence[Trajectory],
    stats: StepStats | None,
    t_roll: float,
    t_total: float,
    mixer: DomainMixer,
) -> dict[str, float]:
    """Namespaced metrics of one step; ``valid`` are the trajectories that were not infra failures."""
    gen_tokens = sum(t.num_generated_tokens for t in trajs)
    m: dict[str, float] = {
        "step": step,
        "data/batch_hash": batch_hash(trajs),
        "rollout/reward_mean": float(np.mean([t.reward for t in valid])) if valid else 0.0,
        "rollout/success_rate": float(np.mean([t.success for t in valid])) if valid else 0.0,
        "rollout/gen_tokens_mean": gen_tokens / max(len(trajs), 1),
        "rollout/turns_mean": float(np.mean([t.num_turns for t in trajs])) if trajs else 0.0,
        "rollout/truncated_frac": float(np.mean([t.truncated for t in trajs])) if trajs else 0.0,
        "rollout/infra_failures": float(len(trajs) - len(valid)),
        "perf/rollout_s": t_roll,
        "perf/step_s": t_total,
        "perf/tokens_per_s": gen_tokens / max(t_roll, 1e-9),
    }
    paid = [sum(t.metadata["turn_rewards"]) - t.reward for t in valid if "turn_rewards" in t.metadata]
    if paid:  # the per-turn terms the env paid (e.g. evidence@v1, weighted), per valid episode
        m["rollout/turn_reward_mean"] = float(np.sum(paid)) / len(valid)
    m.update(loss_metrics(stats))
    for domain in sorted({t.domain for t in trajs}):
        ds = [t for t in valid if t.domain == domain]
        if ds:
            m[f"domain/{domain}/reward"] = float(np.mean([t.reward for t in ds]))
            m[f"domain/{domain}/success"] = float(np.mean([t.success for t in ds]))
            m[f"domain/{domain}/length"] = float(np.mean([t.num_generated_tokens for t in ds]))
        m[f"domain/{domain}/weight"] = mixer.current_weights(step - 1).get(domain, 0.0)
    return m


OFF_POLICY_TIS = 0.9
"""Below this mean truncated importance weight the samples come from a distribution far from the learner's."""


def off_policy_warning(metrics: dict[str, float], generation_weights: str) -> str | None:
    """A warning when a step's samples were drawn far off the policy being trained (``losses/tis_mean`` below
    :data:`OFF_POLICY_TIS`; 1.0 when sampler and learner agree), naming the likely cause and its fix."""
    tis = metrics.get("losses/tis_mean")
    if tis is None or tis >= OFF_POLICY_TIS:
        return None
    cause = ("model.generation_weights='int8' moves this model's distribution too far (on SmolLM2-135M RL did not "
             "learn with it: docs/BENCHMARKS.md); set model.generation_weights='float'"
             if generation_weights == "int8" else
             "check that the sampler (an inference server: model.inference) serves this same base model and the "
             "adapter of this step")
    return (f"losses/tis_mean={tis:.2f} (< {OFF_POLICY_TIS}): the samples come from a distribution far from the "
            f"policy being trained; {cause}")


def loss_metrics(stats: StepStats | None) -> dict[str, float]:
    """``losses/*`` of the learner update (only ``trained_sequences`` and ``trained_domains``, both 0, when nothing
    was trained)."""
    if stats is None:
        return {"losses/trained_sequences": 0.0, "losses/trained_domains": 0.0}
    m = {
        "losses/loss": stats.loss,
        "losses/pg_loss": stats.pg_loss,
        "losses/kl": stats.kl,
        "losses/clip_frac": stats.clip_frac,
        "losses/tis_mean": stats.tis_mean,
        "losses/tis_max": stats.tis_max,
        "losses/tis_capped_frac": stats.tis_capped_frac,
        "losses/grad_norm": stats.grad_norm,
        "losses/trained_sequences": float(stats.sequences),
        "losses/trained_domains": float(stats.domains),
    }
    if stats.grad_cosine is not None:
        low = stats.grad_cosine_min if stats.grad_cosine_min is not None else stats.grad_cosine
        m.update({"losses/grad_cosine": stats.grad_cosine, "losses/grad_cosine_min": float(low),
                  "losses/pcgrad_projections": float(stats.pcgrad_projections)})
    return m


def load_metrics(run_dir: str | Path) -> list[dict[str, float]]:
    """The rows of a run's ``metrics.jsonl`` ([] before the first step)."""
    path = Path(run_dir) / "metrics.jsonl"
    return read_jsonl(path) if path.exists() else []
