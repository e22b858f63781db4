"""``HFPolicy``: a transformers causal LM wrapped with a PEFT LoRA adapter, as a token-level policy.

Generation runs on a *merged copy* by default (base weights + the adapter's delta, refreshed whenever the adapter's
parameters changed, detected through their in-place version counters), which removes the 6-37% cost of decoding
through an unmerged adapter; training and the reference pass use ``.model`` (the ``PeftModel``) itself.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from sandgym.agents.models import EMBEDDED_MODEL, resolve_model
from sandgym.agents.policy import Generation, GenerationRequest, OnDone, SamplingParams
from sandgym.agents.prompting import ChatFormat, PromptConfig
from sandgym.agents.sampler import PAD_SLACK, PastKV, SampledRow, length_buckets, reusable_cache, sample_batch
from sandgym.errors import ConfigError, ModelNotAvailableError

_ATTN_MLP = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
DEFAULT_TARGET_MODULES: dict[str, tuple[str, ...]] = {
    "llama": _ATTN_MLP,
    "mistral": _ATTN_MLP,
    "mixtral": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "qwen2": _ATTN_MLP,
    "qwen3": _ATTN_MLP,
    "gemma": _ATTN_MLP,
    "gemma2": _ATTN_MLP,
    "gemma3_text": _ATTN_MLP,
    "olmo2": _ATTN_MLP,
    "phi3": ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"),
    "gpt2": ("c_attn", "c_proj", "c_fc"),
    "gpt_neox": ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"),
    "gpt_bigcode": ("c_attn", "c_proj", "c_fc"),
    "opt": ("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"),
}


@dataclass(frozen=True)
class LoraSpec:
    """A LoRA adapter's shape. ``target_modules=None`` picks defaults for the architecture (else 'all-linear')."""

    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.r <= 0 or self.alpha <= 0:
            raise ConfigError(f"LoraSpec(r={self.r}, alpha={self.alpha}): both must be positive, e.g. r=16, alpha=32")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"LoraSpec.dropout={self.dropout} must be in [0, 1)")

    def targets_for(self, model_type: str) -> list[str] | str:
        if self.target_modules is not None:
            return list(self.target_modules)
        return list(DEFAULT_TARGET_MODULES.get(model_type, ())) or "all-linear"


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _remap(done: Callable[[int, SampledRow], None], index: Sequence[int]) -> Callable[[int, SampledRow], None]:
    """``done`` for a batch of some of the requests: its row ``j`` is request ``index[j]``."""
    return lambda j, row: done(index[j], row)


