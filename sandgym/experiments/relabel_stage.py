"""A second warm-start stage: the oracle warm start trained further on its own episodes, relabelled by the oracle.

DAgger-style, as the long-context track does by hand (``sft.source`` = a policy's episodes, ``sft.relabel``): roll
the warm-start adapter out on the train tasks, let the oracle label every state it reached (``sandgym.train.relabel``),
and train from that adapter on the result. The policy then learns to recover from the states it really visits, not
only the oracle's. ``sandgym demo --relabel`` and ``sandgym recipe repo`` run it between the SFT and RL stages.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from sandgym.evaluate.config import EvalConfig
from sandgym.evaluate.policies import load_policy
from sandgym.evaluate.run import evaluate_policy, load_tasks
from sandgym.train.config import TrainConfig


def relabel_warm_start(config: TrainConfig, adapter: Path, out: Path, *, samples: int = 1) -> Path:
    """Roll ``adapter`` out on ``config``'s train tasks (``sft.episodes`` episodes), relabel them with the oracle
    (``sft.relabel``), train from ``adapter`` on them; returns the new adapter (``out/adapter``; kept on a rerun)."""
    done = out / "adapter"
    if (done / "adapter_config.json").is_file():
        return done
    episodes = out / "episodes"
    rollout = replace(config.rollout, temperature=max(config.rollout.temperature, 0.7))
    cfg = EvalConfig(policy=str(adapter), suites=tuple(d.suite for d in config.domains.mix), out=str(episodes),
                     samples=samples, n_tasks=max(1, config.sft.episodes // samples), rollout=rollout)
    print(f"[relabel] rolling out the warm start on the train tasks -> {episodes}", file=sys.stderr, flush=True)
    policy, info = load_policy(str(adapter))
    evaluate_policy(policy, info, cfg, episodes, tasks=load_tasks(cfg))
    del policy
    from sandgym.train.sft import run_sft  # torch: only when this stage runs

    print(f"[relabel] training on the relabelled episodes -> {done}", file=sys.stderr, flush=True)
    run_sft(replace(config, sft=replace(config.sft, source=str(episodes / "episodes.jsonl")),
                    model=replace(config.model, adapter=str(adapter))), out)
    return done
