"""``sandgym train``: the RL loop, top to bottom.

    for step:  sample a mixed batch of tasks -> roll out G samples each -> rewards -> advantages
               -> loss -> optimiser step -> log -> maybe checkpoint

The policy is a LoRA adapter on a Hugging Face causal LM; the reference for the KL term is the same model with
the adapter disabled. Everything a run writes goes to ``config.out_dir``.

Periodic held-out evaluation (``[eval]``) is a hook, ``on_eval(config, policy, step, run_dir)``, called before the
first step of a fresh run and after every step; training never imports evaluation. ``sandgym train`` passes
:func:`sandgym.experiments.periodic_eval.maybe_periodic_eval` (see ``train_with_eval`` there).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sandgym.agents.context_window import check_context
from sandgym.agents.trajectory import Trajectory, save_jsonl
from sandgym.configs import to_toml
from sandgym.errors import ConfigError, SandgymError
from sandgym.train import runtime
from sandgym.train.advantages import compute_advantages, per_step_advantages
from sandgym.train.checkpoint import (
    TrainerState,
    resume_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from sandgym.train.config import TrainConfig
from sandgym.train.domains import DomainMixer
from sandgym.train.logger import MetricsLogger, read_jsonl
from sandgym.train.sft import initial_adapter
from sandgym.train.step import Sample, learner_update, make_samples

log = logging.getLogger(__name__)

EvalHook = Callable[[TrainConfig, Any, int, Path], object]
"""``on_eval(config, policy, step, run_dir)``: evaluate the live policy when ``step`` is due (it decides)."""


class TrainingDiverged(SandgymError, RuntimeError):
    """The loss became NaN or exploded; the last good checkpoint is intact."""


@dataclass(frozen=True)
class TrainResult:
    run_dir: Path
    steps: int
    last_checkpoint: Path | None
    metrics_path: Path
    resumed_from: int


def setup(config: TrainConfig, resume: bool) -> tuple[Path, Path | None, str | None, Any, Any, DomainMixer, int]:
    """Run dir + resolved config, policy (resumed adapter, warm start or fresh LoRA), optimiser, domain mixer and
    the first step; shared by the single-process and the Ray loops."""
    run_dir = Path(config.out_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.toml").write_text(to_toml(config), encoding="utf-8")
    torch.manual_seed(config.seed)
    np.random.seed(config.seed)
    ckpt, state = resume_checkpoint(run_dir) if resume else (None, None)
    init_adapter = str(ckpt) if ckpt else initial_adapter(config, run_dir)
    policy = runtime.build_policy(config, adapter=init_adapter, trainable=True)
    optimizer = torch.optim.AdamW(
        [p for p in policy.model.parameters() if p.requires_grad], lr=config.optim.lr,
        weight_decay=config.optim.weight_decay,
    )
    mixer = DomainMixer(
        tasks=runtime.domain_tasks(config),
        weights={runtime.domain_name(d): d.weight for d in config.domains.mix},
        weighting=config.domains.weighting,
        total_steps=config.optim.steps,
        seed=config.seed,
    )
    check_context(policy, runtime.env_factory(config), [t for ts in mixer.tasks.values() for t in ts],
                  runtime.rollout_config(config, seed=config.seed, version=0))
    start = 0
    if ckpt is not None and state is not None:
        optimizer.load_state_dict(state.optimizer)
        set_rng_state(state.rng)
        mixer.load_state_dict(state.domains)
        start = state.step
        log.info("resumed from %s (step %d)", ckpt, start)
    return run_dir, ckpt, init_adapter, policy, optimizer, mixer, start


def run(config: TrainConfig, *, resume: bool = False, on_eval: EvalHook | None = None) -> TrainResult:
    """Train per ``config``; with ``resume`` continue from the run directory's latest checkpoint.

    ``on_eval`` is the periodic evaluation hook (required when ``eval.every > 0``)."""
    if on_eval is None and config.eval.every > 0:
        raise ConfigError(
            f"eval.every = {config.eval.every} needs a periodic evaluation hook: call "
            "sandgym.experiments.periodic_eval.train_with_eval(config) (what `sandgym train` runs), pass "
            "on_eval=..., or set eval.every = 0")
    if config.distributed.backend == "ray":  # rollout workers on Ray (sandgym/train/distributed/)
        from sandgym.train.distributed.ray_loop import run as run_on_ray

        return run_on_ray(config, resume=resume)
    run_dir, ckpt, _, policy, optimizer, mixer, start = setup(config, resume)
    model = policy.model
    logger = MetricsLogger(run_dir, tensorboard=config.logging.tensorboard, keep_up_to_step=start)
    env_factory = runtime.env_factory(config)
    last_ckpt = ckpt

    if start == 0 and on_eval is not None:  # the starting point (base or SFT warm start) of the held-out curve
        on_eval(config, policy, 0, run_dir)
    progress = runtime.progress(total=config.optim.steps, initial=start, desc="train")
    for step in range(start, config.optim.steps):
        t0 = time.perf_counter()
        # 1. sample a mixed batch of tasks and roll out G samples of each
        tasks = mixer.sample(step, config.optim.tasks_per_step)
        trajs = runtime.collect(policy, env_factory, tasks, config, seed=config.seed * 100_003 + step, version=step)
        t_roll = time.perf_counter() - t0
        # 2. rewards -> per-domain normalisation -> group advantages (infra failures dropped, never scored)
        valid, samples = batch_samples(trajs, mixer, config)
        # 3. loss -> optimiser step
        runtime.set_lr(optimizer, config, step)
        stats = None
        if samples:
            stats = learner_update(
                model,
                optimizer,
                samples,
                config.algorithm,
                pad_id=int(policy.tokenizer.pad_token_id),
                temperature=config.rollout.temperature,
                micro_batch=config.optim.micro_batch,
                max_grad_norm=config.optim.max_grad_norm,
                norm_len=config.rollout.max_total_tokens,
            )
            if not math.isfinite(stats.loss) or abs(stats.loss) > config.optim.loss_explode:
                raise TrainingDiverged(
                    f"step {step + 1}: loss={stats.loss!r} (limit optim.loss_explode={config.optim.loss_explode}); "
                    f"the last good checkpoint is {last_ckpt}. Lower optim.lr or raise optim.max_grad_norm."
                )
        # 4. log
        metrics = step_metrics(step + 1, trajs, valid, stats, t_roll, time.perf_counter() - t0, mixer)
        logger.log(metrics)
        logger.sample_trajectories(step + 1, trajs[: config.logging.sample_trajectories])
        progress.update(1)
        progress.set_postfix(
            reward=f"{metrics['rollout/reward_mean']:.3f}",
            kl=f"{metrics.get('losses/kl', 0.0):.4f}",
            tok_s=f"{metrics['perf/tokens_per_s']:.0f}",
        )
        # 5. maybe checkpoint
        if (step + 1) % config.checkpoint.every == 0 or step + 1 == config.optim.steps:
            state = TrainerState(
                step=step + 1,
                optimizer=optimizer.state_dict(),
                rng=rng_state(),
                domains=mixer.state_dict(),
                extra={"policy_version": step + 1},
            )
            last_ckpt = save_checkpoint(run_dir, model, state, config.checkpoint.keep_last)
        # 6. maybe evaluate on the fixed held-out sample ([eval] every K steps -> eval_curve.jsonl)
        if on_eval is not None:
            on_eval(config, policy, step + 1, run_dir)
    progress.close()
    logger.close()
    return TrainResult(run_dir, config.optim.steps, last_ckpt, logger.metrics_path, start)


def batch_samples(trajs: Sequence[Trajectory], mixer: DomainMixer, config: TrainConfig) -> tuple[list[Trajectory], list[Sample]]:
    """The learner's batch from one step's trajectories (the single-process and the Ray loops alike).

    Infra failures are dropped (never scored); the rest get per-token advantages (``token_advantages``); with
    ``beta = 0`` and ``skip_zero_advantage``, trajectories whose advantages are all zero (a group with no reward
    spread) carry no gradient and are left out. Returns (the valid trajectories, the samples to train on).
    """
    valid = [t for t in trajs if not t.infra_failure]
    skip = config.algorithm.skip_zero_advantage and config.algorithm.beta == 0
    keep = [(t, a) for t, a in zip(valid, token_advantages(valid, mixer, config), strict=True)
            if not (skip and max(map(abs, a), default=0.0) < 1e-8)]
    return valid, make_samples([t for t, _ in keep], [a for _, a in keep])


def compute_batch_advantages(trajs: Sequence[Trajectory], mixer: DomainMixer, config: TrainConfig) -> list[float]:
    """Per-trajectory advantages: per-domain normalised rewards, then the configured group estimator.

    Groups are the G samples of one task in this batch (``group_id``); a group left with fewer than two valid
    samples (after infra failures were dropped) gets advantage 0.
    """
    if not trajs:
        return []
    rewards = []
    for domain in {t.domain for t in trajs}:
        rs = [t.reward for t in trajs if t.domain == domain]
        mixer.observe(domain, rs, [t.success for t in trajs if t.domain == domain])
    for t in trajs:
        r = t.reward
        if config.domains.normalize:
            r = mixer.stats[t.domain].normalize(r)
        rewards.append(r)
    groups = torch.tensor([t.group_id for t in trajs])
    adv = compute_advantages(config.algorithm.name, torch.tensor(rewards, dtype=torch.float64), groups)
    sizes = {g: int((groups == g).sum()) for g in set(groups.tolist())}
    return [0.0 if sizes[t.group_id] < 2 else float(a) for t, a in zip(trajs, adv, strict=True)]


def token_advantages(trajs: Sequence[Trajectory], mixer: DomainMixer, config: TrainConfig) -> list[list[float]]:
    """One advantage per token of each trajectory (0 on tokens the model did not sample)."""
    if config.algorithm.advantage_mode == "per_step":
        return per_step_token_advantages(trajs, mixer, config)
    return [_per_token(t, a) for t, a in zip(trajs, compute_batch_advantages(trajs, mixer, config), strict=True)]


def turn_rewards(t: Trajectory) -> list[float]:
    """Per-turn rewards: the env's ``turn_rewards`` when it recorded them, else the final reward on the last turn."""
    recorded = t.metadata.get("turn_rewards")
    if recorded is not None and len(recorded) == t.num_turns:
        return [float(x) for x in recorded]
    return [0.0] * (t.num_turns - 1) + [t.reward] if t.num_turns else []


