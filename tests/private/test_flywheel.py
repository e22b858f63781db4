"""``sandgym feedback simulate`` and ``sandgym feedback train`` on a tiny model with the real local sandbox."""

from __future__ import annotations

import doctest
import json
from pathlib import Path
from typing import Any

import pytest

import sandgym.experiments.flywheel as flywheel
from sandgym.agents.policy import Generation
from sandgym.cli import main
from sandgym.errors import ConfigError, SandboxError
from sandgym.experiments.flywheel import FlywheelConfig, reference_reply, round_prompts
from sandgym.private.feedback import read_records
from sandgym.train.config import load_config


@pytest.fixture
def local_ok() -> None:
    """The real local sandbox grades the suggestions; skip where it cannot start."""
    from sandgym.sandbox.local import LocalSandbox

    try:
        LocalSandbox().close()
    except (SandboxError, ImportError) as exc:
        pytest.skip(f"local sandbox unavailable: {exc}")


SYSTEM = "Reply with one python block; it is saved as {entry_file}."


def _overrides(model_dir: Path, **extra: Any) -> list[str]:
    base = {
        "model.name": json.dumps(str(model_dir)), "model.lora_r": 8, "model.lora_alpha": 16,
        "rollout.max_new_tokens": 12, "rollout.max_turns": 1, "rollout.code_action": '"submit"',
        "rollout.tools": '["submit"]', "rollout.env_kwargs": f'{{system_prompt = "{SYSTEM}"}}',
        "domains.mix": '[{suite = "coding/strings:train", difficulty = 1, n_tasks = 4}]',
        "eval.n_tasks": 2, "eval.samples": 1, "sft.epochs": 1, "sft.lr": 1e-2, "sft.micro_batch": 2,
    }
    base.update(extra)
    return [f"{k}={v}" for k, v in base.items()]


class ForcedPolicy:
    """A real tiny HF policy (sampling, training, saving) whose replies to some prompts are forced."""

    def __init__(self, policy: Any, replies: dict[str, str]) -> None:
        self._policy = policy
        self.replies = replies

    def __getattr__(self, name: str) -> Any:
        return getattr(self._policy, name)

    def generate(self, requests: Any, sampling: Any, on_done: Any = None) -> list[Generation]:
        out = self._policy.generate(requests, sampling)
        for i, r in enumerate(requests):
            prompt = next(m["content"] for m in r.messages if m["role"] == "user")
            if prompt in self.replies:
                ids = tuple(self._policy.chat_format.completion_ids(self.replies[prompt]))
                out[i] = Generation(self.replies[prompt], ids, (0.0,) * len(ids), ended=True)
        return out


def test_one_round_judges_imports_trains_and_measures_the_same_heldout_tasks(tmp_path, tiny_model_dir, local_ok):
    from safetensors.torch import load_file

    from sandgym.train import components

    config = FlywheelConfig(train=load_config(None, _overrides(tiny_model_dir)), out=str(tmp_path / "fw"), rounds=1,
                            prompts=3)
    good, close, prose = round_prompts(config, 1)
    replies = {good.prompt: reference_reply(good) or "", close.prompt: "```python\ndef unrelated():\n    return 0\n```",
               prose.prompt: "I would rather not write code today."}
    policy = ForcedPolicy(components.build_policy(config.train, adapter=None), replies)
    rounds = flywheel.run(config, report=lambda line: None, policy=policy)

    assert [r["round"] for r in rounds] == [0, 1]
    one = rounds[1]
    assert one["suggestions"] == {"accepted": 1, "edited": 1, "rejected": 1} and one["sandbox_failures"] == 0
    records, bad = read_records(one["log"])  # a real adoption log: `sandgym feedback import` reads it
    assert not bad
    by_task = {r.metadata["task_id"]: r for r in records}
    assert by_task[good.id].outcome == "accepted"
    assert by_task[good.id].metadata["tests_passed"] == by_task[good.id].metadata["tests_expected"] > 0
    assert by_task[close.id].outcome == "edited" and by_task[close.id].edited_output == reference_reply(close)
    assert by_task[prose.id].outcome == "rejected" and by_task[prose.id].edited_output is None
    assert one["sft"]["by_outcome"] == {"accepted": 1, "edited": 1} and one["sft"]["records"] == 2
    lora_b = [v for k, v in load_file(str(Path(one["sft"]["adapter"]) / "adapter_model.safetensors")).items()
              if "lora_B" in k]
    assert lora_b and any(float(v.abs().max()) > 0 for v in lora_b)  # trained (LoRA B starts at zero)

    fw = tmp_path / "fw"
    tasks = [sorted(json.loads(x)["task_id"] for x in (fw / f"round-{r}" / "heldout" / "episodes.jsonl")
                    .read_text().splitlines()) for r in (0, 1)]
    assert tasks[0] == tasks[1] and len(tasks[0]) == 2 and all("/heldout/" in t for t in tasks[0])
    assert one["gain_vs_round0"]["n_pairs"] == one["gain_vs_previous"]["n_pairs"] == 2
    assert 0.0 <= one["adoption"]["value"] <= 1.0
    saved = json.loads((fw / "rounds.json").read_text())
    assert saved["rounds"] == json.loads(json.dumps(rounds)) and "reference solution" in saved["user_rule"]
    table = (fw / "ROUNDS.md").read_text().splitlines()
    assert table[0].startswith("| round |") and table[3].startswith("| 1 | 1/1/1 | 2 |")


