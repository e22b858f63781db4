"""docs/CONFIG.md and docs/CLI.md are generated from the code (``python -m sandgym.docgen``) and kept current; the
CLI's own seams: ``sandgym demo --help`` lists the tracks, long-running commands say where they write."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import get_type_hints

import pytest

from sandgym import docgen
from sandgym.cli import build_parser
from sandgym.cli import main as sandgym_main
from sandgym.docgen import cli_md, config_md
from sandgym.experiments import demo
from tests.docblocks import parse

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.mark.parametrize("name", sorted(docgen.DOCS))
def test_generated_reference_is_current(name):
    committed = (DOCS / name).read_text(encoding="utf-8") if (DOCS / name).is_file() else ""
    assert committed == docgen.DOCS[name](), (
        f"docs/{name} differs from what the code gives now: run `{docgen.COMMAND}` (from the repository root) and "
        "commit the result")


def test_check_names_the_stale_file_and_the_command(tmp_path, capsys):
    assert docgen.main(["--docs", str(tmp_path)]) == 0
    assert docgen.main(["--docs", str(tmp_path), "--check"]) == 0
    (tmp_path / "CLI.md").write_text("old\n", encoding="utf-8")
    assert docgen.main(["--docs", str(tmp_path), "--check"]) == 1
    err = capsys.readouterr().err
    assert "CLI.md is stale" in err and docgen.COMMAND in err and "CONFIG.md" not in err


def test_every_shell_block_of_the_reference_has_a_marker():
    for name in docgen.DOCS:
        doc = parse(docgen.DOCS[name](), f"docs/{name}")
        assert not doc.problems, doc.problems
        shell = [b for b in doc.blocks if b.runnable]
        assert shell and all(b.marker for b in shell)


def test_config_reference_has_every_table_and_key():
    from sandgym.evaluate.config import EvalConfig
    from sandgym.train.config import TrainConfig

    text = config_md.render()
    for cls in (TrainConfig, EvalConfig):
        for t in config_md.tables(cls):
            if t.name:
                assert (f"### `[[{t.name}]]`" if t.array else f"### `[{t.name}]`") in text
            hints = get_type_hints(t.cls)
            for f in dataclasses.fields(t.cls):
                if not config_md.is_section(hints[f.name]):
                    assert f"| `{f.name}` |" in text, f"{t.name}.{f.name}"
    assert "| `lora_r` | integer | `16` |" in text and "| `compute` |" in text and "long-context recipes" in text
    assert "| `max_new_tokens` | integer | `160` |" in text  # evaluation's own [rollout] defaults
    assert "| `suites` | list of strings | `[]` |" in text and "`--suite` |" in text


@dataclasses.dataclass(frozen=True)
class _Undocumented:
    documented: int = 1
    """Has a docstring."""
    bare: int = 2


def test_an_undocumented_field_fails_with_the_fix():
    with pytest.raises(config_md.UndocumentedField, match=r"_Undocumented\.bare .*has no docstring.*sandgym\.docgen"):
        config_md.rows(_Undocumented, config_md.Table("", _Undocumented, None), {})


def _commands(parser, prog="sandgym"):
    for name, _, sub in cli_md.subcommands(parser):
        yield f"{prog} {name}"
        yield from _commands(sub, f"{prog} {name}")


def test_cli_reference_has_every_command_and_subcommand():
    text = cli_md.render()
    commands = list(_commands(build_parser()))
    assert {"sandgym transfer", "sandgym demo", "sandgym eval compare", "sandgym tasks from-repo",
            "sandgym feedback simulate"} <= set(commands)
    for c in commands:
        assert f"# `{c}`\n" in text, c
    assert "| `--track TRACK` | `test_and_fix_by_example` |" in text


def test_a_command_in_no_group_is_an_error(monkeypatch):
    monkeypatch.setattr(cli_md, "GROUPS", cli_md.GROUPS[:-1])
    with pytest.raises(ValueError, match=r"in no group \['serve', 'mcp', 'serve-model'\]"):
        cli_md.render()


@pytest.mark.parametrize("entry", ["sandgym demo", "python -m sandgym.demo"])
def test_demo_help_lists_every_track_one_line_each_and_the_default(entry, capsys):
    with pytest.raises(SystemExit) as done:
        if entry == "sandgym demo":
            sandgym_main(["demo", "--help"])
        else:
            demo.main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: {entry} ")
    lines = out.split("tracks (--track")[1].splitlines()[1:]
    assert [line.split()[0] for line in lines] == [demo.DEFAULT_TRACK, *(t for t in demo.TRACK_HELP
                                                                         if t != demo.DEFAULT_TRACK)]
    assert set(demo.TRACK_HELP) == {*demo.TRACKS, "all"}
    assert lines[0].split()[1] == "(default)" and sum("(default)" in line for line in lines) == 1


def test_long_running_commands_say_where_they_write_at_their_start(tmp_path, monkeypatch, capsys):
    import sandgym.evaluate.cli as eval_cli
    import sandgym.experiments.sweep_cli as sweep_cli

    class Stop(Exception):
        pass

    def stop(*args, **kwargs):
        raise Stop

    monkeypatch.setattr("sandgym.train.loop.run", stop)
    monkeypatch.setattr(eval_cli, "load_tasks", stop)
    monkeypatch.setattr(sweep_cli, "run_sweep", stop)
    cases = {
        "train": (["train", "examples/quickstart.toml", "--set", f'out_dir="{tmp_path / "t"}"'],
                  f"sandgym train: writing to {tmp_path / 't'} (checkpoints in {tmp_path / 't' / 'checkpoints'}"),
        "eval": (["eval", "--policy", "oracle", "--suite", "coding:heldout", "--out", str(tmp_path / "e")],
                 f"sandgym eval: oracle, writing to {tmp_path / 'e'}"),
        "sweep": (["sweep", "--out", str(tmp_path / "s")], f"sandgym sweep: writing to {tmp_path / 's'}"),
    }
    for argv, line in cases.values():
        with pytest.raises(Stop):
            sandgym_main(argv)
        assert line in capsys.readouterr().err
