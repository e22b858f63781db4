"""``sandgym serve-model``: vLLM's OpenAI-compatible HTTP API over :class:`~sandgym.interop.model_engine.ModelEngine`.

Routes and bodies follow vLLM (``vllm/entrypoints/openai/completion/protocol.py``, ``engine/protocol.py``,
``serve/lora/api_router.py``; the recorded bodies and commit are in ``tests/interop/fixtures/vllm_responses.json``):

- ``GET /v1/models``: the base model and every loaded adapter (``parent`` = the base model);
- ``POST /v1/completions``: ``prompt`` a string, a list of token ids, or a list of either; ``max_tokens``,
  ``temperature``, ``top_p``, ``seed``, ``n``, ``stop``, ``stop_token_ids``, ``include_stop_str_in_output``,
  ``logprobs`` (the sampled token's log-prob; top-k alternatives are not computed), ``return_tokens_as_token_ids``
  (tokens written ``token_id:N``), ``return_token_ids`` (``token_ids`` and ``prompt_token_ids`` per choice);
- ``POST /v1/chat/completions``: messages rendered with the model's chat template, the same sampling fields;
- ``POST /v1/load_lora_adapter`` ``{lora_name, lora_path}`` and ``POST /v1/unload_lora_adapter`` ``{lora_name}``:
  200 with a plain-text ``Success: ...`` line, as vLLM answers.

The request's ``model`` selects the base model (its served name) or a loaded adapter by name. Log-probs are
``log_softmax(logits / temperature)`` of the sampled token, what vLLM reports with
``--logprobs-mode processed_logprobs``. Errors are vLLM's ``{"error": {message, type, param, code}}``.

Token capture for external agents: the same routes under ``/capture/<session>/v1`` (an OpenAI client's
``base_url``) also record each completion's prompt ids, sampled ids and log-probs in a
:class:`~sandgym.agents.capture.CaptureStore`; ``GET /capture/<session>/calls`` returns them.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, ConfigDict

from sandgym.agents.capture import CapturedCall, CaptureStore
from sandgym.agents.sampler import SampledRow
from sandgym.interop.model_engine import AdapterError, BatchKey, ModelEngine, RowRequest

__all__ = ["make_app", "start_server", "serve", "RunningServer"]

DEFAULT_COMPLETION_TOKENS = 16
"""vLLM's ``max_tokens`` default for ``/v1/completions``."""


class _Body(BaseModel):
    model_config = ConfigDict(extra="allow")  # like vLLM: unknown fields are ignored


class _Sampling(_Body):
    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    n: int = 1
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    include_stop_str_in_output: bool = False
    return_token_ids: bool | None = None


class CompletionBody(_Sampling):
    prompt: str | list[int] | list[list[int]] | list[str]
    logprobs: int | None = None
    return_tokens_as_token_ids: bool | None = None
    echo: bool | None = False


class ChatBody(_Sampling):
    messages: list[dict[str, Any]]
    logprobs: bool | None = False
    top_logprobs: int | None = 0
    max_completion_tokens: int | None = None


class LoadLoraBody(_Body):
    lora_name: str
    lora_path: str


class UnloadLoraBody(_Body):
    lora_name: str
    lora_int_id: int | None = None