def test_feedback_train_chains_import_sft_and_eval(tmp_path, tiny_model_dir, local_ok, capsys):
    task = round_prompts(FlywheelConfig(train=load_config(None, _overrides(tiny_model_dir)), out=str(tmp_path)), 1)[0]
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"prompt": task.prompt, "output": reference_reply(task), "outcome": "accepted"}) + "\n"
                   + json.dumps({"prompt": task.prompt, "output": "no", "outcome": "rejected"}) + "\n")
    out = tmp_path / "out"
    code = main(["feedback", "train", str(log), "--out", str(out), "--eval-suite", "coding/strings:heldout",
                 *(x for o in _overrides(tiny_model_dir, **{"eval.n_tasks": 1}) for x in ("--set", o))])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "[1/3] imported 2 record(s) {'accepted': 1, 'edited': 0, 'rejected': 1}" in printed
    assert "[2/3] reward-weighted SFT on 1 record(s) {'accepted': 1} (skipped {'rejected': 1})" in printed
    assert "[3/3] held-out adoption" in printed and "gain" in printed and str(out / "eval" / "report.md") in printed
    summary = json.loads((out / "feedback_train.json").read_text())
    assert summary["sft"]["by_outcome"] == {"accepted": 1} and summary["gain"]["n_pairs"] == 1
    assert (out / "sft" / "adapter" / "adapter_config.json").is_file() and (out / "imported.pairs.jsonl").is_file()
    metrics = json.loads((out / "eval" / "metrics.json").read_text())
    assert metrics["policy"]["adapter"] and metrics["baseline_policy"]["spec"] == str(tiny_model_dir)


@pytest.mark.parametrize("argv,needle", [
    (["feedback", "train", "missing.jsonl", "--out", "o"], "feedback log 'missing.jsonl' does not exist"),
    (["feedback", "simulate", "examples/quickstart.toml", "--out", "o", "--rounds", "0"], "rounds=0"),
    (["feedback", "simulate", "examples/quickstart.toml", "--out", "o", "--set", "rollout.max_turns=3"],
     "rollout.max_turns=3"),
])
def test_bad_inputs_name_the_value_and_the_fix(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    argv = [str(tmp_path / a) if a == "o" else a for a in argv]
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


def test_a_bad_eval_suite_fails_before_training(tmp_path, tiny_model_dir, capsys):
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"prompt": "p", "output": "o", "outcome": "accepted"}) + "\n")
    argv = ["feedback", "train", str(log), "--out", str(tmp_path / "out"), "--eval-suite", "coding/nope:heldout",
            "--set", f"model.name={json.dumps(str(tiny_model_dir))}"]
    assert main(argv) == 2
    assert "coding/nope" in capsys.readouterr().err
    assert not (tmp_path / "out" / "sft").exists()


def test_flywheel_config_checks():
    train = load_config(None, ['rollout.code_action="submit"', "rollout.max_turns=1"])
    with pytest.raises(ConfigError, match="prompts=0"):
        FlywheelConfig(train=train, out="x", prompts=0)
    with pytest.raises(ConfigError, match="code_action='python'"):
        FlywheelConfig(train=load_config(None, ['rollout.code_action="python"', "rollout.max_turns=1"]), out="x")


def test_docstring_examples_hold():
    result = doctest.testmod(flywheel)
    assert result.attempted > 0 and result.failed == 0
