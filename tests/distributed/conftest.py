"""A local 2-CPU Ray cluster shared by the distributed tests (started once; Ray start-up takes ~10 s), shut down
after them: its daemons would otherwise take CPU for the rest of the session."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")

TOY = "tests.train.toy_env:toy/Letters-v0"


@pytest.fixture(scope="package")
def ray_cluster() -> Iterator[Any]:
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def toy_overrides(model_dir: Path, out: Path, **extra: object) -> list[str]:
    """A tiny-model toy-env training config (as in tests/train/test_loop.py) with a few steps."""
    base: dict[str, object] = {
        "out_dir": json.dumps(str(out)),
        "model.name": json.dumps(str(model_dir)),
        "model.lora_r": 8,
        "model.lora_alpha": 16,
        "rollout.env": json.dumps(TOY),
        "rollout.max_new_tokens": 8,
        "rollout.max_turns": 1,
        "algorithm.group_size": 4,
        "optim.lr": 0.03,
        "optim.tasks_per_step": 4,
        "optim.steps": 3,
        "optim.micro_batch": 8,
        "checkpoint.every": 2,
        "logging.tensorboard": "false",
        "domains.mix": '[{suite = "coding/strings:train", n_tasks = 4}]',
    }
    base.update(extra)
    return [f"{k}={v}" for k, v in base.items()]