def _error(message: str, status: int, kind: str = "BadRequestError", param: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": status}}, status_code=status)


def make_app(engine: ModelEngine, capture: CaptureStore | None = None) -> FastAPI:
    """The FastAPI app serving ``engine`` with vLLM's routes; under ``/capture/<session>/v1`` the same routes also
    record every completion's tokens into ``capture`` (see :mod:`sandgym.agents.capture`)."""
    app = FastAPI(title="sandgym serve-model")
    store = capture if capture is not None else CaptureStore()

    def keep(session: str | None, model: str, prompt: tuple[int, ...], row: SampledRow, choice: dict[str, Any],
             text: str) -> None:
        if session is not None:
            store.record(session, CapturedCall(prompt, row.token_ids, row.logprobs, text, model,
                                               str(choice["finish_reason"])))

    @app.exception_handler(AdapterError)
    async def adapter_error(request: Request, exc: AdapterError) -> JSONResponse:
        return _error(str(exc), exc.status, "NotFoundError" if exc.status == 404 else "BadRequestError", exc.param)

    @app.exception_handler(ValueError)
    async def value_error(request: Request, exc: ValueError) -> JSONResponse:
        return _error(str(exc), 400)

    @app.get("/health")
    async def health() -> PlainTextResponse:
        return PlainTextResponse("")

    @app.get("/v1/models")
    @app.get("/capture/{session}/v1/models")
    async def models() -> dict[str, Any]:
        cards = [_card(engine.name, engine.root, None, engine.max_model_len)]
        cards += [_card(name, path, engine.name, None) for name, path in engine.adapters.items()]
        return {"object": "list", "data": cards}

    @app.post("/v1/load_lora_adapter")
    async def load_lora(body: LoadLoraBody) -> PlainTextResponse:
        await asyncio.to_thread(engine.load_adapter, body.lora_name, body.lora_path)
        return PlainTextResponse(f"Success: LoRA adapter '{body.lora_name}' added successfully.")

    @app.post("/v1/unload_lora_adapter")
    async def unload_lora(body: UnloadLoraBody) -> PlainTextResponse:
        await asyncio.to_thread(engine.unload_adapter, body.lora_name)
        return PlainTextResponse(f"Success: LoRA adapter '{body.lora_name}' removed successfully.")

    @app.get("/capture/{session}/calls")
    async def captured(session: str) -> list[dict[str, object]]:
        return [c.to_json() for c in store.calls(session)]

    @app.post("/v1/completions")
    async def completions(body: CompletionBody) -> dict[str, Any]:
        return await _completions(body, None)

    @app.post("/capture/{session}/v1/completions")
    async def completions_captured(session: str, body: CompletionBody) -> dict[str, Any]:
        return await _completions(body, session)

    @app.post("/v1/chat/completions")
    async def chat(body: ChatBody) -> dict[str, Any]:
        return await _chat(body, None)

    @app.post("/capture/{session}/v1/chat/completions")
    async def chat_captured(session: str, body: ChatBody) -> dict[str, Any]:
        return await _chat(body, session)

    async def _completions(body: CompletionBody, session: str | None) -> dict[str, Any]:
        adapter = engine.resolve(body.model)
        prompts = _prompt_ids(engine, body.prompt)
        limit = body.max_tokens if body.max_tokens is not None else DEFAULT_COMPLETION_TOKENS
        rows = await _generate(engine, adapter, body, prompts, [limit] * len(prompts))
        choices = []
        for i, row in enumerate(rows):
            prompt = prompts[i // body.n]
            choice = _choice_text(engine, body, row)
            if body.logprobs is not None:
                choice["logprobs"] = _completion_logprobs(engine, row, bool(body.return_tokens_as_token_ids))
            choice.update(prompt_logprobs=None, prompt_token_ids=list(prompt) if body.return_token_ids else None,
                          routed_experts=None)
            keep(session, body.model or engine.name, prompt, row, choice, choice["text"])
            choices.append({"index": i, **choice})
        return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
                "model": body.model or engine.name, "choices": choices, "service_tier": None,
                "system_fingerprint": None, "usage": _usage(prompts, rows, body.n), "kv_transfer_params": None,
                "ec_transfer_params": None, "metrics": None}

    async def _chat(body: ChatBody, session: str | None) -> dict[str, Any]:
        adapter = engine.resolve(body.model)
        text = engine.tokenizer.apply_chat_template(body.messages, tokenize=False, add_generation_prompt=True)
        prompt = tuple(engine.chat_format.encode(str(text)))
        room = (engine.max_model_len or 4096) - len(prompt)
        limit = body.max_completion_tokens or body.max_tokens or room
        rows = await _generate(engine, adapter, body, [prompt], [min(limit, room)])
        choices = []
        for i, row in enumerate(rows):
            choice = _choice_text(engine, body, row)
            content = choice.pop("text")
            keep(session, body.model or engine.name, prompt, row, choice, content)
            logprobs = {"content": _chat_logprobs(engine, row)} if body.logprobs else None
            choices.append({"index": i, "message": {"role": "assistant", "content": content, "tool_calls": []},
                            "logprobs": logprobs, **choice})
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": body.model or engine.name, "choices": choices, "service_tier": None,
                "system_fingerprint": None, "usage": _usage([prompt], rows, body.n),
                "prompt_logprobs": None, "prompt_token_ids": list(prompt) if body.return_token_ids else None,
                "kv_transfer_params": None}

    return app


