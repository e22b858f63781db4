import json
from pathlib import Path

import pytest
import torch

import tests.train.toy_env  # noqa: F401  (registers toy/Letters-v0)
from sandgym.train.config import load_config
from sandgym.train.loop import run
from sandgym.train.metrics import load_metrics

TOY = "tests.train.toy_env:toy/Letters-v0"


def toy_overrides(model_dir: Path, out: Path, **extra: object) -> list[str]:
    base = {
        "out_dir": json.dumps(str(out)),
        "model.name": json.dumps(str(model_dir)),
        "model.lora_r": 8,
        "model.lora_alpha": 16,
        "rollout.env": json.dumps(TOY),
        "rollout.max_new_tokens": 8,
        "rollout.max_turns": 1,
        "rollout.temperature": 1.0,
        "rollout.truncated_turn": json.dumps("continue"),
        "algorithm.group_size": 4,
        "optim.lr": 0.03,
        "optim.tasks_per_step": 4,
        "optim.steps": 12,
        "optim.micro_batch": 8,
        "checkpoint.every": 4,
        "logging.tensorboard": "false",
        "domains.mix": '[{suite = "coding/strings:train", n_tasks = 4}]',
        "rollout.env_kwargs": "{first_only = true}",
    }
    base.update({k: v for k, v in extra.items()})
    return [f"{k}={v}" for k, v in base.items()]


@pytest.mark.parametrize("algo", ["grpo", "dr_grpo", "rloo"])
def test_each_algorithm_raises_toy_reward(algo, tiny_model_dir, tmp_path):
    cfg = load_config(None, toy_overrides(tiny_model_dir, tmp_path / algo, **{"algorithm.name": json.dumps(algo)}))
    result = run(cfg)
    rewards = [m["rollout/reward_mean"] for m in load_metrics(result.run_dir)]
    assert len(rewards) == 12
    first, last = sum(rewards[:3]) / 3, sum(rewards[-3:]) / 3
    assert last > first + 0.1, rewards
    assert (result.run_dir / "checkpoints" / "step-000012" / "adapter_model.safetensors").is_file()


def test_checkpoint_is_a_peft_adapter_and_base_weights_do_not_change(tiny_model_dir, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    cfg = load_config(None, toy_overrides(tiny_model_dir, tmp_path / "run", **{"optim.steps": 4}))
    result = run(cfg)
    base = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
    before = {k: v.clone() for k, v in base.state_dict().items()}
    peft_model = PeftModel.from_pretrained(base, str(result.last_checkpoint))
    lora = {k: v for k, v in peft_model.state_dict().items() if "lora_B" in k}
    assert lora and any(v.abs().sum() > 0 for v in lora.values())  # lora_B starts at zero: it was trained
    merged = peft_model.get_base_model().state_dict()
    for k, v in before.items():
        key = k.replace(".weight", ".base_layer.weight") if k.replace(".weight", ".base_layer.weight") in merged else k
        assert torch.equal(merged[key], v), k


def test_metrics_are_namespaced_and_logged_per_step(tiny_model_dir, tmp_path):
    cfg = load_config(None, toy_overrides(tiny_model_dir, tmp_path / "run", **{"optim.steps": 2}))
    run(cfg)
    rows = load_metrics(tmp_path / "run")
    assert [r["step"] for r in rows] == [1, 2]
    for key in ("rollout/reward_mean", "perf/tokens_per_s", "domain/coding/reward", "rollout/infra_failures"):
        assert key in rows[0]
    assert (tmp_path / "run" / "config.toml").is_file()
    assert (tmp_path / "run" / "trajectories.jsonl").read_text().count("\n") >= 2


def _first_turn_letter_share(run_dir: Path) -> float:
    rows = [json.loads(x) for x in (run_dir / "trajectories.jsonl").read_text().splitlines()]
    last = [r for r in rows if r["step"] > max(r["step"] for r in rows) - 3]
    texts = [r["turns"][0]["text"] for r in last]
    return sum(t[:1].islower() for t in texts) / len(texts)


def test_per_step_advantages_train_and_differ_from_trajectory_mode(tiny_model_dir, tmp_path):
    """Turn 1 is rewarded (lowercase first) only as an intermediate state and the last turn for a digit first:
    per-step credit learns turn 1's target, trajectory credit only ever sees the final reward."""
    shares = {}
    for mode in ("trajectory", "per_step"):
        extra = {
            "algorithm.advantage_mode": json.dumps(mode),
            "rollout.max_turns": 2,
            "rollout.env_kwargs": '{turns = 2, intermediate = true, first_only = true, final_target = "0123456789"}',
            "logging.sample_trajectories": 16,
            "optim.steps": 10,
            "checkpoint.every": 10,
        }
        cfg = load_config(None, toy_overrides(tiny_model_dir, tmp_path / mode, **extra))
        run(cfg)
        shares[mode] = _first_turn_letter_share(tmp_path / mode)
    assert shares["per_step"] > shares["trajectory"] + 0.1, shares


def test_activation_checkpointing_trains_the_same_adapter(tiny_model_dir, tmp_path):
    """``optim.activation_checkpointing`` replays layers in the backward pass; the run is otherwise the same: same
    rewards per step and the same adapter (up to float rounding)."""
    from safetensors.torch import load_file

    adapters, rewards = [], []
    for ckpt in ("false", "true"):
        cfg = load_config(None, toy_overrides(tiny_model_dir, tmp_path / ckpt, **{
            "optim.steps": 3, "checkpoint.every": 3, "optim.activation_checkpointing": ckpt}))
        result = run(cfg)
        rewards.append([m["rollout/reward_mean"] for m in load_metrics(result.run_dir)])
        adapters.append(load_file(str(result.last_checkpoint / "adapter_model.safetensors")))
    assert rewards[0] == rewards[1]
    assert adapters[0].keys() == adapters[1].keys()
    for k in adapters[0]:
        torch.testing.assert_close(adapters[0][k], adapters[1][k], atol=1e-5, rtol=1e-4)
