"""Import reasoning-gym entries: JSONL of ``{"question", "answer", "metadata"}`` objects, as
``reasoning_gym.create_dataset(...)`` yields them (:func:`write_entries` writes such a file from the installed
package, as ``sandgym tasks reasoning-gym needle_haystack --size 30 --set min_num_statements=520 --set
max_num_statements=520 -o F`` does).

Each entry becomes a ``match`` task graded by sandgym's ``normalized`` matcher (case, surrounding whitespace and
punctuation ignored; reasoning-gym's own ``needle_haystack`` scorer also ignores inner spaces and refuses surrounding
punctuation, so the two differ only on such spellings, never on which name is right). Only datasets with a
reference ``answer`` import: an entry graded by its own code (a null answer) is a problem naming its line. An entry
whose ``question`` ends with its ``metadata["question"]`` after a longer text (``needle_haystack``: a haystack of
statements, then "Who ... ? Reply only with a name.") is a long-context task asked as the built-in long-context
families ask theirs: the text is the document, one sentence per line, inline in the prompt up to
``INLINE_MAX_TOKENS`` and otherwise only in the workspace file ``document.txt``, to be searched with grep or read in
ranges (an entry's optional ``placement``, "inline" or "file", decides instead); ``metadata["tokens"]`` gives the
per-length report its length. Other entries are asked inline as they are.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from sandgym.configs import parse_override
from sandgym.errors import ConfigError
from sandgym.tasks.importers.common import read_records, require, task_id
from sandgym.tasks.suites.long_context import CHARS_PER_TOKEN, INLINE_MAX_TOKENS, document_prompt
from sandgym.tasks.task import Reference, Task, TaskLimits, Verifier
from sandgym.tasks.validate import Problem, raise_problems

FIELDS: dict[str, type | tuple[type, ...]] = {"question": str, "answer": (str, int, float), "metadata": dict}
DOCUMENT = "document.txt"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WHO = re.compile(r"^Who (.+?)\?")
_NAME = re.compile(r"[^A-Za-z0-9_.\-]+")


def split_document(question: str, asked: Any) -> tuple[list[str], str] | None:
    """(document lines, the question asked) when ``question`` is a text followed by ``asked``; else None."""
    if not isinstance(asked, str) or not asked.strip() or not question.rstrip().endswith(asked.strip()):
        return None
    text = question.rstrip()[: -len(asked.strip())].strip()
    if len(text) <= len(asked):
        return None
    return [s for s in _SENTENCE_END.split(text) if s.strip()], asked.strip()


def answer_text(answer: str | int | float) -> str:
    """The reference answer as the agent would write it: ``12.0`` -> ``"12"``."""
    if isinstance(answer, float) and answer.is_integer():
        return str(int(answer))
    return str(answer).strip()


def other_answers(data: dict[str, Any]) -> list[str]:
    """Names besides the reference that the document states answer a "Who <predicate>?" question (a haystack
    where reasoning-gym drew the asked verb and subject for two people has two right answers but grades one)."""
    parts = split_document(data["question"], data["metadata"].get("question"))
    found = _WHO.match(parts[1]) if parts else None
    if parts is None or found is None:
        return []
    tail = f" {found.group(1)}."
    names = {line[: -len(tail)] for line in parts[0] if line.endswith(tail)}
    return sorted(names - {answer_text(data["answer"])})


def entry_problem(data: dict[str, Any]) -> tuple[str, str, str] | None:
    """(field, what is wrong, the fix) for an entry that cannot be a fair task (fields' types already checked)."""
    answer = data["answer"]
    if isinstance(answer, bool) or (isinstance(answer, float) and not math.isfinite(answer)):
        return "answer", f"{answer!r} is not an answer text", "write the reference answer as a string or number"
    if not answer_text(answer):
        return "answer", "empty", "give the reference answer"
    if not data["question"].strip():
        return "question", "blank", "give the question the agent is asked"
    if data.get("placement") not in (None, "inline", "file"):
        return ("placement", f"{data['placement']!r} is not 'inline' or 'file'",
                'leave it out (inline up to 1,500 tokens) or write "file" or "inline"')
    others = other_answers(data)
    if others:
        return ("question", f"the document also states it of {others[:3]}, but only {answer_text(answer)!r} is "
                "graded right", "drop the entry (sandgym tasks reasoning-gym skips such haystacks)")
    return None


def from_entry(data: dict[str, Any], *, line: int, split: str = "heldout") -> Task:
    """One reasoning-gym entry (already checked by :func:`entry_problem`) as a Task."""
    meta = data["metadata"]
    dataset = _NAME.sub("-", str(meta.get("source_dataset") or "reasoning_gym")).strip("-") or "reasoning_gym"
    raw = data.get("id")
    raw_id = raw if raw is not None else f"{dataset}-{meta.get('source_index', line)}"
    answer = answer_text(data["answer"])
    extra = {"source_id": str(raw_id), "format": "reasoning_gym", "source_dataset": dataset}
    parts = split_document(data["question"], meta.get("question"))
    files: dict[str, str] = {}
    doc_meta: dict[str, Any] = {}
    if parts is None:
        prompt, domain, turns = f"{data['question'].strip()}\nSubmit only the answer.", "reasoning", 3
    else:
        lines, asked = parts
        tokens = sum(len(s) + 1 for s in lines) // CHARS_PER_TOKEN
        placement = data.get("placement") or ("inline" if tokens <= INLINE_MAX_TOKENS else "file")
        prompt, files, doc_meta = document_prompt(f"a text of {len(lines)} sentences", asked, lines, placement,
                                                  DOCUMENT, owner=f"reasoning_gym {dataset}")
        domain, turns = "long_context", 3 if placement == "inline" else 8
    return Task(
        id=task_id(f"reasoning_gym/{dataset}", raw_id), domain=domain, family=dataset, split=split,  # type: ignore[arg-type]
        prompt=prompt, verifier=Verifier(kind="match", answer=answer, matcher="normalized"),
        files=files, reference=Reference(answer=answer), limits=TaskLimits(max_turns=turns), unseen=True,
        metadata={**doc_meta, **extra},
    )


def import_reasoning_gym(path: str | Path, *, split: str = "heldout") -> list[Task]:
    """Tasks from a JSONL file of reasoning-gym entries; TaskError lists every bad record (file, line, field, fix),
    including an entry whose question repeats an earlier one's (reasoning-gym seeds entry ``i`` with ``seed + i``,
    so neighbouring seeds give the same entries) and a haystack with two right answers."""
    file = Path(path)
    problems: list[Problem] = []
    tasks: list[Task] = []
    ids: dict[str, int] = {}
    questions: dict[str, int] = {}
    for line, data in read_records(file, problems):
        if "answer" in data and data["answer"] is None:
            problems.append(Problem(str(file), line, "answer", "null: this dataset grades with its own code",
                                    "import a dataset whose entries carry a reference answer"))
            continue
        if not require(data, FIELDS, str(file), line, "reasoning-gym", problems):
            continue
        bad = entry_problem(data)
        if bad is not None:
            problems.append(Problem(str(file), line, *bad))
            continue
        if data["question"] in questions:
            problems.append(Problem(str(file), line, "question", f"the same as line {questions[data['question']]}'s",
                                    "keep seeds at least --size apart (reasoning-gym seeds entry i with seed + i)"))
            continue
        task = from_entry(data, line=line, split=split)
        if task.id in ids:
            problems.append(Problem(str(file), line, "id", f"{task.id!r} (ids keep letters, digits and _.-/) repeats "
                                    f"line {ids[task.id]}'s", "give each entry an id that differs in those"))
            continue
        questions[data["question"]] = ids[task.id] = line
        tasks.append(task)
    raise_problems(problems)
    return tasks


def write_entries(dataset: str, out: str | Path, *, size: int, seed: int = 0, placement: str | None = None,
                  **config: Any) -> Path:
    """Append ``size`` entries of reasoning-gym's ``dataset`` (``config``: its options) to JSONL, each with an
    ``id`` naming the options and the index (and ``placement``, when given: where the import puts a document),
    skipping entries that cannot be fair tasks (:func:`entry_problem`: a haystack with two right answers). Entry
    ``i`` of seed ``s`` is entry ``i - 1`` of seed ``s + 1`` (reasoning-gym seeds each with ``seed + i``): files
    meant to hold different entries need seeds further apart than their sizes. Needs ``pip install
    reasoning-gym``; nothing is downloaded."""
    if placement not in (None, "inline", "file"):
        raise ConfigError(f"placement={placement!r} is not 'inline' or 'file' (leave it out for the default: inline "
                          "up to 1,500 tokens)")
    try:
        import reasoning_gym
    except ImportError as exc:
        raise ConfigError("reasoning-gym entries come from the reasoning-gym package: pip install reasoning-gym") \
            from exc
    try:
        entries = reasoning_gym.create_dataset(dataset, size=2 * size + 10, seed=seed, **config)
    except (KeyError, TypeError, ValueError, AssertionError) as exc:
        raise ConfigError(f"reasoning-gym dataset {dataset!r} with {config}: {exc}; check the dataset's name and "
                          "its config fields") from exc
    tag = "-".join(f"{v}" for v in config.values()) or "default"
    records = []
    for i, entry in enumerate(entries):  # entries that cannot be fair tasks are skipped (their index is not used)
        record = {"id": f"{tag}/s{seed}-{i}", "question": entry["question"], "answer": entry["answer"],
                  "metadata": entry["metadata"], **({"placement": placement} if placement else {})}
        if entry["answer"] is None or entry_problem(record) is None:
            records.append(record)
        if len(records) == size:
            break
    else:
        raise ConfigError(f"reasoning-gym dataset {dataset!r} with {config}: only {len(records)} of {2 * size + 10} "
                          f"entries make fair tasks; ask for fewer than {size}")
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.writelines(json.dumps(r, default=str) + "\n" for r in records)
    return path


def dataset_config(pairs: list[str]) -> dict[str, Any]:
    """``["min_num_statements=100", ...]`` -> ``{"min_num_statements": 100}`` (values read as config overrides'
    are: TOML values, else text)."""
    config: dict[str, Any] = {}
    for pair in pairs:
        key, sep, _ = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {pair!r}: write KEY=VALUE, e.g. --set min_num_statements=100")
        config[key.strip()] = parse_override(pair)[1]
    return config
