"""Rollouts on an inference server (``[model] inference = "http://HOST:PORT"``), the learner in this process.

    collect(step)     -> the step's trajectories, sampled on the server by the adapter version the step names
    update            -> the optimiser step on the driver's model (as LocalBackend)
    publish(version)  -> save the adapter, hot-load it as ``<run>-v<version>`` (``/v1/load_lora_adapter``, in the
                         background) and unload versions no longer needed: only the adapter moves, never the
                         base weights

Trajectories carry the server's exact token ids and log-probs (:class:`~sandgym.agents.server_policy.ServerPolicy`)
and, as ``policy_version``, the adapter version that sampled them. The truncated importance weight of the loss
corrects for the server's log-probs differing from the learner's (another engine, another numeric path).

Async mode (``[distributed] async_mode = true``, ``max_staleness >= 1``): as soon as step t's rollouts are in, step
t+1's start on the server with the newest adapter (version t) while the learner trains step t, so generation and
the update overlap; every trajectory is at most one update stale (``server/staleness_mean``).
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sandgym.agents.inference_client import InferenceClient, InferenceServerError
from sandgym.agents.server_policy import ServerPolicy
from sandgym.agents.trajectory import Trajectory
from sandgym.errors import ConfigError
from sandgym.tasks.task import Task
from sandgym.train import components
from sandgym.train.backend import make_learner, step_seed
from sandgym.train.config import TrainConfig
from sandgym.train.domains import DomainMixer


class ServerBackend:
    """Generation on ``config.model.inference``; the update on ``policy.model`` here."""

    label = "train (server)"

    def __init__(self, config: TrainConfig, policy: Any, optimizer: Any, mixer: DomainMixer, *, run_dir: Path,
                 start: int) -> None:
        self.config, self.policy, self.mixer = config, policy, mixer
        self.client = InferenceClient(config.model.inference)
        try:
            cards = InferenceClient(config.model.inference, retries=0).models()
        except InferenceServerError as e:
            raise ConfigError(f"model.inference={config.model.inference!r}: {e}. Start one with `sandgym serve-model "
                              f"--model {config.model.name}` or `vllm serve` (docs/SCALING.md)") from e
        if not any(c.parent is None for c in cards):
            raise ConfigError(f"model.inference={config.model.inference!r} lists no base model in /v1/models")
        self.adapter_dir = Path(config.model.inference_adapter_dir or run_dir / "served_adapters").resolve()
        self.prefix = f"{run_dir.name or 'sandgym'}-{secrets.token_hex(3)}"
        self.envs = components.DomainEnvs(config)
        self.update = make_learner(config, policy.model, optimizer, None, int(policy.tokenizer.pad_token_id))
        d = config.distributed
        self.ahead = d.async_mode and d.max_staleness >= 1
        self.loaded: list[int] = []
        self.version = start
        self.lags: list[int] = []
        self.t_publish = self.t_wait = self.t_adapter_wait = 0.0
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandgym-server-rollout")
        self._next: tuple[int, Future[tuple[list[Trajectory], float]]] | None = None
        self._admin = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandgym-server-adapters")
        self._swap: Future[None] | None = None
        self.publish(start)

    def name(self, version: int) -> str:
        """The adapter name requests use for ``version``."""
        return f"{self.prefix}-v{version}"

    def collect(self, step: int) -> tuple[list[Trajectory], float]:
        """This step's trajectories and their generation seconds (in async mode started during the last update;
        ``server/wait_s`` is how long the learner waited for them); then start the next step's."""
        t0 = time.perf_counter()
        if self._next is not None and self._next[0] == step:
            trajs, t_gen = self._next[1].result()
        else:
            self._installed()
            trajs, t_gen = self._roll(step, self._tasks(step), self.version)
        self._next = None
        self.t_wait = time.perf_counter() - t0
        self.lags = [step - t.policy_version for t in trajs]
        if self.ahead and step + 1 < self.config.optim.steps:
            tasks = self._tasks(step + 1)  # drawn here, in the loop's thread (the mixer is not shared)
            self._installed()
            self._next = (step + 1, self._pool.submit(self._roll, step + 1, tasks, self.version))
        return trajs, t_gen

    def _tasks(self, step: int) -> list[Task]:
        return list(self.mixer.sample(step, self.config.optim.tasks_per_step))

    def _roll(self, step: int, tasks: list[Task], version: int) -> tuple[list[Trajectory], float]:
        t0 = time.perf_counter()
        policy = ServerPolicy(self.client, self.policy.tokenizer, model=self.name(version))
        trajs = components.collect(policy, self.envs, tasks, self.config, seed=step_seed(self.config, step),
                                   version=version)
        return trajs, time.perf_counter() - t0

    def publish(self, version: int) -> None:
        """Save the adapter now; load it on the server as ``name(version)`` (and unload versions nothing will
        sample) in the background: the server finishes the batch it is running first, and the learner need not
        wait for that; the next rollout with this version does."""
        self._installed()  # the previous version is in (the swaps run in order)
        t0 = time.perf_counter()
        path = self.policy.save_adapter(self.adapter_dir / f"v{version}")
        self._swap = self._admin.submit(self._install, version, path)
        self.version = version
        self.t_publish = time.perf_counter() - t0

    def _install(self, version: int, path: Path) -> None:
        keep = 2 if self.ahead else 1  # a rollout running ahead samples the version before this one
        while len(self.loaded) >= keep:  # unloaded first: the server needs only `keep` adapter slots
            self._drop(self.loaded.pop(0))
        self.client.load_adapter(self.name(version), str(path))
        self.loaded.append(version)

    def _installed(self) -> None:
        """Wait until the newest published version is loaded on the server (its errors surface here)."""
        if self._swap is not None:
            t0 = time.perf_counter()
            self._swap.result()
            self._swap = None
            self.t_adapter_wait += time.perf_counter() - t0

    def _drop(self, version: int) -> None:
        try:
            self.client.unload_adapter(self.name(version))
        finally:
            shutil.rmtree(self.adapter_dir / f"v{version}", ignore_errors=True)

    def metrics(self, step: int, t_total: float) -> dict[str, float]:
        lags = self.lags or [0]
        waited, self.t_adapter_wait = self.t_adapter_wait, 0.0
        return {"server/adapter_version": float(self.version), "server/publish_s": self.t_publish,
                "server/adapter_wait_s": waited, "server/wait_s": self.t_wait,
                "server/staleness_mean": sum(lags) / len(lags), "server/staleness_max": float(max(lags))}

    def sync_optimizer(self) -> None:
        """The optimiser is the driver's own."""

    def close(self) -> None:
        if self._next is not None:  # a rollout started for a step that will not run
            self._next[1].cancel()
            with contextlib.suppress(Exception):  # its result is not needed
                self._next[1].result()
        self._pool.shutdown(wait=True)
        with contextlib.suppress(Exception):  # a failed load was reported by the step that needed it
            self._installed()
        self._admin.shutdown(wait=True)
        with contextlib.suppress(InferenceServerError):  # the server went away first: nothing left to unload
            for v in self.loaded:
                self._drop(v)
        self.envs.close()
