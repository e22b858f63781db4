"""``ServerPolicy``: a token-level policy whose turns are sampled by an inference server (vLLM, SGLang,
``sandgym serve-model``) through ``/v1/completions`` with token-id prompts.

Token in, token out: every turn sends the episode's whole token sequence (``GenerationRequest.token_ids``, built
by the rollout engine from the chat template and the earlier sampled ids, never re-tokenised text) and returns the
exact ids the server sampled with its log-probs. The tokenizer and chat format are local (the learner has the
same tokenizer as the server's model). Requests name ``model``: the base model's served name or an adapter
version (:meth:`select`). One HTTP request per episode, sent concurrently, so the server batches them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from sandgym.agents.inference_client import InferenceClient
from sandgym.agents.models import resolve_model
from sandgym.agents.policy import Generation, GenerationRequest, OnDone, SamplingParams
from sandgym.agents.prompting import ChatFormat, PromptConfig
from sandgym.errors import ConfigError


class ServerPolicy:
    """Token-level policy over an inference server.

    Args:
        server: an :class:`InferenceClient` or its url (``http://HOST:PORT``).
        tokenizer: the served model's tokenizer (see :meth:`for_model`).
        model: the name requests use (the base model's served name, or a loaded adapter's).
        concurrency: requests in flight at once (the server batches them).
    """

    def __init__(self, server: InferenceClient | str, tokenizer: Any, *, model: str,
                 prompt_config: PromptConfig | None = None, concurrency: int = 64) -> None:
        if concurrency < 1:
            raise ConfigError(f"concurrency={concurrency}: use at least 1 request in flight")
        self.client = server if isinstance(server, InferenceClient) else InferenceClient(server)
        self.tokenizer = tokenizer
        self.model = model
        self.concurrency = concurrency
        self._format = ChatFormat(tokenizer, prompt_config)

    @classmethod
    def for_model(cls, server: InferenceClient | str, model_name: str | os.PathLike[str], *,
                  served_name: str | None = None, **kwargs: Any) -> ServerPolicy:
        """Load the tokenizer of ``model_name`` locally (offline); requests name ``served_name`` (default: the
        server's base model, read from ``/v1/models``)."""
        from transformers import AutoTokenizer

        client = server if isinstance(server, InferenceClient) else InferenceClient(server)
        tokenizer = AutoTokenizer.from_pretrained(str(resolve_model(model_name)))
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        name = served_name or next(c.id for c in client.models() if c.parent is None)
        return cls(client, tokenizer, model=name, **kwargs)

    @classmethod
    def from_server(cls, server: InferenceClient | str, model: str | None = None, **kwargs: Any) -> ServerPolicy:
        """Sample from ``model`` (the base model or an adapter; default the base) of ``server``; the tokenizer is
        the local copy of the base model the server names in ``/v1/models`` (its ``root``, else its id)."""
        client = server if isinstance(server, InferenceClient) else InferenceClient(server)
        cards = {c.id: c for c in client.models()}
        name = model or next((c.id for c in cards.values() if c.parent is None), "")
        card = cards.get(name)
        if card is None:
            raise ConfigError(f"model {model!r} is not served at {client.base_url}; served: {sorted(cards)}")
        base = cards.get(card.parent, card) if card.parent else card
        return cls.for_model(client, base.root or base.id, served_name=name, **kwargs)

    def select(self, model: str) -> None:
        """Name the base model or adapter version that later requests sample from."""
        self.model = model

    # ---- Policy protocol -----------------------------------------------------------------------------------
    @property
    def chat_format(self) -> ChatFormat:
        return self._format

    @property
    def token_level(self) -> bool:
        return True

    def start_episode(self, key: int, task: Any) -> None:
        """The server keeps nothing per episode (prefix caching is its own business)."""

    def end_episode(self, key: int) -> None:
        """Nothing kept per episode."""

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingParams, on_done: OnDone | None = None
    ) -> list[Generation]:
        """One turn per request, sampled on the server; ``on_done`` fires as each answer arrives."""
        if not requests:
            return []
        model = self.model
        out: list[Generation | None] = [None] * len(requests)
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests))) as pool:
            futures = {pool.submit(self._turn, r, sampling, model): i for i, r in enumerate(requests)}
            for fut in as_completed(futures):
                i = futures[fut]
                gen = fut.result()
                out[i] = gen
                if on_done is not None:
                    on_done(i, gen)
        return [g for g in out if g is not None]

    def _turn(self, r: GenerationRequest, sampling: SamplingParams, model: str) -> Generation:
        if not r.token_ids:
            raise ConfigError("ServerPolicy needs GenerationRequest.token_ids (a token-level rollout)")
        (c,) = self.client.complete_tokens(
            model, r.token_ids, max_tokens=r.max_new_tokens, temperature=sampling.temperature, top_p=sampling.top_p,
            seed=r.seed, stop=sampling.stop_strings, stop_token_ids=sorted(self._format.stop_token_ids),
        )
        ended = bool(c.token_ids) and c.token_ids[-1] in self._format.stop_token_ids
        return Generation(
            text=self._format.decode(c.token_ids), token_ids=c.token_ids, logprobs=c.logprobs,
            truncated=c.finish_reason == "length", ended=ended,
            metadata={"model": model, "finish_reason": c.finish_reason},
        )
