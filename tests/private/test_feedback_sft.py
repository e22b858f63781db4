"""Reward-weighted SFT on imported feedback: targets and weights per outcome, source detection, bad inputs, and
``sandgym sft --set sft.source=IMPORTED`` on a tiny model."""

from __future__ import annotations

import doctest
import json
from pathlib import Path
from typing import Any

import pytest

import sandgym.train.feedback_sft as feedback_sft
from sandgym.agents.prompting import ChatFormat
from sandgym.cli import main
from sandgym.errors import ConfigError
from sandgym.private.feedback import RewardMapping, import_feedback
from sandgym.train.config import load_config
from sandgym.train.feedback_sft import feedback_to_samples, source_kind

LOG = [
    {"id": "acc", "prompt": "add one", "output": "ACCEPTED-TEXT", "outcome": "accepted",
     "metadata": {"entry_file": "sol.py"}},
    {"id": "ed", "prompt": "reverse", "output": "WRONG-TEXT", "outcome": "edited", "edited_output": "FIXED-TEXT"},
    {"id": "ed-none", "prompt": "reverse", "output": "x", "outcome": "edited", "edit_distance": 3},
    {"id": "rej", "prompt": "sum", "output": "REJECTED-TEXT", "outcome": "rejected"},
]


def _imported(tmp_path: Path, mapping: RewardMapping | None = None) -> Path:
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in LOG))
    import_feedback(log, tmp_path / "imported.jsonl", mapping=mapping)
    return tmp_path / "imported.jsonl"


def _targets(fmt: ChatFormat, samples: Any) -> list[tuple[str, set[float]]]:
    """(decoded target tokens, the set of weights on them) per sample; checks weights are 0 off the target."""
    out = []
    for s in samples:
        on = [i for i, m in enumerate(s.action_mask) if m]
        assert all(s.advantages[i] == 0.0 for i, m in enumerate(s.action_mask) if not m)
        out.append((fmt.decode([s.token_ids[i] for i in on]), {s.advantages[i] for i in on}))
    return out


def test_accepted_trains_on_the_output_edited_on_the_edit_rejected_not_at_all(tmp_path, tiny_tokenizer):
    fmt = ChatFormat(tiny_tokenizer)
    result = feedback_to_samples(_imported(tmp_path), fmt)
    assert result.used == {"accepted": 1, "edited": 1}
    assert result.skipped == {"edited": 1, "rejected": 1}  # an edit without edited_output teaches nothing
    assert _targets(fmt, result.samples) == [("ACCEPTED-TEXT", {1.0}), ("FIXED-TEXT", {0.5})]
    prompts = [fmt.decode(s.token_ids) for s in result.samples]
    assert "add one" in prompts[0] and "WRONG-TEXT" not in prompts[1] and "reverse" in prompts[1]


def test_weights_follow_the_mapping_and_rejected_stays_out_even_with_a_positive_reward(tmp_path, tiny_tokenizer):
    fmt = ChatFormat(tiny_tokenizer)
    mapping = RewardMapping.parse("accepted=2.0,edited=0.8,rejected=0.3", edit_distance_scale=100)
    result = feedback_to_samples(_imported(tmp_path, mapping), fmt)
    weights = [sorted(w) for _, w in _targets(fmt, result.samples)]
    # "WRONG-TEXT" -> "FIXED-TEXT": insert/delete distance 10 of scale 100 -> 2.0 - 1.7 * 0.1
    assert weights == [[2.0], [pytest.approx(2.0 - 1.7 * 0.1)]]
    assert result.skipped["rejected"] == 1
    zero = feedback_to_samples(_imported(tmp_path, RewardMapping.parse("edited=0.0")), fmt)
    assert zero.used == {"accepted": 1} and zero.skipped["edited"] == 2


def test_system_prompt_is_filled_from_the_record_metadata(tmp_path, tiny_tokenizer):
    fmt = ChatFormat(tiny_tokenizer)
    result = feedback_to_samples(_imported(tmp_path), fmt, "Save as {entry_file} for {team}.")
    first, second = (fmt.decode(s.token_ids) for s in result.samples)
    assert "Save as sol.py for {team}." in first  # from the record; an unknown placeholder is left as written
    assert "Save as solution.py for {team}." in second  # the environment's default entry file


