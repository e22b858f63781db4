"""Data-parallel learner: R processes (torch.distributed, gloo on CPU) share one optimiser step.

Every rank holds the same adapter and optimiser state and receives the whole batch; it computes gradients on its
shard (every R-th micro-batch), weighting each micro-batch by its share of the *global* batch, exactly as
:func:`sandgym.train.step.learner_update` does in one process. The gradients are then summed with one
``all_reduce`` per optimiser step (the collective DistributedDataParallel runs per bucket; done explicitly here
because shards can hold unequal numbers of micro-batches, which would make DDP's per-backward hooks hang), so
every rank clips and steps on identical gradients and ends with identical weights.

``LearnerGroup`` runs the ranks as Ray actors for ``[distributed] learner_processes > 1``; ``spawn`` runs them as
local processes (tests, single-node use).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from sandgym.rollout.pool import import_ray
from sandgym.train import components
from sandgym.train.config import AlgorithmConfig, TrainConfig
from sandgym.train.distributed.ray_rollout import adapter_weights, load_adapter_weights
from sandgym.train.step import Sample, Shard, StepStats, learner_update, update_with_config

PORT_ATTEMPTS = 3
"""How many ports a learner group tries before its rendezvous failure is the caller's."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def init_process_group(rank: int, world: int, address: str) -> None:
    """Join the gloo group at ``address`` (``tcp://host:port``)."""
    if not dist.is_initialized():
        dist.init_process_group("gloo", init_method=address, rank=rank, world_size=world)


def broadcast_trainable(model: torch.nn.Module, src: int = 0) -> None:
    """Copy rank ``src``'s trainable parameters to every rank (what DDP does when it wraps a model)."""
    for p in model.parameters():
        if p.requires_grad:
            dist.broadcast(p.data, src)


def ddp_learner_update(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    samples: Sequence[Sample],
    algo: AlgorithmConfig,
    *,
    pad_id: int,
    temperature: float,
    micro_batch: int,
    max_grad_norm: float,
    norm_len: int,
) -> StepStats:
    """This rank's part of :func:`sandgym.train.step.learner_update` on the full ``samples``; same result."""
    shard = Shard(dist.get_rank(), dist.get_world_size(), dist.all_reduce)
    return learner_update(model, optimizer, samples, algo, pad_id=pad_id, temperature=temperature,
                          micro_batch=micro_batch, max_grad_norm=max_grad_norm, norm_len=norm_len, shard=shard)


def spawn(world: int, fn: Callable[..., Any], *args: Any) -> None:
    """Run ``fn(rank, world, address, *args)`` in ``world`` local processes joined in one gloo group. As in
    :class:`LearnerGroup`, a port taken between its pick and rank 0's bind (EADDRINUSE) is replaced by another one
    and ``fn`` runs again on every rank (``PORT_ATTEMPTS`` ports in all); any other failure is the caller's."""
    import torch.multiprocessing as mp

    for attempt in range(1, PORT_ATTEMPTS + 1):
        address = f"tcp://127.0.0.1:{free_port()}"
        try:
            mp.spawn(fn, args=(world, address, *args), nprocs=world, join=True)
            return
        except mp.ProcessRaisedException as exc:
            if "EADDRINUSE" not in str(exc) or attempt == PORT_ATTEMPTS:
                raise


class LearnerRank:
    """One learner rank (a Ray actor): its own model and optimiser, in the gloo group of the LearnerGroup."""

    def __init__(self, config: TrainConfig, adapter: str | None, pad_id: int, optimizer_state: dict[str, Any],
                 rank: int, world: int, address: str, weights: dict[str, Any]) -> None:
        torch.set_num_threads(1)
        self.config, self.pad_id, self.rank = config, pad_id, rank
        self.model = components.build_policy(config, adapter=adapter, trainable=True).model
        load_adapter_weights(self.model, weights)
        self.optimizer = torch.optim.AdamW([p for p in self.model.parameters() if p.requires_grad],
                                           lr=config.optim.lr, weight_decay=config.optim.weight_decay)
        self.optimizer.load_state_dict(optimizer_state)
        init_process_group(rank, world, address)

    def ready(self) -> bool:
        """True once the rank joined its group (a failed join raises here, in the caller's ``ray.get``)."""
        return True

    def update(self, samples: list[Sample], step: int) -> tuple[StepStats, dict[str, Any] | None]:
        """This rank's part of step ``step`` (its learning rate from the config's schedule, like the driver's)."""
        components.set_lr(self.optimizer, self.config, step)
        shard = Shard(dist.get_rank(), dist.get_world_size(), dist.all_reduce)
        stats = update_with_config(self.model, self.optimizer, samples, self.config, pad_id=self.pad_id, shard=shard)
        return stats, adapter_weights(self.model) if self.rank == 0 else None

    def optimizer_state(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


class LearnerGroup:
    """``learner_processes`` ranks as Ray actors; the driver's model mirrors rank 0 after every update."""

    def __init__(self, config: TrainConfig, model: Any, optimizer: Any, adapter: str | None, pad_id: int) -> None:
        self.ray = import_ray()
        self.model, self.optimizer = model, optimizer
        world = config.distributed.learner_processes
        cls = self.ray.remote(num_cpus=0)(LearnerRank)
        host = self.ray.util.get_node_ip_address()
        weights = adapter_weights(model)
        state = optimizer.state_dict()
        for attempt in range(1, PORT_ATTEMPTS + 1):
            # The port is free when picked but may be taken before rank 0 binds it (another process's ephemeral
            # port under load): the group then fails with EADDRINUSE, and is made again on a new port.
            address = f"tcp://{host}:{free_port()}"
            self.ranks = [cls.remote(config, adapter, pad_id, state, r, world, address, weights)
                          for r in range(world)]
            try:
                self.ray.get([r.ready.remote() for r in self.ranks])
                break
            except self.ray.exceptions.RayActorError as exc:
                self.close(timeout=1)
                if "EADDRINUSE" not in str(exc) or attempt == PORT_ATTEMPTS:
                    raise

    def __call__(self, samples: list[Sample], step: int) -> StepStats:
        outs = self.ray.get([r.update.remote(samples, step) for r in self.ranks])
        stats, weights = outs[0]
        load_adapter_weights(self.model, weights)
        return stats

    def sync_optimizer(self) -> None:
        """Copy rank 0's optimiser state into the driver's optimiser (before a checkpoint)."""
        self.optimizer.load_state_dict(self.ray.get(self.ranks[0].optimizer_state.remote()))

    def close(self, timeout: float = 10) -> None:
        for r in self.ranks:
            with contextlib.suppress(Exception):  # best effort: the rank may already be gone
                self.ray.get(r.close.remote(), timeout=timeout)
            self.ray.kill(r)