async def _generate(engine: ModelEngine, adapter: str | None, body: _Sampling, prompts: Sequence[tuple[int, ...]],
                    limits: Sequence[int]) -> list[SampledRow]:
    if body.n < 1:
        raise ValueError(f"n={body.n}: ask for at least 1 completion per prompt")
    if any(m < 0 for m in limits):
        raise ValueError(f"max_tokens={min(limits)}: must be >= 0 (and the prompt must fit the model's context)")
    longest = max(len(p) + m for p, m in zip(prompts, limits, strict=True))
    if engine.max_model_len is not None and longest > engine.max_model_len:
        raise ValueError(f"This model's maximum context length is {engine.max_model_len} tokens; the prompt and "
                         f"max_tokens ask for {longest}. Shorten the prompt or lower max_tokens.")
    stop = (body.stop,) if isinstance(body.stop, str) else tuple(body.stop or ())
    temperature = 1.0 if body.temperature is None else body.temperature
    key = BatchKey(adapter, temperature, 1.0 if body.top_p is None else body.top_p, stop,
                   frozenset(body.stop_token_ids or ()))
    rows = [RowRequest(p, m, None if body.seed is None else body.seed + j)
            for p, m in zip(prompts, limits, strict=True) for j in range(body.n)]
    return await asyncio.wrap_future(engine.submit(key, rows))


def _prompt_ids(engine: ModelEngine, prompt: str | list[int] | list[list[int]] | list[str]) -> list[tuple[int, ...]]:
    """The request's prompts as token ids (text is tokenised without special tokens added)."""
    if isinstance(prompt, str):
        return [tuple(engine.chat_format.encode(prompt))]
    if prompt and all(isinstance(t, int) for t in prompt):
        return _prompt_ids(engine, [[int(t) for t in prompt]])  # type: ignore[arg-type]
    out: list[tuple[int, ...]] = []
    for p in prompt:
        if isinstance(p, int):
            raise ValueError("prompt mixes token ids and lists: send one list of ids or a list of lists")
        out.append(tuple(engine.chat_format.encode(p)) if isinstance(p, str) else tuple(int(t) for t in p))
    if not out or any(not p for p in out):
        raise ValueError("prompt is empty: send a string or a non-empty list of token ids")
    vocab = engine.vocab_size
    bad = [t for p in out for t in p if not 0 <= t < vocab]
    if bad:
        raise ValueError(f"Token id {bad[0]} is out of vocabulary (size {vocab}); tokenize with the served model's tokenizer")
    return out


def _choice_text(engine: ModelEngine, body: _Sampling, row: SampledRow) -> dict[str, Any]:
    """text, finish_reason, stop_reason and token_ids of one sampled row, as vLLM reports them."""
    text = str(engine.tokenizer.decode(list(row.token_ids), skip_special_tokens=True))
    stops = (body.stop,) if isinstance(body.stop, str) else tuple(body.stop or ())
    stop_reason: int | str | None = None
    hits = [(text.find(s), s) for s in stops if s and s in text]
    if hits and not row.ended:
        pos, stop_reason = min(hits)
        text = text[: pos + len(stop_reason)] if body.include_stop_str_in_output else text[:pos]
    elif row.ended and row.token_ids and row.token_ids[-1] in set(body.stop_token_ids or ()):
        stop_reason = row.token_ids[-1]
    finish = "length" if row.truncated else "stop"
    return {"text": text, "finish_reason": finish, "stop_reason": stop_reason,
            "token_ids": list(row.token_ids) if body.return_token_ids else None}


