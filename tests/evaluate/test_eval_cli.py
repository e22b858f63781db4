"""`sandgym eval` is configured like `sandgym train`: TOML CONFIG, flags derived from EvalConfig, --set; every
flag it had before keeps working, and `eval compare` is a subcommand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sandgym.cli import main
from sandgym.configs import tomllib
from sandgym.evaluate.cli import FLAGS

BASE = ["eval", "--suite", "coding/strings:heldout"]


def resolved(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main([*argv, "--print-config"]) == 0, capsys.readouterr().err
    return tomllib.loads(capsys.readouterr().out)


def test_config_file_and_set_override(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "eval.toml"
    cfg.write_text('policy = "oracle"\nsuites = ["coding/strings:heldout"]\nsamples = 2\n\n'
                   '[rollout]\nmax_turns = 2\ntemperature = 0.9\n')
    data = resolved(capsys, ["eval", str(cfg), "--set", "rollout.temperature=0.5"])
    assert data["rollout"]["temperature"] == 0.5
    assert data["rollout"]["max_turns"] == 2 and data["samples"] == 2 and data["policy"] == "oracle"
    assert data["rollout"]["max_new_tokens"] == 160  # evaluation's default, not overridden by the partial table


def test_file_then_flags_then_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "eval.toml"
    cfg.write_text('suites = ["a"]\nsamples = 2\n[rollout]\ntemperature = 0.9\n')
    data = resolved(capsys, ["eval", "--samples", "3", str(cfg), "--temperature", "0.4", "--suite", "b",
                             "--set", "rollout.top_p=0.5", "--top-p", "0.8"])
    assert data["samples"] == 3 and data["suites"] == ["b"]
    assert data["rollout"]["temperature"] == 0.4 and data["rollout"]["top_p"] == 0.5


# Every flag `sandgym eval` had before it took a config, with the config value it must give.
OLD_FLAGS = [
    (["--policy", "runs/quickstart"], "policy", "runs/quickstart"),
    (["--suite", "coding/lists:heldout", "--suite", "x,y"], "suites",
     ["coding/strings:heldout", "coding/lists:heldout", "x", "y"]),
    (["--samples", "2"], "samples", 2),
    (["--seeds", "3"], "seeds", [0, 1, 2]),
    (["--n-tasks", "5"], "n_tasks", 5),
    (["--difficulty", "2"], "difficulty", 2),
    (["--baseline", "smollm2-135m"], "baseline", "smollm2-135m"),
    (["--out", "runs/elsewhere"], "out", "runs/elsewhere"),
    (["--max-new-tokens", "64"], "rollout.max_new_tokens", 64),
    (["--max-turns", "5"], "rollout.max_turns", 5),
    (["--temperature", "0.3"], "rollout.temperature", 0.3),
    (["--code-action", "python"], "rollout.code_action", "python"),
    (["--tools", "write_file,submit"], "rollout.tools", ["write_file", "submit"]),
    (["--env", "sandgym/Coding-v0"], "rollout.env", "sandgym/Coding-v0"),
    (["--sandbox", "auto"], "rollout.sandbox", "auto"),
    (["--trained-families", "strings,lists"], "trained_families", ["strings", "lists"]),
    (["--ray-workers", "2"], "ray_workers", 2),
    (["--ray-address", "auto", "--ray-workers", "1"], "ray_address", "auto"),
]


@pytest.mark.parametrize("flags, key, value", OLD_FLAGS, ids=[f[0][0] for f in OLD_FLAGS])
def test_every_old_flag_still_works(capsys: pytest.CaptureFixture[str], flags: list[str], key: str,
                                    value: Any) -> None:
    data = resolved(capsys, [*BASE, *flags])
    for part in key.split("."):
        data = data[part]
    assert data == value


def test_flags_come_from_the_config_dataclass() -> None:
    keys = {f.key for f in FLAGS}
    assert {"samples", "rollout.temperature", "rollout.top_p", "rollout.truncated_turn", "rollout.env_kwargs",
            "rollout.max_total_tokens"} <= keys


def test_flag_errors_name_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--temperature", "0"]) == 2
    assert "--temperature 0.0: rollout.temperature=0.0" in capsys.readouterr().err
    assert main([*BASE, "--samples", "many"]) == 2
    assert "--samples 'many' must be an integer" in capsys.readouterr().err


def test_compare_is_a_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["eval", "compare", "--help"])
    assert exc.value.code == 0
    assert "DIR" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["eval", "compare"])  # at least one DIR


def _run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    (run / "checkpoints" / "step-000002").mkdir(parents=True)
    (run / "checkpoints" / "step-000002" / "adapter_config.json").write_text("{}")
    (run / "config.toml").write_text('[rollout]\nmax_turns = 1\nmax_new_tokens = 96\ntemperature = 1.0\n'
                                     'code_action = "submit"\ntools = ["submit"]\n'
                                     '[rollout.env_kwargs]\nsystem_prompt = "one line"\n')
    return run


def test_a_training_run_is_scored_in_its_own_rollout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--policy RUN_DIR (or an adapter in it) takes the run's tools, budgets and env kwargs, not evaluation's
    defaults; sampling stays evaluation's, and a flag, --set or the config still wins."""
    run = _run_dir(tmp_path)
    for policy in (run, run / "checkpoints" / "step-000002"):
        data = resolved(capsys, [*BASE, "--policy", str(policy)])["rollout"]
        assert data["tools"] == ["submit"] and data["max_turns"] == 1 and data["max_new_tokens"] == 96
        assert data["env_kwargs"] == {"system_prompt": "one line"}
        assert data["temperature"] == 0.7  # evaluation's own
    data = resolved(capsys, [*BASE, "--policy", str(run), "--max-turns", "4", "--set", "rollout.tools=[]"])
    assert data["rollout"]["max_turns"] == 4 and data["rollout"]["tools"] == []
    cfg = tmp_path / "eval.toml"
    cfg.write_text(f'policy = "{run.as_posix()}"\nsuites = ["a"]\n[rollout]\nmax_new_tokens = 200\n')
    data = resolved(capsys, ["eval", str(cfg)])["rollout"]
    assert data["max_new_tokens"] == 200 and data["tools"] == ["submit"]
    assert resolved(capsys, [*BASE, "--policy", "oracle"])["rollout"]["tools"] == []  # not a run: defaults
