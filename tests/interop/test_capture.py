"""Token capture for an external agent written with the real ``openai`` client: every call it makes to
``/capture/<session>/v1`` is recorded with its exact ids and log-probs and becomes a trajectory."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from sandgym.agents.capture import CapturedCall, captured_trajectories
from sandgym.interop.model_engine import ModelEngine
from sandgym.interop.model_server import RunningServer, start_server

openai = pytest.importorskip("openai")


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path) -> Iterator[RunningServer]:
    with start_server(ModelEngine(str(tiny_model_dir), served_name="tiny")) as srv:
        yield srv


def agent(base_url: str, turns: int) -> list[str]:
    """A user's own agent loop: chat with the model, feed each answer back with a tool result."""
    client = openai.OpenAI(base_url=base_url, api_key="none")
    messages = [{"role": "system", "content": "Solve it."}, {"role": "user", "content": "What is 1 + 2?"}]
    answers = []
    for i in range(turns):
        reply = client.chat.completions.create(model="tiny", messages=messages, max_tokens=12, seed=i)
        text = reply.choices[0].message.content or ""
        answers.append(text)
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": f"result {i}"}]
    return answers


def test_an_openai_client_agent_is_captured_token_exactly(server: RunningServer) -> None:
    answers = agent(f"{server.url}/capture/ep-1/v1", turns=3)
    calls = server.capture.calls("ep-1")
    assert [c.text for c in calls] == answers and server.capture.calls("other") == []
    model = server.engine.base
    for c in calls:  # the recorded log-probs are the model's for exactly these tokens after exactly this prompt
        ids = torch.tensor([list(c.prompt_token_ids + c.completion_token_ids)])
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
        pos = torch.arange(len(c.prompt_token_ids), ids.shape[1])
        assert torch.allclose(torch.tensor(c.logprobs), lp[pos - 1, ids[0, pos]], atol=1e-4)
    trajs = captured_trajectories(calls, task_id="add", reward=1.0)
    turns = [t for traj in trajs for t in traj.turns]
    assert [t.completion_token_ids for t in turns] == [c.completion_token_ids for c in calls]
    for traj in trajs:
        assert traj.reward == 1.0 and sum(traj.action_mask) == sum(len(t.completion_token_ids) for t in traj.turns)
        assert traj.retokenization_mismatch == (len(trajs) > 1)


def test_calls_are_served_over_http(server: RunningServer) -> None:
    agent(f"{server.url}/capture/ep-2/v1", turns=1)
    body = json.loads(urllib.request.urlopen(f"{server.url}/capture/ep-2/calls", timeout=30).read())
    assert [c["completion_token_ids"] for c in body] == [list(c.completion_token_ids)
                                                        for c in server.capture.calls("ep-2")]


def call(prompt: tuple[int, ...], completion: tuple[int, ...]) -> CapturedCall:
    return CapturedCall(prompt, completion, tuple(-0.5 for _ in completion), "x", "m", "stop")


def test_a_history_that_extends_the_tokens_is_one_trajectory() -> None:
    calls = [call((1, 2), (3, 4)), call((1, 2, 3, 4, 5), (6,)), call((1, 2, 3, 4, 5, 6, 7, 8), (9,))]
    (traj,) = captured_trajectories(calls, task_id="t", reward=0.5)
    assert traj.token_ids == tuple(range(1, 10)) and not traj.retokenization_mismatch
    assert traj.action_mask == (0, 0, 1, 1, 0, 1, 0, 0, 1)
    assert [t.prompt_token_ids for t in traj.turns] == [(1, 2), (5,), (7, 8)]


def test_a_history_that_was_re_tokenised_differently_starts_a_new_trajectory() -> None:
    calls = [call((1, 2), (3, 4)), call((1, 2, 34, 5), (6,))]  # the agent's text came back as another token
    first, second = captured_trajectories(calls, task_id="t")
    assert first.token_ids == (1, 2, 3, 4) and second.token_ids == (1, 2, 34, 5, 6)
    assert first.retokenization_mismatch and second.retokenization_mismatch
