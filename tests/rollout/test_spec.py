"""One RolloutSpec for training and evaluation: validated once, the same [rollout] table in both configs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sandgym.configs import to_toml, tomllib
from sandgym.envs.parsing import stop_strings_for
from sandgym.errors import ConfigError
from sandgym.evaluate.config import EVAL_ROLLOUT, EvalConfig, load_eval_config
from sandgym.rollout.spec import RolloutSpec
from sandgym.train.config import TrainConfig, load_config

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.toml"


@pytest.mark.parametrize("kw, match", [
    ({"temperature": 0.0}, r"rollout\.temperature=0\.0: sampling needs a temperature > 0"),
    ({"top_p": 1.5}, r"rollout\.top_p=1\.5: use a value in \(0, 1\]"),
    ({"max_new_tokens": 0}, r"rollout\.max_new_tokens=0: must be >= 1"),
    ({"max_turns": 0}, r"rollout\.max_turns=0: must be >= 1"),
    ({"max_total_tokens": -1}, r"rollout\.max_total_tokens=-1: must be >= 1"),
    ({"truncated_turn": "stop"}, r"rollout\.truncated_turn='stop': use one of \['end', 'continue'\]"),
    ({"code_action": "bash"}, r"rollout\.code_action='bash': use one of"),
    ({"sandbox": "lcal"}, r"rollout\.sandbox='lcal' is not a sandbox backend; did you mean 'local'"),
    ({"env": "sandgym/Codin-v0"}, r"rollout\.env='sandgym/Codin-v0' is not a registered env id"),
    ({"env_kwargs": {"max_turns": 9}}, r"rollout\.env_kwargs\.max_turns=9 disagrees with rollout\.max_turns=3"),
])
def test_rollout_spec_names_the_bad_field_and_the_fix(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        RolloutSpec(**kw)


def test_both_configs_report_the_same_error_through_their_rollout_table() -> None:
    with pytest.raises(ConfigError, match=r"--set 'rollout.top_p=2': rollout\.top_p=2\.0"):
        load_config(None, ["rollout.top_p=2"])
    with pytest.raises(ConfigError, match=r"--set 'rollout.top_p=2': rollout\.top_p=2\.0"):
        load_eval_config(None, ['suites=["coding:heldout"]', "rollout.top_p=2"])


def test_train_and_eval_parse_the_same_rollout_table_to_equal_specs(tmp_path: Path) -> None:
    table = tomllib.loads(QUICKSTART.read_text())["rollout"]
    train = load_config(QUICKSTART)
    (tmp_path / "eval.toml").write_text(to_toml({"suites": ["coding/strings:heldout"], "rollout": table}))
    ev = load_eval_config(tmp_path / "eval.toml")
    assert isinstance(train.rollout, RolloutSpec) and isinstance(ev.rollout, RolloutSpec)
    assert ev.rollout == train.rollout
    assert ev.rollout.max_new_tokens == 96 and ev.rollout.tools == ("submit",)


def test_each_entry_point_keeps_its_defaults() -> None:
    """RolloutSpec's defaults are training's; evaluation's default [rollout] (EVAL_ROLLOUT) keeps the three values
    `sandgym eval` always used, and a partial [rollout] table is laid over the entry point's defaults."""
    assert TrainConfig().rollout == RolloutSpec()
    assert (RolloutSpec().max_new_tokens, RolloutSpec().max_total_tokens, RolloutSpec().temperature) == (128, 2048, 1.0)
    ev = EvalConfig(suites=("coding:heldout",))
    assert ev.rollout == EVAL_ROLLOUT == replace(RolloutSpec(), max_new_tokens=160, max_total_tokens=4096,
                                                 temperature=0.7)
    partial = load_eval_config(None, ['suites=["coding:heldout"]', "rollout.max_turns=2"])
    assert partial.rollout == replace(EVAL_ROLLOUT, max_turns=2)
    assert load_config(None, ["rollout.max_turns=2"]).rollout == RolloutSpec(max_turns=2)


@pytest.mark.parametrize("code_action", ["submit", "python", "none"])
def test_rollout_config_is_built_from_the_spec(code_action: str) -> None:
    spec = RolloutSpec(code_action=code_action, max_new_tokens=77, temperature=0.5, top_p=0.9,  # type: ignore[arg-type]
                       truncated_turn="continue", max_turns=4, max_total_tokens=999)
    rc = spec.rollout_config(5, policy_version=2)
    assert (rc.max_new_tokens, rc.temperature, rc.top_p, rc.truncated_turn, rc.max_turns, rc.max_total_tokens,
            rc.seed, rc.policy_version) == (77, 0.5, 0.9, "continue", 4, 999, 5, 2)
    assert rc.stop_strings == spec.stop_strings == stop_strings_for(None if code_action == "none" else code_action)