def test_source_kind_reads_the_first_record(tmp_path):
    transcripts = tmp_path / "t.jsonl"
    transcripts.write_text("\n" + json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    assert source_kind("oracle") == "oracle"
    assert source_kind(str(transcripts)) == "transcripts"
    assert source_kind(str(_imported(tmp_path))) == "feedback"


@pytest.mark.parametrize("content,needle", [
    (json.dumps(LOG[0]) + "\n", "raw feedback log; import it first (`sandgym feedback import"),
    ("", "is empty"),
    ("{nope\n", "is not JSON"),
    (json.dumps({"text": "x"}) + "\n", "neither a chat transcript"),
])
def test_bad_sources_say_what_to_do(tmp_path, content, needle):
    path = tmp_path / "src.jsonl"
    path.write_text(content)
    with pytest.raises(ConfigError, match="sft.source=") as err:
        source_kind(str(path))
    assert needle in str(err.value)
    with pytest.raises(ConfigError, match="neither 'oracle' nor an existing file"):
        source_kind(str(tmp_path / "missing.jsonl"))


def test_feedback_with_nothing_to_learn_is_an_error_before_training(tmp_path, tiny_model_dir):
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(LOG[3]) + "\n")
    import_feedback(log, tmp_path / "imp.jsonl")
    from sandgym.train.sft import run_sft

    cfg = load_config(None, [f"model.name={json.dumps(str(tiny_model_dir))}",
                             f"sft.source={json.dumps(str(tmp_path / 'imp.jsonl'))}"])
    with pytest.raises(ConfigError, match=r"no record to learn from \(skipped by outcome: \{'rejected': 1\}\)"):
        run_sft(cfg, tmp_path / "sft")


def test_weighted_loss_scales_with_the_weights(tiny_model_dir, tiny_tokenizer):
    """The SFT loss is the weighted token mean: halving every weight halves the (first) loss exactly."""
    from transformers import AutoModelForCausalLM

    from sandgym.train.sft import train_on_samples
    from sandgym.train.step import Sample

    fmt = ChatFormat(tiny_tokenizer)
    prompt = fmt.prompt_ids([{"role": "user", "content": "add one"}])
    body = fmt.completion_ids("def f(x): return x + 1")
    ids, mask = (*prompt, *body), (0,) * len(prompt) + (1,) * len(body)
    cfg = load_config(None, ["sft.epochs=1", "sft.micro_batch=1"])
    losses = []
    for w in (1.0, 0.5):
        model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
        sample = Sample(ids, mask, (0.0,) * len(ids), tuple(w * m for m in mask))
        losses.append(train_on_samples(model, [sample], cfg, pad_id=int(tiny_tokenizer.pad_token_id))[0])
    assert losses[0] > 0 and losses[1] == pytest.approx(losses[0] / 2, rel=1e-5)


def test_sft_cli_trains_on_imported_feedback(tmp_path, tiny_model_dir, capsys):
    imported = _imported(tmp_path)
    code = main(["sft", "--set", f"model.name={json.dumps(str(tiny_model_dir))}", "--set",
                 f"out_dir={json.dumps(str(tmp_path / 'run'))}", "--set", f"sft.source={json.dumps(str(imported))}",
                 "--set", "sft.epochs=1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "SFT on 2 demonstrations" in out
    assert "feedback records trained on: {'accepted': 1, 'edited': 1}; skipped: {'edited': 1, 'rejected': 1}" in out
    assert (tmp_path / "run" / "sft" / "adapter" / "adapter_config.json").is_file()
    assert json.loads((tmp_path / "run" / "sft" / "feedback_samples.json").read_text())["trained"] == \
        {"accepted": 1, "edited": 1}


def test_raw_log_as_sft_source_fails_with_the_fix(tmp_path, capsys):
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(LOG[0]) + "\n")
    assert main(["sft", "--set", f"sft.source={json.dumps(str(log))}"]) == 2
    assert "sandgym feedback train" in capsys.readouterr().err


def test_docstring_examples_hold():
    result = doctest.testmod(feedback_sft)
    assert result.attempted > 0 and result.failed == 0
