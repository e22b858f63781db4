"""The generation engine behind ``sandgym serve-model``: one causal LM, LoRA adapters loaded by name, requests
batched by a single worker thread through sandgym's own sampler (:func:`sandgym.agents.sampler.sample_batch`).

Requests that arrive while a batch runs wait in a queue; the worker takes every waiting request that can share a
batch (same adapter, temperature, top-p and stop strings) and samples them together, so the rows of a GRPO group
share one prompt prefill. Each row has its own ``torch.Generator`` (seeded when the request names a seed), so a
sample does not depend on which other requests share its batch.

Adapters are PEFT LoRA directories (``HFPolicy.save_adapter`` output), loaded into one ``PeftModel`` under their
names. A batch's adapter is merged into the targeted weights (from a kept pristine copy, so switching back is
exact) and the model runs with LoRA disabled, at the plain model's speed; base-model batches run on the pristine
weights. Only adapters move: the base weights are loaded once.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from sandgym.agents.models import EMBEDDED_MODEL, resolve_model
from sandgym.agents.prompting import ChatFormat
from sandgym.agents.sampler import SampledRow, sample_batch
from sandgym.errors import ConfigError, ModelNotAvailableError, SandgymError

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class AdapterError(SandgymError, ValueError):
    """A LoRA adapter cannot be loaded, unloaded or selected (the message names it and the fix)."""

    def __init__(self, message: str, status: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.param = status, param


@dataclass(frozen=True)
class RowRequest:
    """One sequence to sample: its prompt ids, budget and random stream."""

    prompt: tuple[int, ...]
    max_tokens: int
    seed: int | None = None


@dataclass(frozen=True)
class BatchKey:
    """Requests with equal keys can be sampled in one batch."""

    adapter: str | None
    temperature: float
    top_p: float
    stop: tuple[str, ...]
    stop_token_ids: frozenset[int] = frozenset()


@dataclass
class _Job:
    key: BatchKey
    rows: list[RowRequest]
    future: Future[list[SampledRow]] = field(default_factory=Future)


class ModelEngine:
    """A causal LM (+ named LoRA adapters) that samples batches of token prompts in one worker thread.

    Args:
        model: the embedded ``smollm2-135m``, a local checkpoint directory or a hub id cached offline.
        served_name: the name requests use for the base model (default: ``model`` as given).
        max_loras: the most adapters loaded at once (loading one more is refused: unload one first).
        device / dtype: default CPU float32 (CUDA bfloat16 when a GPU is present).
    """

    def __init__(self, model: str | os.PathLike[str] = EMBEDDED_MODEL, *, served_name: str | None = None,
                 max_loras: int = 4, device: str | None = None, dtype: str | None = None) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = resolve_model(model)
        dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        dt = _DTYPES.get(dtype or ("bfloat16" if dev.type == "cuda" else "float32"))
        if dt is None:
            raise ConfigError(f"dtype={dtype!r}: use one of {sorted(_DTYPES)}")
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(path))
            base: Any = AutoModelForCausalLM.from_pretrained(str(path), dtype=dt)
            base = base.to(dev)
        except OSError as e:
            raise ModelNotAvailableError(f"could not load model {os.fspath(model)!r} from {path}: {e}") from e
        self._setup(base, tokenizer, served_name or os.fspath(model), str(path), max_loras)

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, *, served_name: str, max_loras: int = 4) -> ModelEngine:
        """Serve an already-loaded model and tokenizer (tests)."""
        self = cls.__new__(cls)
        self._setup(model, tokenizer, served_name, served_name, max_loras)
        return self

    batch_window_s: float = 0.02
    """How long the worker waits after a request arrives for others to join its batch (the requests of one
    rollout turn arrive a few milliseconds apart)."""

    def _setup(self, base: Any, tokenizer: Any, name: str, root: str, max_loras: int) -> None:
        if max_loras < 1:
            raise ConfigError(f"max_loras={max_loras}: serve at least 1 adapter slot, e.g. --max-loras 4")
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.base, self.tokenizer, self.name, self.root, self.max_loras = base.eval(), tokenizer, name, root, max_loras
        self.chat_format = ChatFormat(tokenizer)
        self.vocab_size = int(base.get_input_embeddings().weight.shape[0])
        self.max_model_len = int(getattr(base.config, "max_position_embeddings", 0) or 0) or None
        self.adapters: dict[str, str] = {}
        """Loaded adapter name -> its directory."""
        self._peft: Any = None
        self._pristine: dict[str, torch.Tensor] = {}
        self._merged: str | None = None
        """The adapter merged into the LoRA layers' base weights now (None: none)."""
        self._lock = threading.Lock()  # adapter changes vs. a running batch
        self._queue: queue.Queue[_Job | None] = queue.Queue()
        self._worker = threading.Thread(target=self._run, name="sandgym-model-engine", daemon=True)
        self._worker.start()

    # ---- adapters -------------------------------------------------------------------------------------------
    def load_adapter(self, name: str, path: str) -> None:
        """Load the PEFT adapter at ``path`` under ``name`` (vLLM's ``/v1/load_lora_adapter``)."""
        from peft import PeftModel

        if not name or not path:
            raise AdapterError("Both 'lora_name' and 'lora_path' must be provided.")
        if name == self.name or name in self.adapters:
            raise AdapterError(f"The lora adapter '{name}' has already been loaded; unload it first or pick a new name.")
        if not (Path(path) / "adapter_config.json").is_file():
            raise AdapterError(f"lora_path={path!r} has no adapter_config.json; pass an HFPolicy.save_adapter() directory",
                               status=404)
        if len(self.adapters) >= self.max_loras:
            raise AdapterError(f"{len(self.adapters)} adapters are loaded (max_loras={self.max_loras}): unload one of "
                               f"{sorted(self.adapters)} first, or restart with a larger --max-loras")
        with self._lock:
            if self._peft is None:
                self._peft = PeftModel.from_pretrained(self.base, path, adapter_name=name).eval()
            else:
                self._peft.load_adapter(path, adapter_name=name)
            self.adapters[name] = path

    def unload_adapter(self, name: str) -> None:
        """Drop the adapter ``name`` (vLLM's ``/v1/unload_lora_adapter``)."""
        if name not in self.adapters:
            raise AdapterError(f"The lora adapter '{name}' cannot be found.", status=404)
        with self._lock:
            if self._merged == name or len(self.adapters) == 1:
                self._merge(None)
            if len(self.adapters) == 1:  # PEFT keeps at least one adapter: take the LoRA layers out, keep the base
                self.base = self._peft.unload().eval()
                self._peft = None
                self._pristine.clear()
            else:
                rest = next(a for a in self.adapters if a != name)
                self._peft.set_adapter(rest)
                self._peft.delete_adapter(name)
            del self.adapters[name]

    def resolve(self, model: str | None) -> str | None:
        """The adapter a request's ``model`` names (None: the base model); AdapterError (404) for an unknown name."""
        if not model or model == self.name or model == self.root:
            return None
        if model in self.adapters:
            return model
        raise AdapterError(f"The model `{model}` does not exist; served: {[self.name, *self.adapters]}", status=404,
                           param="model")

    # ---- generation -----------------------------------------------------------------------------------------
    def submit(self, key: BatchKey, rows: Sequence[RowRequest]) -> Future[list[SampledRow]]:
        """Queue ``rows`` for sampling; the future holds one :class:`SampledRow` per row, in order."""
        job = _Job(key, list(rows))
        self._queue.put(job)
        return job.future

    def close(self) -> None:
        self._queue.put(None)

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            batch: list[_Job] = [job]
            rest: list[_Job | None] = []
            deadline = time.monotonic() + self.batch_window_s
            while True:  # everything waiting, or arriving within the batch window, that can share the batch
                remaining = deadline - time.monotonic()
                try:
                    nxt = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    rest.append(nxt)
                    break
                (batch if nxt.key == job.key else rest).append(nxt)
            for r in rest:
                self._queue.put(r)
            try:
                rows = self._sample(job.key, [row for j in batch for row in j.rows])
            except Exception as e:  # noqa: BLE001 - the error reaches every waiting request
                for j in batch:
                    j.future.set_exception(e)
                continue
            i = 0
            for j in batch:
                j.future.set_result(rows[i : i + len(j.rows)])
                i += len(j.rows)

    def _sample(self, key: BatchKey, rows: list[RowRequest]) -> list[SampledRow]:
        gens = [torch.Generator().manual_seed(r.seed if r.seed is not None else int(torch.seed()) % (1 << 63))
                for r in rows]
        with self._lock:
            model = self.base if self._peft is None else self._peft
            if self._peft is not None:
                self._merge(key.adapter)
            # the adapter (if any) is merged into the weights: the LoRA layers run disabled, at the plain model's speed
            ctx = self._peft.disable_adapter() if self._peft is not None else contextlib.nullcontext()
            with ctx:
                return sample_batch(
                    model, [r.prompt for r in rows], max_new_tokens=[r.max_tokens for r in rows], generators=gens,
                    temperature=key.temperature, top_p=key.top_p,
                    stop_token_ids=self.chat_format.stop_token_ids | key.stop_token_ids, stop_strings=key.stop,
                    decode=lambda ids: self.tokenizer.decode(ids, skip_special_tokens=False),
                    pad_token_id=int(self.tokenizer.pad_token_id),
                )

    def _merge(self, adapter: str | None) -> None:
        """Make every LoRA layer's base weight its pristine copy plus ``adapter``'s delta (None: pristine alone).
        Each layer's pristine weight is kept from when it was first wrapped (one copy of the targeted weights);
        switching adapters copies it back, so the base weights never drift."""
        from peft.tuners.lora import LoraLayer

        if adapter == self._merged:
            return
        with torch.no_grad():
            for name, layer in self._peft.named_modules():
                if not isinstance(layer, LoraLayer):
                    continue
                module: Any = layer
                weight: torch.Tensor = module.get_base_layer().weight
                if name not in self._pristine:
                    self._pristine[name] = weight.detach().clone()
                weight.copy_(self._pristine[name])
                if adapter is not None and adapter in module.lora_A:
                    weight.add_(module.get_delta_weight(adapter).to(weight.dtype))
        self._merged = adapter
