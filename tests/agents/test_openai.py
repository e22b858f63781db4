"""OpenAIPolicy against a local fake chat-completions server (http.server on 127.0.0.1)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from sandgym.agents.openai import EndpointError, OpenAIPolicy
from sandgym.agents.rollout import RolloutConfig, rollout
from sandgym.errors import ConfigError
from tests.agents.fakes import EchoEnv, FakeTask


class FakeChat(BaseHTTPRequestHandler):
    disable_nagle_algorithm = True
    requests: list[dict[str, Any]] = []
    fail_next = 0

    def log_message(self, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeChat.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
        if FakeChat.fail_next:
            FakeChat.fail_next -= 1
            self._send(503, {"error": "busy"})
            return
        if body["model"] != "fake-model":
            self._send(404, {"error": f"model {body['model']} not found"})
            return
        n = sum(m["role"] == "assistant" for m in body["messages"])
        text = f"ok turn {n} " + "x" * (body["max_tokens"] > 100)
        self._send(200, {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                         "usage": {"completion_tokens": 3}})

    def _send(self, status: int, data: dict[str, Any]) -> None:
        raw = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture()
def server() -> Iterator[str]:
    FakeChat.requests, FakeChat.fail_next = [], 0
    srv = ThreadingHTTPServer(("127.0.0.1", 0), FakeChat)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def test_episodes_through_the_engine(server: str) -> None:
    policy = OpenAIPolicy(server, "fake-model", api_key="k")
    out = rollout(policy, EchoEnv, [FakeTask("a", 2)], group_size=3, config=RolloutConfig(max_turns=4, max_new_tokens=50))
    assert all(t.success and t.num_turns == 2 and not t.has_tokens for t in out)
    assert out[0].turns[1].text == "ok turn 1 "
    req = FakeChat.requests[-1]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer k"
    assert req["max_tokens"] == 50 and req["stop"] == ["</tool_call>"] and "seed" in req
    assert [m["role"] for m in req["messages"]] == ["system", "user", "assistant", "user"]
    assert req["messages"][-1]["content"] == "<tool_response>\nresult 1: 10 chars\n</tool_response>"


def test_transient_errors_are_retried(server: str) -> None:
    FakeChat.fail_next = 1
    out = rollout(OpenAIPolicy(server, "fake-model", retries=1), EchoEnv, [FakeTask("a", 1)], config=RolloutConfig())
    assert out[0].success and len(FakeChat.requests) == 2


def test_client_errors_name_the_fix(server: str) -> None:
    with pytest.raises(EndpointError, match="model='nope'"):
        rollout(OpenAIPolicy(server, "nope", retries=0), EchoEnv, [FakeTask("a", 1)], config=RolloutConfig())
    with pytest.raises(ConfigError, match="base_url"):
        OpenAIPolicy("localhost:8000", "m")
