"""``sandgym transfer`` (and ``python -m sandgym.experiments.transfer``): a demo run's policies on an imported
public benchmark."""

import json

import pytest

from sandgym.cli import build_parser
from sandgym.configs import to_toml
from sandgym.errors import ConfigError
from sandgym.experiments import transfer
from sandgym.experiments.transfer import benchmark_tasks, humaneval_records, main, transfer_table
from sandgym.train.config import load_config
from tests.test_demo import _tf_rows


def test_table_pairs_each_policy_with_base_and_rl_with_sft():
    rows = {"base": _tf_rows(0.0, samples=1), "sft": _tf_rows(0.25, samples=1), "sft_rl": _tf_rows(0.5, samples=1)}
    table, summary = transfer_table(rows)
    text = table.markdown()
    assert set(summary["pairs"]) == {"sft_vs_base", "sft_rl_vs_base", "sft_rl_vs_sft"}
    # 12 tasks, one sample each: SFT solves 5 (t < 5), SFT + RL 10 (t < 10), base none
    assert summary["pairs"]["sft_rl_vs_sft"]["gain"]["diff"]["value"] == pytest.approx(5 / 12)
    assert summary["pairs"]["sft_rl_vs_base"]["gain"]["diff"]["value"] == pytest.approx(10 / 12)
    assert summary["policies"]["base"]["completion"]["value"] == 0.0
    assert "| sft_rl over sft (paired) | +0.417" in text and "recovery" in text


def test_humaneval_comes_from_the_wheel_and_only_records_with_visible_tests_are_kept(tmp_path):
    records = humaneval_records(tmp_path / "HumanEval.jsonl")
    assert len(records.read_text().splitlines()) == 164
    kept = benchmark_tasks(records, "humaneval", 2, needs_visible=True)
    every = benchmark_tasks(records, "humaneval", 2, needs_visible=False)
    assert len(every) == 164 and 150 <= len(kept) < 164 and all(t.visible_tests for t in kept)
    with pytest.raises(ConfigError, match="not one of"):
        benchmark_tasks(records, "nope", 2, needs_visible=True)


def test_main_scores_a_demo_runs_policy_and_writes_the_report(tmp_path, tiny_model_dir, capsys):
    config = load_config("examples/test_and_fix_by_example.toml",
                         [f'model.name="{tiny_model_dir}"', f'out_dir="{tmp_path / "train"}"'])
    (tmp_path / "demo_config.toml").write_text(to_toml(config), encoding="utf-8")
    assert main([str(tmp_path), "--policies", "base", "--n-tasks", "2", "--max-new-tokens", "8"]) == 0
    here = tmp_path / "transfer" / "humaneval"
    summary = json.loads((here / "summary.json").read_text())
    assert summary["tasks"] == 2 and summary["policies"]["base"]["completion"]["value"] == 0.0
    assert "| base | 0.000" in (here / "TRANSFER.md").read_text()
    assert len((here / "base" / "episodes.jsonl").read_text().splitlines()) == 2
    printed = capsys.readouterr()
    assert "transfer:" in printed.out
    assert f"sandgym transfer: 2 humaneval tasks x 1 policies (base), writing to {here}" in printed.err
    with pytest.raises(ConfigError, match="unknown"):
        main([str(tmp_path), "--policies", "base,nope"])
    with pytest.raises(ConfigError, match="demo_config.toml is missing"):
        main([str(tmp_path / "nothing")])


def test_any_runs_policies_on_reasoning_gym_haystacks_with_the_long_context_rollout(tmp_path, tiny_model_dir):
    """--config and --policy NAME=SPEC score a run not laid out as a demo; a long-context rollout gets the
    imported haystacks as files, and the report pairs each policy with the first."""
    pytest.importorskip("reasoning_gym")
    from sandgym.tasks.importers.reasoning_gym import write_entries

    records = write_entries("needle_haystack", tmp_path / "needle_haystack.jsonl", size=2, seed=0,
                            min_num_statements=400, max_num_statements=400)
    config = tmp_path / "lc.toml"
    cfg = load_config("examples/long_context_lengths.toml", [f'model.name="{tiny_model_dir}"'])
    config.write_text(to_toml(cfg), encoding="utf-8")
    argv = [str(tmp_path / "run"), "--config", str(config), "--records", str(records), "--format", "reasoning_gym",
            "--max-new-tokens", "8", "--policy", f"base={tiny_model_dir}", "--policy", f"again={tiny_model_dir}"]
    assert main(argv) == 0
    here = tmp_path / "run" / "transfer" / "needle_haystack"
    summary = json.loads((here / "summary.json").read_text())
    assert summary["tasks"] == 2 and set(summary["pairs"]) == {"again_vs_base"}
    header = (here / "TRANSFER.md").read_text().split("\n| policy |")[1].split("\n")[0]
    assert "| 4K |" in header and "recovery" not in header and "submitted" in header  # lengths; no test behaviours
    assert set(summary["policies"]["base"]["by_length"]) == {"4K"}
    rows = [json.loads(x) for x in (here / "base" / "episodes.jsonl").read_text().splitlines()]
    assert {r["doc_tokens"] for r in rows} and all(2500 < r["doc_tokens"] < 3600 for r in rows)
    tasks = [json.loads(x) for x in (here / "tasks.jsonl").read_text().splitlines()]
    assert all("document.txt" in t["files"] for t in tasks)
    with pytest.raises(ConfigError, match="NAME=SPEC"):
        main([*argv[:-4], "--policy", "oops"])
    with pytest.raises(ConfigError, match="leave it out"):
        main([*argv, "--policies", "base"])
    with pytest.raises(ConfigError, match="folder name"):
        main([*argv[:-4], "--policy", f"../x={tiny_model_dir}"])
    test_track = load_config("examples/test_and_fix_by_example.toml", [f'model.name="{tiny_model_dir}"'])
    config.write_text(to_toml(test_track), encoding="utf-8")  # a rollout that runs visible tests: none here
    with pytest.raises(ConfigError, match="visible tests"):
        main([*argv[:-4], "--visible", "0"])


def test_rl_is_paired_with_sft_once_whatever_the_order():
    rows = {"sft_rl": _tf_rows(0.5, samples=1), "sft": _tf_rows(0.25, samples=1), "base": _tf_rows(0.0, samples=1)}
    _, summary = transfer_table(rows)
    assert set(summary["pairs"]) == {"sft_vs_sft_rl", "base_vs_sft_rl"}


def test_sandgym_transfer_is_the_same_command_as_python_m():
    args = build_parser().parse_args(["transfer", "runs/demo", "--n-tasks", "4", "--policy", "base=smollm2-135m"])
    assert args.func is transfer.run and args.out == "runs/demo" and args.n_tasks == 4
    assert args.policy == ["base=smollm2-135m"] and args.max_new_tokens == 384
    same = transfer.build_parser().parse_args(["runs/demo", "--n-tasks", "4", "--policy", "base=smollm2-135m"])
    assert {k: v for k, v in vars(args).items() if k not in ("func", "command")} == vars(same)