def per_step_token_advantages(trajs: Sequence[Trajectory], mixer: DomainMixer, config: TrainConfig) -> list[list[float]]:
    for domain in {t.domain for t in trajs}:
        ds = [t for t in trajs if t.domain == domain]
        mixer.observe(domain, [t.reward for t in ds], [t.success for t in ds])
    rewards = []
    for t in trajs:
        scale = mixer.stats[t.domain].std if config.domains.normalize else 1.0
        rewards.append([r / (scale if scale > 1e-4 else 1.0) for r in turn_rewards(t)])
    per_turn = per_step_advantages(rewards, [t.group_id for t in trajs], scale_by_std=config.algorithm.name == "grpo")
    out = []
    for t, adv in zip(trajs, per_turn, strict=True):
        tokens: list[float] = []
        for turn, a in zip(t.turns, adv, strict=True):
            tokens += [0.0] * len(turn.prompt_token_ids) + [a] * len(turn.completion_token_ids)
        out.append(tokens)
    return out


def batch_hash(trajs: Sequence[Trajectory]) -> float:
    """A number identifying which tasks a step trained on (equal across runs iff the batches are equal)."""
    import zlib

    return float(zlib.crc32(",".join(sorted({f"{t.group_id}:{t.task_id}" for t in trajs})).encode()))


