"""A client of vLLM's OpenAI-compatible server (``vllm serve``, SGLang, ``sandgym serve-model``): token-id
completions with per-token log-probs, the model list, and LoRA adapters loaded and unloaded at run time.

Standard library only (``http.client``). Token ids are read from ``logprobs.tokens`` written ``token_id:N``
(``return_tokens_as_token_ids``, every vLLM since 0.6) and checked against ``choices[].token_ids`` when the server
also returns those (``return_token_ids``, vLLM >= 0.10.2).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sandgym.agents.http_transport import request
from sandgym.errors import ConfigError, SandgymError

TOKEN_ID_PREFIX = "token_id:"


class InferenceServerError(SandgymError, RuntimeError):
    """The inference server failed, refused a request, or answered something that is not vLLM's schema."""


@dataclass(frozen=True)
class TokenCompletion:
    """One choice of a ``/v1/completions`` answer, as token ids."""

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: str
    """"stop" (a stop token or string) or "length" (max_tokens)."""
    stop_reason: int | str | None = None
    text: str = ""


@dataclass(frozen=True)
class ModelCard:
    """One entry of ``/v1/models``: the base model (``parent`` None) or a LoRA adapter."""

    id: str
    root: str | None = None
    parent: str | None = None
    max_model_len: int | None = None


class InferenceClient:
    """vLLM's HTTP API at ``base_url`` (``http://HOST:PORT`` or ``http://HOST:PORT/v1``).

    Transient failures (connection errors, 429, 5xx) are retried ``retries`` times with backoff; other HTTP
    errors raise :class:`InferenceServerError` with the server's message.
    """

    def __init__(self, base_url: str, *, api_key: str | None = None, timeout_s: float = 600.0, retries: int = 2) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"inference server url {base_url!r} must look like http://HOST:PORT (e.g. the address "
                              "`vllm serve` or `sandgym serve-model` prints)")
        path = parts.path.rstrip("/")
        self._parts = parts
        self._prefix = path if path.endswith("/v1") else path + "/v1"
        self.base_url = f"{parts.scheme}://{parts.netloc}{self._prefix}"
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.timeout_s, self.retries = timeout_s, retries

    # ---- endpoints ------------------------------------------------------------------------------------------
    def models(self) -> list[ModelCard]:
        """``GET /v1/models``: the base model first, then the loaded adapters."""
        return parse_models(self._json("GET", "/models"))

    def load_adapter(self, name: str, path: str) -> None:
        """``POST /v1/load_lora_adapter`` (vLLM needs ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`` and ``--enable-lora``)."""
        self._request("POST", "/load_lora_adapter", {"lora_name": name, "lora_path": path})

    def unload_adapter(self, name: str) -> None:
        """``POST /v1/unload_lora_adapter``."""
        self._request("POST", "/unload_lora_adapter", {"lora_name": name})

    def complete_tokens(
        self,
        model: str,
        prompt: Sequence[int],
        *,
        max_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop: Sequence[str] = (),
        stop_token_ids: Sequence[int] = (),
        n: int = 1,
    ) -> list[TokenCompletion]:
        """Sample ``n`` continuations of the token ids ``prompt``; their exact ids and log-probs come back."""
        body: dict[str, Any] = {
            "model": model, "prompt": [int(t) for t in prompt], "max_tokens": int(max_tokens),
            "temperature": float(temperature), "top_p": float(top_p), "n": int(n),
            "logprobs": 0, "return_tokens_as_token_ids": True, "return_token_ids": True,
            "skip_special_tokens": False, "include_stop_str_in_output": True,
        }
        if seed is not None:
            body["seed"] = int(seed) % (1 << 63)
        if stop:
            body["stop"] = list(stop)
        if stop_token_ids:
            body["stop_token_ids"] = sorted(int(t) for t in stop_token_ids)
        out = parse_completion(self._json("POST", "/completions", body))
        if len(out) != n:
            raise InferenceServerError(f"{self.base_url}/completions: asked for n={n} choices, got {len(out)}")
        return out

    # ---- transport ------------------------------------------------------------------------------------------
    def _json(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        raw = self._request(method, path, body)
        try:
            return json.loads(raw)
        except ValueError as e:
            raise InferenceServerError(f"{self.base_url}{path}: not JSON ({e}): {raw[:200]!r}") from e

    def _request(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> bytes:
        return request(self._parts, method, self._prefix + path, body, api_key=self.api_key, timeout_s=self.timeout_s,
                       retries=self.retries, fail=InferenceServerError, describe=_message,
                       hint="; is the server running at that address?")


def parse_completion(body: Any) -> list[TokenCompletion]:
    """The choices of a ``/v1/completions`` body requested with ``logprobs`` and ``return_tokens_as_token_ids``."""
    try:
        choices = sorted(body["choices"], key=lambda c: c["index"])
        return [_parse_choice(c) for c in choices]
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise InferenceServerError(f"not a vLLM completion with token-id log-probs ({type(e).__name__}: {e}): "
                                   f"{str(body)[:300]}") from e


def _parse_choice(c: Mapping[str, Any]) -> TokenCompletion:
    lp = c.get("logprobs")
    if not lp:
        raise ValueError("the choice has no logprobs; request them with logprobs=0")
    tokens = list(lp["tokens"])
    ids = tuple(_token_id(t) for t in tokens)
    logprobs = tuple(float(x) if x is not None else float("nan") for x in lp["token_logprobs"])
    if len(logprobs) != len(ids):
        raise ValueError(f"{len(ids)} tokens but {len(logprobs)} token_logprobs")
    direct = c.get("token_ids")
    if direct is not None and tuple(int(t) for t in direct) != ids:
        raise ValueError(f"token_ids {list(direct)[:8]} disagree with logprobs.tokens {list(ids)[:8]}")
    return TokenCompletion(ids, logprobs, str(c["finish_reason"]), c.get("stop_reason"), str(c.get("text") or ""))


def _token_id(token: str) -> int:
    if not isinstance(token, str) or not token.startswith(TOKEN_ID_PREFIX):
        raise ValueError(f"token {token!r} is not written 'token_id:N'; request return_tokens_as_token_ids=true")
    return int(token[len(TOKEN_ID_PREFIX):])


def parse_models(body: Any) -> list[ModelCard]:
    """The cards of a ``/v1/models`` body."""
    try:
        return [ModelCard(str(d["id"]), d.get("root"), d.get("parent"), d.get("max_model_len")) for d in body["data"]]
    except (KeyError, TypeError) as e:
        raise InferenceServerError(f"not a vLLM model list ({e}): {str(body)[:300]}") from e


def _message(raw: bytes) -> str:
    """The error message of a vLLM error body (either {"error": {...}} or the older flat form), else the text."""
    try:
        data = json.loads(raw)
        err = data.get("error", data) if isinstance(data, dict) else data
        return str(err.get("message", err)) if isinstance(err, dict) else str(err)
    except ValueError:
        return raw[:300].decode(errors="replace")
