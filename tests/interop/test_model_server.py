"""``sandgym serve-model`` on loopback with a tiny random model: completions on token ids, exact log-probs, LoRA
adapters loaded, selected and unloaded by name, token-in/token-out rollouts through ``ServerPolicy``, and the real
``openai`` client against it."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from sandgym.agents.hf import HFPolicy, LoraSpec
from sandgym.agents.inference_client import InferenceClient, InferenceServerError
from sandgym.agents.rollout import RolloutConfig, rollout
from sandgym.agents.sampler import SampledRow
from sandgym.agents.server_policy import ServerPolicy
from sandgym.interop.model_engine import ModelEngine
from sandgym.interop.model_server import RunningServer, start_server
from tests.agents.fakes import EchoEnv, FakeTask

NAME = "tiny"


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path) -> Iterator[RunningServer]:
    with start_server(ModelEngine(str(tiny_model_dir), served_name=NAME, max_loras=2)) as srv:
        yield srv


@pytest.fixture(scope="module")
def adapter_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved LoRA adapter with non-zero weights (so it changes the model's output)."""
    pol = HFPolicy(str(tiny_model_dir), lora=LoraSpec(r=4, alpha=8, dropout=0.0))
    with torch.no_grad():
        for n, p in pol.model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5, generator=torch.Generator().manual_seed(len(n)))
    return pol.save_adapter(tmp_path_factory.mktemp("adapter"))


@pytest.fixture(scope="module")
def policy(server: RunningServer, tiny_model_dir: Path) -> ServerPolicy:
    return ServerPolicy.for_model(server.url, str(tiny_model_dir))


def prompt(policy: ServerPolicy) -> list[int]:
    return policy.chat_format.prompt_ids([{"role": "user", "content": "Say ok."}])


def test_models_lists_the_base_model(server: RunningServer, policy: ServerPolicy) -> None:
    (card,) = InferenceClient(server.url).models()
    assert (card.id, card.parent, card.max_model_len) == (NAME, None, 4096)
    assert policy.model == NAME  # for_model picks the served base model


def test_token_prompt_returns_exact_ids_and_tempered_logprobs(server: RunningServer, policy: ServerPolicy,
                                                               tiny_model_dir: Path) -> None:
    client, ids = InferenceClient(server.url), prompt(policy)
    a = client.complete_tokens(NAME, ids, max_tokens=12, temperature=0.7, seed=3, n=2)
    assert a == client.complete_tokens(NAME, ids, max_tokens=12, temperature=0.7, seed=3, n=2)  # seeded
    model = server.engine.base
    for c in a:
        assert 0 < len(c.token_ids) <= 12 and c.finish_reason in ("stop", "length")
        full = torch.tensor([ids + list(c.token_ids)])
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=full).logits[0].float() / 0.7, dim=-1)
        pos = torch.arange(len(ids), full.shape[1])
        expect = lp[pos - 1, full[0, pos]]
        assert torch.allclose(torch.tensor(c.logprobs), expect, atol=1e-4)  # what the learner recomputes


def test_lora_adapters_load_select_unload(server: RunningServer, policy: ServerPolicy, adapter_dir: Path,
                                         tiny_model_dir: Path) -> None:
    client, ids = InferenceClient(server.url), prompt(policy)
    greedy = dict(max_tokens=6, temperature=0.0)
    base = client.complete_tokens(NAME, ids, **greedy)[0]
    client.load_adapter("v1", str(adapter_dir))
    try:
        assert [(c.id, c.parent) for c in client.models()] == [(NAME, None), ("v1", NAME)]
        tuned = client.complete_tokens("v1", ids, **greedy)[0]
        assert tuned.logprobs != base.logprobs  # the request's model selects the adapter
        learner = HFPolicy(str(tiny_model_dir), lora=None, adapter=str(adapter_dir)).model.eval()
        full = torch.tensor([ids + list(tuned.token_ids)])
        with torch.no_grad():  # the server's merged weights give what the learner's LoRA forward gives
            lp = torch.log_softmax(learner(input_ids=full).logits[0].float(), dim=-1)
        pos = torch.arange(len(ids), full.shape[1])
        assert torch.allclose(torch.tensor(tuned.logprobs), lp[pos - 1, full[0, pos]], atol=1e-4)
        assert client.complete_tokens(NAME, ids, **greedy)[0] == base  # the base model stays itself
        with pytest.raises(InferenceServerError, match="already been loaded"):
            client.load_adapter("v1", str(adapter_dir))
        client.load_adapter("v2", str(adapter_dir))
        with pytest.raises(InferenceServerError, match="max_loras=2"):
            client.load_adapter("v3", str(adapter_dir))
        assert client.complete_tokens("v2", ids, **greedy)[0] == tuned
        client.unload_adapter("v2")
    finally:
        client.unload_adapter("v1")
    assert [c.id for c in client.models()] == [NAME]
    with pytest.raises(InferenceServerError, match="404.*`v1` does not exist"):
        client.complete_tokens("v1", ids, **greedy)
    with pytest.raises(InferenceServerError, match="cannot be found"):
        client.unload_adapter("v1")
    with pytest.raises(InferenceServerError, match="no adapter_config.json"):
        client.load_adapter("v4", str(adapter_dir.parent / "missing"))
    assert client.complete_tokens(NAME, ids, **greedy)[0] == base  # back to the plain base weights


