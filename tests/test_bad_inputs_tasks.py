"""Bad task data: every case is a problem naming file, line, field and fix, never a traceback."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from sandgym.errors import TaskError
from sandgym.tasks.load import load_path, task_from_dict, validate_path
from sandgym.tasks.task import TaskLimits
from tests.test_bad_inputs import _run  # one CLI runner for both batteries: no traceback, (code, text)


def _good(**extra) -> dict:
    return {"id": "t1", "domain": "coding", "family": "demo", "split": "train", "prompt": "Say hi.",
            "verifier": {"kind": "match", "answer": "hi"}, **extra}


BAD_LIMITS = [
    ({"limits": {"max_turns": -3}}, "limits.max_turns", "-3"),
    ({"limits": {"max_turns": 0}}, "limits.max_turns", "0"),
    ({"limits": {"max_turns": 10**9}}, "limits.max_turns", "1000000000"),
    ({"limits": {"max_observation_chars": -1}}, "limits.max_observation_chars", "-1"),
    ({"limits": {"exec_timeout_s": 0}}, "limits.exec_timeout_s", "0"),
    ({"limits": {"exec_timeout_s": -1.5}}, "limits.exec_timeout_s", "-1.5"),
    ({"limits": {"episode_timeout_s": math.nan}}, "limits.episode_timeout_s", "nan"),
    ({"limits": {"episode_timeout_s": math.inf}}, "limits.episode_timeout_s", "inf"),
    ({"difficulty": -1}, "difficulty", "-1"),
    ({"difficulty": 0}, "difficulty", "0"),
]


@pytest.mark.parametrize("extra, field, value", BAD_LIMITS)
def test_jsonl_rejects_bad_limits_with_file_line_field_and_fix(tmp_path: Path, capsys, extra, field, value) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(_good(id="ok")) + "\n" + json.dumps(_good(**extra)) + "\n")
    problems = validate_path(path)
    assert len(problems) == 1
    p = problems[0]
    assert (p.file, p.line, p.field) == (str(path), 2, field)
    assert value in p.message and "between" in p.fix
    code, text = _run(capsys, ["tasks", "validate", str(path)])
    assert code == 1 and f"{path}:2: {field}:" in text


@pytest.mark.parametrize("toml_line, field", [("max_turns = -3", "limits.max_turns"),
                                              ("exec_timeout_s = 0", "limits.exec_timeout_s"),
                                              ("episode_timeout_s = nan", "limits.episode_timeout_s")])
def test_task_folder_rejects_bad_limits_at_their_line(tmp_path: Path, capsys, toml_line: str, field: str) -> None:
    folder = tmp_path / "task"
    folder.mkdir()
    (folder / "task.toml").write_text('id = "t"\ndomain = "coding"\nfamily = "f"\nsplit = "train"\n'
                                      'prompt = "p"\n\n[verifier]\nkind = "match"\nanswer = "a"\n\n'
                                      f"[limits]\n{toml_line}\n")
    (p,) = validate_path(folder)
    assert (p.line, p.field) == (12, field)
    code, text = _run(capsys, ["tasks", "validate", str(folder)])
    assert code == 1 and field in text and "fix:" in text


def test_programmatic_limits_are_checked_too() -> None:
    with pytest.raises(TaskError, match="exec_timeout_s"):
        TaskLimits(exec_timeout_s=0)
    with pytest.raises(TaskError, match="max_turns"):
        task_from_dict(_good(limits={"max_turns": -3}))
    assert TaskLimits().max_turns > 0  # the defaults are in range


def _folder_with_files(tmp_path: Path) -> Path:
    folder = tmp_path / "task"
    (folder / "files").mkdir(parents=True)
    (folder / "task.toml").write_text('id = "t"\ndomain = "coding"\nfamily = "f"\nsplit = "train"\n'
                                      'prompt = "p"\n\n[verifier]\nkind = "match"\nanswer = "a"\n')
    (folder / "files" / "ok.py").write_text("x = 1\n")
    return folder


@pytest.mark.parametrize("target", ["/etc/shadow", "/etc/passwd", "HOST_FILE"])
def test_symlink_out_of_the_task_folder_is_rejected(tmp_path: Path, capsys, target: str) -> None:
    folder = _folder_with_files(tmp_path)
    if target == "HOST_FILE":
        host = tmp_path / "secret.txt"
        host.write_text("host secret")
        target = str(host)
    (folder / "files" / "leak.txt").symlink_to(target)
    problems = validate_path(folder)
    assert any("outside the task folder" in p.message and p.file.endswith("leak.txt") for p in problems)
    with pytest.raises(TaskError, match="leak.txt"):
        load_path(folder)
    code, text = _run(capsys, ["tasks", "validate", str(folder)])
    assert code == 1 and "leak.txt" in text and "symlink" in text and "host secret" not in text


def test_symlinked_prompt_and_directory_are_rejected(tmp_path: Path) -> None:
    folder = _folder_with_files(tmp_path)
    (folder / "files" / "etc").symlink_to("/etc")
    (folder / "files" / "dangling").symlink_to(tmp_path / "nothing")
    messages = [p.message for p in validate_path(folder)]
    assert any("/etc" in m and "outside" in m for m in messages)
    assert any("dangling" in m for m in messages)


def test_symlink_inside_the_task_folder_is_fine(tmp_path: Path) -> None:
    folder = _folder_with_files(tmp_path)
    (folder / "files" / "alias.py").symlink_to(folder / "files" / "ok.py")
    (task,) = load_path(folder)
    assert task.files["alias.py"] == "x = 1\n"


def test_non_utf8_task_files(tmp_path: Path, capsys) -> None:
    jsonl = tmp_path / "tasks.jsonl"
    jsonl.write_bytes(json.dumps(_good()).encode() + b"\n" + b'{"id": "caf\xe9"}\n')
    code, text = _run(capsys, ["tasks", "validate", str(jsonl)])
    assert code == 1 and f"{jsonl}:2:" in text and "not UTF-8" in text
    folder = _folder_with_files(tmp_path)
    (folder / "prompt.md").write_bytes(b"\xff\xfe bad")
    (folder / "files" / "latin1.py").write_bytes(b"# caf\xe9\n")
    toml = (folder / "task.toml").read_text().replace('prompt = "p"\n', "")
    (folder / "task.toml").write_text(toml)
    code, text = _run(capsys, ["tasks", "validate", str(folder)])
    assert code == 1 and "prompt.md" in text and "not UTF-8" in text
    (folder / "task.toml").write_bytes(b'id = "caf\xe9"\n')
    code, text = _run(capsys, ["tasks", "validate", str(folder)])
    assert code == 1 and "task.toml" in text and "not UTF-8" in text


def test_json_error_message_has_no_doubled_at(tmp_path: Path, capsys) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"id": "unterminated\n')
    code, text = _run(capsys, ["tasks", "validate", str(path)])
    assert code == 1 and "at at" not in text and "column" in text


@pytest.mark.parametrize("content", [b"\x00\x01\x02\xff" * 100, b"\x89PNG\r\n\x1a\n\x00\x00", None, "dir"])
def test_tasks_import_binary_missing_or_folder(tmp_path: Path, capsys, content) -> None:
    src = tmp_path / "in.jsonl"
    if isinstance(content, bytes):
        src.write_bytes(content)
    elif content == "dir":
        src.mkdir()
    out = tmp_path / "out.jsonl"
    code, text = _run(capsys, ["tasks", "import", str(src), "--format", "humaneval", "-o", str(out)])
    assert code == 2 and str(src) in text and "fix:" in text
    assert not out.exists()
