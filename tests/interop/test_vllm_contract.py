"""The contract with vLLM's OpenAI-compatible server, offline: the client parses vLLM's response bodies (recorded in
fixtures/vllm_responses.json with the vLLM source files and commits they come from), and ``sandgym serve-model``
answers the same requests with the same schema (every key vLLM sends, with the same JSON type)."""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandgym.agents.inference_client import (
    InferenceClient,
    InferenceServerError,
    TokenCompletion,
    parse_completion,
    parse_models,
)
from sandgym.interop.model_engine import ModelEngine
from sandgym.interop.model_server import RunningServer, start_server

FIXTURES = json.loads((Path(__file__).parent / "fixtures" / "vllm_responses.json").read_text())
SUCCESS = re.compile(r"^Success: LoRA adapter '[^']+' (added|removed) successfully\.$")


def same_schema(vllm: Any, ours: Any, where: str = "$") -> list[str]:
    """Where ``ours`` lacks a key of ``vllm`` or has another JSON type (null on either side matches anything)."""
    if vllm is None or ours is None:
        return []
    if isinstance(vllm, dict) and where.endswith(".top_logprobs[]"):  # a map token -> log-prob, keys are data
        return [] if isinstance(ours, dict) and all(isinstance(v, float) for v in ours.values()) else [where]
    if isinstance(vllm, dict):
        if not isinstance(ours, dict):
            return [f"{where}: object expected, got {type(ours).__name__}"]
        out = [f"{where}.{k}: missing" for k in vllm if k not in ours]
        return out + [p for k in vllm if k in ours for p in same_schema(vllm[k], ours[k], f"{where}.{k}")]
    if isinstance(vllm, list):
        if not isinstance(ours, list):
            return [f"{where}: array expected, got {type(ours).__name__}"]
        return [p for a, b in zip(vllm, ours, strict=False) for p in same_schema(a, b, f"{where}[]")]
    kinds = {bool: "bool", int: "number", float: "number", str: "string"}
    if kinds[type(vllm)] != kinds.get(type(ours)):
        return [f"{where}: {type(vllm).__name__} expected, got {type(ours).__name__}"]
    return []


def test_client_parses_vllm_completions_with_token_ids() -> None:
    fx = FIXTURES["completions"]
    a, b = parse_completion(fx["body"])
    assert a == TokenCompletion((707, 912, 2), (-0.4812, -1.2034, -0.0021), "stop", None, " def add")
    assert (b.token_ids, b.finish_reason) == ((470, 264, 489, 1033), "length")
    broken = json.loads(json.dumps(fx["body"]))
    broken["choices"][0]["logprobs"]["tokens"][0] = "def"  # tokens as text: return_tokens_as_token_ids was not set
    with pytest.raises(InferenceServerError, match="token_id:N"):
        parse_completion(broken)


def test_client_parses_vllm_models() -> None:
    base, lora = parse_models(FIXTURES["models"]["body"])
    assert (base.id, base.parent, base.max_model_len) == ("Qwen/Qwen2.5-1.5B-Instruct", None, 32768)
    assert (lora.id, lora.parent) == ("sandgym-v3", base.id)


def test_vllm_lora_answers_are_plain_success_lines() -> None:
    for name in ("load_lora_adapter", "unload_lora_adapter"):
        assert SUCCESS.match(FIXTURES[name]["text"])


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path) -> Iterator[RunningServer]:
    with start_server(ModelEngine(str(tiny_model_dir), served_name="tiny", max_loras=1)) as srv:
        yield srv


def call(server: RunningServer, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(server.url.removeprefix("http://"), timeout=60)
    try:
        conn.request(method, path, json.dumps(body) if body is not None else None, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_serve_model_answers_the_vllm_schema(server: RunningServer, tiny_model_dir: Path, tmp_path: Path) -> None:
    from sandgym.agents.hf import HFPolicy, LoraSpec

    adapter = HFPolicy(str(tiny_model_dir), lora=LoraSpec(r=2, alpha=4, dropout=0.0)).save_adapter(tmp_path / "v3")
    load = dict(FIXTURES["load_lora_adapter"]["request"], lora_path=str(adapter))
    status, text = call(server, "POST", "/v1/load_lora_adapter", load)
    assert status == 200 and SUCCESS.match(text.decode())
    try:
        status, raw = call(server, "GET", "/v1/models")
        assert status == 200 and same_schema(FIXTURES["models"]["body"], json.loads(raw)) == []

        request = dict(FIXTURES["completions"]["request"], max_tokens=8, prompt=[1, 97, 11, 187, 0])  # tiny vocab
        status, raw = call(server, "POST", "/v1/completions", request)
        body = json.loads(raw)
        assert status == 200 and same_schema(FIXTURES["completions"]["body"], body) == []
        assert len(parse_completion(body)) == request["n"]  # and the client reads our answer as it reads vLLM's
        assert InferenceClient(server.url).models()[1].id == "sandgym-v3"
    finally:
        status, text = call(server, "POST", "/v1/unload_lora_adapter", FIXTURES["unload_lora_adapter"]["request"])
        assert status == 200 and SUCCESS.match(text.decode())

    status, raw = call(server, "POST", "/v1/completions", dict(FIXTURES["completions"]["request"], model="tiny"))
    assert status == 400 and "out of vocabulary" in json.loads(raw)["error"]["message"]
    fx = FIXTURES["unknown_model"]
    status, raw = call(server, "POST", "/v1/completions", fx["request"])
    assert status == fx["status"] and same_schema(fx["body"], json.loads(raw)) == []
    assert json.loads(raw)["error"]["param"] == "model"


def test_schema_check_catches_a_drift() -> None:
    body = FIXTURES["completions"]["body"]
    drifted = json.loads(json.dumps(body))
    del drifted["choices"][0]["logprobs"]["tokens"]
    drifted["usage"]["prompt_tokens"] = "5"
    assert same_schema(body, drifted) == ["$.choices[].logprobs.tokens: missing",
                                          "$.usage.prompt_tokens: int expected, got str"]