def _token_str(engine: ModelEngine, token_id: int, as_id: bool) -> str:
    return f"token_id:{token_id}" if as_id else str(engine.tokenizer.decode([token_id]))


def _completion_logprobs(engine: ModelEngine, row: SampledRow, as_ids: bool) -> dict[str, Any]:
    tokens = [_token_str(engine, t, as_ids) for t in row.token_ids]
    offsets, pos = [], 0
    for tok in tokens:
        offsets.append(pos)
        pos += len(tok)
    lps = [max(lp, -9999.0) for lp in row.logprobs]
    return {"text_offset": offsets, "token_logprobs": lps, "tokens": tokens,
            "top_logprobs": [{tok: lp} for tok, lp in zip(tokens, lps, strict=True)]}


def _chat_logprobs(engine: ModelEngine, row: SampledRow) -> list[dict[str, Any]]:
    out = []
    for t, lp in zip(row.token_ids, row.logprobs, strict=True):
        tok = _token_str(engine, t, False)
        out.append({"token": tok, "logprob": max(lp, -9999.0), "bytes": list(tok.encode()), "top_logprobs": []})
    return out


def _usage(prompts: Sequence[tuple[int, ...]], rows: Sequence[SampledRow], n: int) -> dict[str, Any]:
    prompt_tokens = sum(len(p) for p in prompts)
    completion = sum(len(r.token_ids) for r in rows)
    return {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion,
            "completion_tokens": completion, "prompt_tokens_details": None}


def _card(name: str, root: str, parent: str | None, max_model_len: int | None) -> dict[str, Any]:
    created = int(time.time())
    permission = {"id": f"modelperm-{uuid.uuid4().hex}", "object": "model_permission", "created": created,
                  "allow_create_engine": False, "allow_sampling": True, "allow_logprobs": True,
                  "allow_search_indices": False, "allow_view": True, "allow_fine_tuning": False,
                  "organization": "*", "group": None, "is_blocking": False}
    return {"id": name, "object": "model", "created": created, "owned_by": "vllm", "root": root,
            "parent": parent, "max_model_len": max_model_len, "permission": [permission]}


@dataclass
class RunningServer:
    """A server started by :func:`start_server` (a uvicorn thread); ``close()`` stops it."""

    url: str
    """``http://HOST:PORT`` (the API is under ``/v1``; capturing under ``/capture/<session>/v1``)."""
    engine: ModelEngine
    capture: CaptureStore
    _server: uvicorn.Server
    _thread: threading.Thread

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self.engine.close()

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_server(engine: ModelEngine, host: str = "127.0.0.1", port: int = 0,
                 capture: CaptureStore | None = None) -> RunningServer:
    """Serve ``engine`` from a background thread (``port=0``: a free port); returns once it accepts requests."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    store = capture if capture is not None else CaptureStore()
    config = uvicorn.Config(make_app(engine, store), log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="sandgym-serve-model", daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError(f"serve-model on {host}:{bound} stopped while starting; see the log above")
        time.sleep(0.01)
    return RunningServer(f"http://{host}:{bound}", engine, store, server, thread)


def serve(model: str, *, host: str = "127.0.0.1", port: int = 8000, max_loras: int = 4,
          served_name: str | None = None) -> None:
    """Load ``model`` and serve it until interrupted (``sandgym serve-model``)."""
    engine = ModelEngine(model, served_name=served_name, max_loras=max_loras)
    print(f"sandgym serve-model: {engine.name} on http://{host}:{port}/v1 (max_loras={max_loras})", flush=True)
    uvicorn.run(make_app(engine), host=host, port=port, log_level="warning")
