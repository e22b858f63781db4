"""``OpenAIPolicy``: any OpenAI-compatible ``/chat/completions`` endpoint (vLLM, llama.cpp server, ...) as a
text-level policy, for evaluation. Standard library only (http.client), requests run in a small thread pool.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from sandgym.agents.http_transport import request
from sandgym.agents.policy import Generation, GenerationRequest, OnDone, SamplingParams, TextPolicy
from sandgym.errors import ConfigError, SandgymError


class EndpointError(SandgymError, RuntimeError):
    """The chat endpoint failed or answered something that is not a chat completion."""


class OpenAIPolicy(TextPolicy):
    """Text-level policy over an OpenAI-compatible chat endpoint.

    Args:
        base_url: e.g. ``http://127.0.0.1:8000/v1`` (``/chat/completions`` is appended).
        model: the model name the server expects.
        api_key: bearer token; default ``$OPENAI_API_KEY`` if set, else none.
        concurrency: parallel requests per batch.
        timeout_s / retries: per request; transient failures (connection, 429, 5xx) are retried with backoff.
        send_tools: also pass the env's tool schemas as ``tools`` (the system prompt already lists them).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        concurrency: int = 8,
        timeout_s: float = 120.0,
        retries: int = 2,
        send_tools: bool = False,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"base_url={base_url!r} must look like http://host:port/v1")
        if concurrency <= 0:
            raise ConfigError(f"concurrency={concurrency} must be a positive integer")
        self.base_url, self.model = base_url.rstrip("/"), model
        self._parts = parts
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.concurrency, self.timeout_s, self.retries = concurrency, timeout_s, retries
        self.send_tools = send_tools
        self.extra_body = dict(extra_body or {})

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingParams, on_done: OnDone | None = None
    ) -> list[Generation]:
        with ThreadPoolExecutor(max_workers=min(self.concurrency, max(1, len(requests)))) as pool:
            gens = list(pool.map(lambda r: self.reply(r, sampling), requests))
        if on_done is not None:
            for i, g in enumerate(gens):
                on_done(i, g)
        return gens

    def reply(self, r: GenerationRequest, sampling: SamplingParams) -> Generation:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [_wire(m) for m in r.messages],
            "max_tokens": r.max_new_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            **self.extra_body,
        }
        if sampling.stop_strings:
            body["stop"] = list(sampling.stop_strings)
        if r.seed is not None:
            body["seed"] = r.seed % (1 << 31)
        if self.send_tools and r.tools:
            body["tools"] = list(r.tools)
        data = self._post("/chat/completions", body)
        try:
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
            reason = choice.get("finish_reason")
        except (KeyError, IndexError, TypeError, AttributeError) as e:
            raise EndpointError(f"{self.base_url}: not a chat completion ({e}): {str(data)[:200]}") from e
        if reason == "stop" and sampling.stop_strings and not any(s in text for s in sampling.stop_strings):
            stop = choice.get("stop_reason")  # vLLM names the matched stop string; the API strips it
            if isinstance(stop, str) and stop in sampling.stop_strings:
                text += stop
        return Generation(text=text, truncated=reason == "length", metadata={"finish_reason": reason, "usage": data.get("usage", {})})

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        raw = request(self._parts, "POST", (self._parts.path.rstrip("/") or "") + path, body, api_key=self.api_key,
                      timeout_s=self.timeout_s, retries=self.retries, fail=EndpointError,
                      describe=lambda raw: f"{raw[:300]!r}; check base_url, model={self.model!r} and api_key")
        try:
            return dict(json.loads(raw))
        except (ValueError, TypeError) as e:
            raise EndpointError(f"{self.base_url}{path}: not JSON ({e}): {raw[:200]!r}") from e


def _wire(m: Any) -> dict[str, Any]:
    """A message as the API expects: tool results without a tool_call_id are sent as user messages."""
    role, content = str(m.get("role")), str(m.get("content") or "")
    if role == "tool" and not m.get("tool_call_id"):
        return {"role": "user", "content": f"<tool_response>\n{content}\n</tool_response>"}
    out = {"role": role, "content": content}
    if m.get("tool_call_id"):
        out["tool_call_id"] = m["tool_call_id"]
    return out
