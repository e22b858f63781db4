"""``sandgym train``: the RL loop, top to bottom.

    for step:  sample a mixed batch of tasks -> roll out G samples each -> rewards -> advantages
               -> loss -> optimiser step -> publish the adapter -> log -> maybe checkpoint -> maybe evaluate

Where rollouts and the update run is the backend's business (:mod:`sandgym.train.backend`): in this process, or
on Ray workers ahead of the learner (``[distributed] backend = "ray"``); the loop is this one either way.

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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sandgym.agents.context_window import check_context
from sandgym.configs import to_dict, to_toml
from sandgym.errors import ConfigError, SandgymError
from sandgym.train import components
from sandgym.train.backend import Backend, LocalBackend
from sandgym.train.checkpoint import (
    TrainerState,
    resume_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from sandgym.train.config import TrainConfig
from sandgym.train.distributed.ray_backend import DispatchHook, RayBackend
from sandgym.train.domains import DomainMixer
from sandgym.train.logger import MetricsLogger
from sandgym.train.metrics import off_policy_warning, step_metrics
from sandgym.train.server_backend import ServerBackend
from sandgym.train.sft import initial_adapter
from sandgym.train.step import batch_samples

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
    the first step."""
    run_dir = Path(config.out_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.toml").write_text(to_toml(config), encoding="utf-8")
    torch.manual_seed(config.seed)
    np.random.seed(config.seed)
    ckpt, state = resume_checkpoint(run_dir) if resume else (None, None)
    mixer = DomainMixer(
        tasks=components.domain_tasks(config),
        weights={components.domain_name(d): d.weight for d in config.domains.mix},
        weighting=config.domains.weighting,
        total_steps=config.optim.steps,
        seed=config.seed,
    )
    rollouts = components.DomainRollouts(config)

    def check_prompts(policy: Any) -> None:  # each domain's prompts against its own rollout's budget
        for name, tasks in mixer.tasks.items():
            key = rollouts.key_of(name)
            spec = rollouts.specs[key]
            check_context(policy, spec.env_factory(), tasks, spec.rollout_config(config.seed),
                          where=rollouts.where(key))

    # a warm start checks the prompts before it trains, so a budget too small costs no SFT time
    init_adapter = str(ckpt) if ckpt else initial_adapter(config, run_dir, check=check_prompts)
    policy = components.build_policy(config, adapter=init_adapter, trainable=True)
    optimizer = torch.optim.AdamW(
        [p for p in policy.model.parameters() if p.requires_grad], lr=config.optim.lr,
        weight_decay=config.optim.weight_decay,
    )
    check_prompts(policy)
    start = 0
    if ckpt is not None and state is not None:
        optimizer.load_state_dict(state.optimizer)
        set_rng_state(state.rng)
        mixer.load_state_dict(state.domains)
        start = state.step
        log.info("resumed from %s (step %d)", ckpt, start)
    return run_dir, ckpt, init_adapter, policy, optimizer, mixer, start


def run(config: TrainConfig, *, resume: bool = False, on_eval: EvalHook | None = None,
        on_dispatch: DispatchHook | None = None) -> TrainResult:
    """Train per ``config``; with ``resume`` continue from the run directory's latest checkpoint.

    ``on_eval`` is the periodic evaluation hook (required when ``eval.every > 0``). ``on_dispatch(slot, actor,
    unit)`` is called as the Ray backend hands a unit to a worker (fault-injection tests use it)."""
    if on_eval is None and config.eval.every > 0:
        raise ConfigError(
            f"eval.every = {config.eval.every} needs a periodic evaluation hook: call "
            "sandgym.experiments.periodic_eval.train_with_eval(config) (what `sandgym train` runs), pass "
            "on_eval=..., or set eval.every = 0")
    run_dir, ckpt, init_adapter, policy, optimizer, mixer, start = setup(config, resume)
    model = policy.model
    logger = MetricsLogger(run_dir, tensorboard=config.logging.tensorboard, keep_up_to_step=start,
                           trackers=config.logging.trackers, project=config.logging.project,
                           config=to_dict(config))
    backend: Backend
    if config.distributed.backend == "ray":  # rollout workers on Ray (sandgym/train/distributed/)
        backend = RayBackend(config, policy, optimizer, mixer, init_adapter=init_adapter, start=start,
                             run_dir=run_dir, on_dispatch=on_dispatch)
    elif config.model.inference:  # rollouts on a vLLM-compatible server ([model] inference)
        backend = ServerBackend(config, policy, optimizer, mixer, run_dir=run_dir, start=start)
    else:
        backend = LocalBackend(config, policy, optimizer, mixer)
    last_ckpt = ckpt

    if start == 0 and on_eval is not None:  # the starting point (base or SFT warm start) of the held-out curve
        on_eval(config, policy, 0, run_dir)
    progress = components.progress(total=config.optim.steps, initial=start, desc=backend.label)
    try:
        for step in range(start, config.optim.steps):
            t0 = time.perf_counter()
            # 1. sample a mixed batch of tasks and roll out G samples of each (here, or on the backend's workers)
            trajs, t_roll = backend.collect(step)
            # 2. rewards -> per-domain normalisation -> group advantages (infra failures dropped, never scored)
            valid, samples = batch_samples(trajs, mixer, config)
            # 3. loss -> optimiser step -> the new adapter to whatever samples the next rollouts
            components.set_lr(optimizer, config, step)
            stats = backend.update(samples, step) if samples else None
            if stats is not None and (not math.isfinite(stats.loss) or abs(stats.loss) > config.optim.loss_explode):
                raise TrainingDiverged(
                    f"step {step + 1}: loss={stats.loss!r} (limit optim.loss_explode={config.optim.loss_explode}); "
                    f"the last good checkpoint is {last_ckpt}. Lower optim.lr or raise optim.max_grad_norm."
                )
            backend.publish(step + 1)
            # 4. log
            t_total = time.perf_counter() - t0
            metrics = step_metrics(step + 1, trajs, valid, stats, t_roll, t_total, mixer)
            metrics.update(backend.metrics(step, t_total))
            logger.log(metrics)
            if step == start and (warning := off_policy_warning(metrics, config.model.generation_weights)):
                log.warning(warning)
            logger.sample_trajectories(step + 1, trajs[: config.logging.sample_trajectories])
            progress.update(1)
            progress.set_postfix(
                reward=f"{metrics['rollout/reward_mean']:.3f}",
                kl=f"{metrics.get('losses/kl', 0.0):.4f}",
                tok_s=f"{metrics['perf/tokens_per_s']:.0f}",
            )
            # 5. maybe checkpoint
            if (step + 1) % config.checkpoint.every == 0 or step + 1 == config.optim.steps:
                backend.sync_optimizer()
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
    finally:
        progress.close()
        logger.close()
        backend.close()
    return TrainResult(run_dir, config.optim.steps, last_ckpt, logger.metrics_path, start)


__all__ = ["run", "setup", "TrainResult", "TrainingDiverged"]
