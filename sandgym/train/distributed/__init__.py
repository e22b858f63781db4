"""Scale-out on Ray: rollout worker actors, synchronous and asynchronous training, data-parallel learner ranks.

Selected with ``[distributed] backend = "ray"``; see docs/SCALING.md. Nothing here imports Ray at module import
time, so the single-process path runs without it.
"""

from sandgym.train.distributed.ray_rollout import (
    RolloutUnit,
    UnitResult,
    adapter_weights,
    load_adapter_weights,
)

__all__ = ["RolloutUnit", "UnitResult", "adapter_weights", "load_adapter_weights"]