def _per_token(t: Trajectory, advantage: float) -> list[float]:
    return [advantage * m for m in t.action_mask]


def step_metrics(
    step: int,
    trajs: Sequence[Trajectory],
    valid: Sequence[Trajectory],
    stats: Any,
    t_roll: float,
    t_total: float,
    mixer: DomainMixer,
) -> dict[str, float]:
    """Namespaced metrics of one step (``rollout/``, ``losses/``, ``domain/<name>/``, ``perf/``)."""
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
    if stats is not None:
        m.update(
            {
                "losses/loss": stats.loss,
                "losses/pg_loss": stats.pg_loss,
                "losses/kl": stats.kl,
                "losses/clip_frac": stats.clip_frac,
                "losses/tis_mean": stats.tis_mean,
                "losses/grad_norm": stats.grad_norm,
                "losses/trained_sequences": float(stats.sequences),
            }
        )
        if stats.grad_cosine is not None:
            m.update({"losses/grad_cosine": stats.grad_cosine, "losses/grad_cosine_min": float(stats.grad_cosine_min
                      if stats.grad_cosine_min is not None else stats.grad_cosine),
                      "losses/pcgrad_projections": float(stats.pcgrad_projections)})
    else:
        m["losses/trained_sequences"] = 0.0
    for domain in sorted({t.domain for t in trajs}):
        ds = [t for t in valid if t.domain == domain]
        if ds:
            m[f"domain/{domain}/reward"] = float(np.mean([t.reward for t in ds]))
            m[f"domain/{domain}/success"] = float(np.mean([t.success for t in ds]))
            m[f"domain/{domain}/length"] = float(np.mean([t.num_generated_tokens for t in ds]))
        m[f"domain/{domain}/weight"] = mixer.current_weights(step - 1).get(domain, 0.0)
    return m


def load_metrics(run_dir: str | Path) -> list[dict[str, float]]:
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return []
    return read_jsonl(path)


__all__ = ["run", "TrainResult", "TrainingDiverged", "compute_batch_advantages", "load_metrics", "save_jsonl"]