class HFPolicy:
    """A Hugging Face causal LM (+ LoRA) that samples exact token trajectories.

    Args:
        model: ``"smollm2-135m"`` (embedded), a local checkpoint directory, or a hub id already cached offline.
        lora: adapter shape for a fresh adapter; ``None`` for the plain model.
        adapter: an existing adapter directory (``save_adapter`` output) to load, trainable; overrides ``lora``.
        device / dtype: default CPU float32, or CUDA bfloat16 when a GPU is present.
        merge_for_generation: sample from a merged copy of the weights (faster; exact up to float rounding).
        generation_weights: ``"float"`` (the model's dtype; merged copy as above) or ``"int8"`` (a dynamic-int8 copy
            with the adapter applied live, ~2.5-3x faster decoding on CPU; the learner's truncated importance weight
            corrects the small mismatch: :mod:`sandgym.agents.int8_generation`).
    """

    def __init__(
        self,
        model: str | os.PathLike[str] = EMBEDDED_MODEL,
        *,
        lora: LoraSpec | None = LoraSpec(),
        adapter: str | os.PathLike[str] | None = None,
        device: str | torch.device | None = None,
        dtype: torch.dtype | str | None = None,
        merge_for_generation: bool = True,
        prompt_config: PromptConfig | None = None,
        generation_weights: str = "float",
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.name = os.fspath(model)
        path = resolve_model(model)
        dev = torch.device(device) if device is not None else default_device()
        dt = _dtype(dtype, dev)
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(path))
            base: Any = AutoModelForCausalLM.from_pretrained(str(path), dtype=dt)
        except OSError as e:
            raise ModelNotAvailableError(f"could not load model {self.name!r} from {path}: {e}") from e
        self._setup(base.to(dev), tokenizer, lora, adapter, merge_for_generation, prompt_config, generation_weights)

    @classmethod
    def from_model(
        cls,
        model: torch.nn.Module,
        tokenizer: Any,
        *,
        lora: LoraSpec | None = LoraSpec(),
        adapter: str | os.PathLike[str] | None = None,
        merge_for_generation: bool = True,
        prompt_config: PromptConfig | None = None,
        generation_weights: str = "float",
    ) -> HFPolicy:
        """Wrap an already-loaded model and tokenizer (tests, custom loading)."""
        self = cls.__new__(cls)
        self.name = getattr(getattr(model, "config", None), "name_or_path", "") or type(model).__name__
        self._setup(model, tokenizer, lora, adapter, merge_for_generation, prompt_config, generation_weights)
        return self

    def _setup(
        self,
        base: Any,
        tokenizer: Any,
        lora: LoraSpec | None,
        adapter: str | os.PathLike[str] | None,
        merge: bool,
        prompt_config: PromptConfig | None,
        generation_weights: str = "float",
    ) -> None:
        from peft import LoraConfig, PeftModel, get_peft_model

        if generation_weights not in ("float", "int8"):
            raise ConfigError(f"generation_weights={generation_weights!r} is not one of 'float', 'int8'")
        if generation_weights == "int8" and next(base.parameters()).device.type != "cpu":
            raise ConfigError("generation_weights='int8' runs on CPU only (dynamic int8 kernels); use 'float' on "
                              f"{next(base.parameters()).device}")

        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.tokenizer = tokenizer
        self._kv: dict[int, _EpisodeKV] = {}
        self._kv_supported: bool | None = None
        self._format = ChatFormat(tokenizer, prompt_config)
        self.has_adapter = adapter is not None or lora is not None
        if adapter is not None:
            if not (Path(adapter) / "adapter_config.json").is_file():
                raise ModelNotAvailableError(f"adapter={os.fspath(adapter)!r} has no adapter_config.json; pass a save_adapter() directory")
            self.model: Any = PeftModel.from_pretrained(base, str(adapter), is_trainable=True)
        elif lora is not None:
            cfg = LoraConfig(
                r=lora.r,
                lora_alpha=lora.alpha,
                lora_dropout=lora.dropout,
                target_modules=lora.targets_for(base.config.model_type),
                task_type="CAUSAL_LM",
            )
            self.model = get_peft_model(base, cfg)
        else:
            self.model = base
        self.merge_for_generation = merge and self.has_adapter
        self.generation_weights = generation_weights
        self._gen_model: Any = None
        self._gen_fingerprint: tuple[int, ...] = ()

    # ---- Policy protocol ---------------------------------------------------------------------------------------
    @property
    def chat_format(self) -> ChatFormat:
        return self._format

    @property
    def token_level(self) -> bool:
        return True

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    pad_slack: int = PAD_SLACK
    """Length-aware batching: requests whose lengths differ by more than this (or than the shorter's length) are
    sampled in separate batches, shortest first, so a short episode neither pads to a long document nor waits for
    it (:func:`~sandgym.agents.sampler.length_buckets`; -1: one batch)."""

    kv_reuse_mb: int = 2048
    """Memory for keeping each running episode's KV cache between its turns, so a turn prefills only the tokens
    added since the last one (0 turns it off; episodes beyond the budget re-prefill their whole history)."""

    def start_episode(self, key: int, task: Any) -> None:
        self._kv.pop(key, None)

    def end_episode(self, key: int) -> None:
        self._kv.pop(key, None)

    def _take_past(self, r: GenerationRequest, version: tuple[int, ...]) -> PastKV | None:
        """The episode's cache from its last turn, if it still describes a prefix of this prompt and these weights."""
        entry = self._kv.pop(r.key, None)
        if entry is None or entry.version != version or len(r.token_ids) <= len(entry.token_ids):
            return None
        if tuple(r.token_ids[: len(entry.token_ids)]) != entry.token_ids:
            return None
        return entry.kv

    def _keep_past(self, r: GenerationRequest, row: SampledRow, version: tuple[int, ...]) -> None:
        if row.kv is None:
            return
        used = sum(e.kv.nbytes for e in self._kv.values())
        if used + row.kv.nbytes <= self.kv_reuse_mb * 2**20:
            self._kv[r.key] = _EpisodeKV(tuple(r.token_ids) + row.token_ids[:-1], row.kv, version)

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingParams, on_done: OnDone | None = None
    ) -> list[Generation]:
        """Sample one turn for every request in one batch (see :func:`sandgym.agents.sampler.sample_batch`)."""
        if not requests:
            return []
        gens = [r.generator if r.generator is not None else torch.Generator().manual_seed(r.seed or 0) for r in requests]

        model = self.generation_model()
        if self._kv_supported is None:
            self._kv_supported = reusable_cache(model)
        reuse = self.kv_reuse_mb > 0 and bool(self._kv_supported)
        version = self._weights_version()
        pasts = [self._take_past(r, version) if reuse else None for r in requests]

        def done(i: int, row: SampledRow) -> None:
            if reuse:
                self._keep_past(requests[i], row, version)
            if on_done is not None:
                on_done(i, self._to_generation(row))

        rows: list[SampledRow | None] = [None] * len(requests)
        was_training = model.training
        model.eval()
        try:
            for bucket in length_buckets([len(r.token_ids) for r in requests], self.pad_slack):
                part = [requests[i] for i in bucket]
                for i, row in zip(bucket, sample_batch(
                    model,
                    [r.token_ids for r in part],
                    max_new_tokens=[r.max_new_tokens for r in part],
                    generators=[gens[i] for i in bucket],
                    temperature=sampling.temperature,
                    top_p=sampling.top_p,
                    stop_token_ids=self._format.stop_token_ids,
                    stop_strings=sampling.stop_strings,
                    decode=lambda ids: self.tokenizer.decode(ids, skip_special_tokens=False),
                    pad_token_id=int(self.tokenizer.pad_token_id),
                    on_done=_remap(done, bucket),
                    past=[pasts[i] for i in bucket],
                    keep_kv=[reuse and not r.last_turn for r in part],
                ), strict=True):
                    rows[i] = row
        finally:
            model.train(was_training)
        return [self._to_generation(r) for r in rows if r is not None]

    def _to_generation(self, row: SampledRow) -> Generation:
        return Generation(
            text=self._format.decode(row.token_ids),
            token_ids=row.token_ids,
            logprobs=row.logprobs,
            truncated=row.truncated,
            ended=row.ended,
        )

    # ---- weights ------------------------------------------------------------------------------------------------
    def generation_model(self) -> Any:
        """The module to sample from: ``.model`` itself, a merged copy brought up to date with the adapter, or the
        int8 copy that reads the adapter live."""
        if self.generation_weights == "int8":
            if self._gen_model is None:
                from sandgym.agents.int8_generation import int8_generation_copy

                self._gen_model = int8_generation_copy(self._build_plain_copy(own_targets=False), self._lora_layers())
            return self._gen_model
        if not self.merge_for_generation:
            return self.model
        layers = self._lora_layers()
        fingerprint = self._weights_version()
        if self._gen_model is None:
            self._gen_model = self._build_plain_copy()
            self._gen_fingerprint = ()
        if fingerprint != self._gen_fingerprint or not self._gen_fingerprint:
            with torch.no_grad():
                for name, module in layers:
                    target = self._gen_model.get_submodule(name).weight
                    target.copy_(module.base_layer.weight)
                    adapter = module.active_adapters[0]
                    if not module.disable_adapters and adapter in module.lora_A:
                        target.add_(module.get_delta_weight(adapter).to(target.dtype))
            self._gen_fingerprint = fingerprint
        return self._gen_model

    def _weights_version(self) -> tuple[int, ...]:
        """Changes whenever an optimiser step (or any in-place write) touches the adapter."""
        return tuple(p._version for _, m in self._lora_layers() for p in _lora_params(m))

    def _lora_layers(self) -> list[tuple[str, Any]]:
        from peft.tuners.lora import LoraLayer

        prefix = "base_model.model."
        return [(n[len(prefix):], m) for n, m in self.model.named_modules() if isinstance(m, LoraLayer) and n.startswith(prefix)]

    def _build_plain_copy(self, *, own_targets: bool = True) -> Any:
        """A plain model sharing every non-LoRA tensor with ``.model`` and owning copies of the LoRA targets (sharing
        those too with ``own_targets=False``)."""
        from transformers import AutoModelForCausalLM

        base = self.model.get_base_model() if self.has_adapter else self.model
        with torch.device("meta"):
            copy = AutoModelForCausalLM.from_config(base.config)
        lora_names = {n for n, _ in self._lora_layers()}
        state = {}
        for k, v in base.state_dict().items():
            if "lora_" in k:
                continue
            k = k.replace(".base_layer.", ".")
            owner = k.rsplit(".", 1)[0]
            state[k] = v.detach().clone() if own_targets and owner in lora_names else v.detach()
        copy.load_state_dict(state, strict=False, assign=True)
        for name, _ in list(copy.named_buffers()):
            owner, _, leaf = name.rpartition(".")
            copy.get_submodule(owner)._buffers[leaf] = base.get_buffer(name)
        copy.tie_weights()
        missing = [n for n, p in copy.named_parameters() if p.is_meta]
        if missing:
            raise RuntimeError(f"merged generation copy is missing weights {missing[:5]}; use merge_for_generation=False")
        copy.generation_config = base.generation_config
        return copy.eval().requires_grad_(False)

    @contextlib.contextmanager
    def reference(self) -> Iterator[Any]:
        """The reference policy for KL: ``.model`` with its adapter disabled (no second copy of the weights)."""
        if not self.has_adapter:
            yield self.model
            return
        with self.model.disable_adapter():
            yield self.model

    def save_adapter(self, directory: str | os.PathLike[str]) -> Path:
        """Save the LoRA adapter (and tokenizer) to ``directory``; load it back with ``HFPolicy(..., adapter=dir)``."""
        if not self.has_adapter:
            raise ConfigError("save_adapter: this HFPolicy has no LoRA adapter (lora=None); build it with lora=LoraSpec()")
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(str(out))
        self.tokenizer.save_pretrained(str(out))
        return out


def _lora_params(module: Any) -> list[torch.Tensor]:
    return [p for d in (module.lora_A, module.lora_B) for sub in d.values() for p in sub.parameters()]


def _dtype(dtype: torch.dtype | str | None, device: torch.device) -> torch.dtype:
    if dtype is None:
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        value = getattr(torch, dtype)
    except AttributeError:
        value = None
    if not isinstance(value, torch.dtype):
        raise ConfigError(f"dtype={dtype!r} is not a torch dtype; use 'float32', 'bfloat16' or 'float16'")
    return value


@dataclass(frozen=True)
class _EpisodeKV:
    token_ids: tuple[int, ...]
    """The tokens ``kv`` holds (the prompt and the turn's sampled tokens but the last)."""
    kv: PastKV
    version: tuple[int, ...]