def test_rollout_through_the_server_is_token_in_token_out(server: RunningServer, policy: ServerPolicy,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The learner sees exactly the tokens the server sampled, and each turn's prompt extends the last one."""
    seen: list[tuple[tuple[int, ...], SampledRow]] = []
    submit = server.engine.submit

    def record(key: Any, rows: Any) -> Any:
        fut = submit(key, rows)
        fut.add_done_callback(lambda f: seen.extend(zip([r.prompt for r in rows], f.result(), strict=True)))
        return fut

    monkeypatch.setattr(server.engine, "submit", record)
    cfg = RolloutConfig(max_new_tokens=24, max_total_tokens=400, max_turns=3, seed=5, policy_version=7)
    trajs = rollout(policy, EchoEnv, [FakeTask("a", turns_needed=3)], group_size=2, config=cfg)
    sampled: dict[tuple[int, ...], list[tuple[tuple[int, ...], tuple[float, ...]]]] = {}
    for p, row in seen:  # a group's samples share their first prompt
        sampled.setdefault(p, []).append((row.token_ids, row.logprobs))
    assert sum(t.num_turns for t in trajs) == len(seen)
    for t in trajs:
        assert t.policy_version == 7
        prefix: tuple[int, ...] = ()
        for turn in t.turns:
            prefix += turn.prompt_token_ids
            # the server got the exact token history (never re-tokenised text) and sampled exactly these tokens
            assert (turn.completion_token_ids, turn.completion_logprobs) in sampled[prefix]
            prefix += turn.completion_token_ids
        assert t.token_ids == prefix


def test_real_openai_client(server: RunningServer, policy: ServerPolicy) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none")
    ids = prompt(policy)
    done = client.completions.create(model=NAME, prompt=ids, max_tokens=5, logprobs=0, seed=1,
                                     extra_body={"return_tokens_as_token_ids": True, "return_token_ids": True})
    choice = done.choices[0]
    assert choice.logprobs is not None and all(t.startswith("token_id:") for t in choice.logprobs.tokens)
    assert [int(t.split(":")[1]) for t in choice.logprobs.tokens] == choice.model_extra["token_ids"]
    chat = client.chat.completions.create(model=NAME, messages=[{"role": "user", "content": "hi"}], max_tokens=5,
                                          logprobs=True, seed=1)
    assert chat.choices[0].message.role == "assistant" and chat.usage is not None
    assert chat.choices[0].logprobs is not None and len(chat.choices[0].logprobs.content or []) == chat.usage.completion_tokens
    assert [m.id for m in client.models.list().data] == [NAME]


def test_bad_requests_answer_vllm_errors(server: RunningServer) -> None:
    client = InferenceClient(server.url, retries=0)
    with pytest.raises(InferenceServerError, match="400.*empty"):
        client._json("POST", "/completions", {"model": NAME, "prompt": [[]]})
    with pytest.raises(InferenceServerError, match="422"):
        client._json("POST", "/completions", {"model": NAME})
    with pytest.raises(InferenceServerError, match="maximum context length is 4096"):
        client.complete_tokens(NAME, [1, 2, 3], max_tokens=4094)


def test_cli_refuses_a_bad_max_loras(capsys: pytest.CaptureFixture[str]) -> None:
    from sandgym.cli import main

    assert main(["serve-model", "--max-loras", "0"]) == 2
    assert "--max-loras 0" in capsys.readouterr().err


def test_eval_through_the_server(server: RunningServer, tmp_path: Path) -> None:
    import json

    from sandgym.cli import main

    out = tmp_path / "eval"
    argv = ["eval", "--policy", f"server:{server.url}#{NAME}", "--suite", "coding/strings:heldout", "--n-tasks", "2",
            "--samples", "1", "--max-turns", "1", "--max-new-tokens", "8", "--out", str(out)]
    assert main(argv) == 0
    rows = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    assert main(["eval", "--policy", "server:localhost:1", "--suite", "coding/strings:heldout"]) == 2


def test_cli_serves_until_stopped(tiny_model_dir: Path) -> None:
    """`sandgym serve-model` as a user runs it: a process that prints where it listens and answers there."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "sandgym", "serve-model", "--model", str(tiny_model_dir),
                             "--served-model-name", "cli-tiny", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == f"sandgym serve-model: cli-tiny on http://127.0.0.1:{port}/v1 (max_loras=4)"
        client = InferenceClient(f"http://127.0.0.1:{port}", retries=0)
        for _ in range(600):  # the line is printed just before uvicorn binds the port
            try:
                assert [c.id for c in client.models()] == ["cli-tiny"]
                break
            except InferenceServerError:
                assert proc.poll() is None, "serve-model exited"
                time.sleep(0.1)
        else:
            raise AssertionError("serve-model never answered")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
