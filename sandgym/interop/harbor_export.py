"""sandgym Tasks -> Harbor task directories (``sandgym tasks export --format harbor SUITE -o DIR``).

Each task becomes ``DIR/<name>/`` (the id with ``/`` and ``:`` as ``__``)::

    task.toml            [task] name; [metadata] difficulty, sandgym_id, family; [verifier] / [agent] timeout_sec
    instruction.md       the prompt, with the sandbox workspace /workspace written as Harbor's WORKDIR /app
    environment/         Dockerfile (python:3.11-slim, WORKDIR /app, pip install pytest + the task's requirements,
                         COPY workspace/ /app/) and workspace/ (the task's files)
    tests/test.sh        runs ``python3 /tests/grade.py``, which writes /logs/verifier/reward.txt
    tests/grade.py       the verifier: ``tests`` (hidden pytest files in tests/hidden/, reward = share of the
                         expected test cases that passed), ``match`` (the answer in /app/final_answer.txt, the
                         task's matcher) or ``script`` (the check script, run from /app with the answer in
                         answer.txt)
    solution/solve.sh    writes the reference files (and final_answer.txt for an answer) with python3

``sandgym tasks import --format harbor DIR`` reads them back (the round trip keeps oracle 1.0 and noop 0).
Refused, with the reason: host-side verifiers (``kind="host"``: they run in sandgym's process, not in a
container), binary task files, and the ``regex`` and ``set`` matchers. Traps (extra hidden tests) are not exported
(``metadata.sandgym_traps_dropped``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from sandgym.errors import TaskError
from sandgym.interop.harbor_pytest import GRADER_DIR, remap_paths
from sandgym.tasks.folder import toml_value
from sandgym.tasks.task import Task

__all__ = ["ANSWER_FILE", "HIDDEN", "TEST_SH", "export_harbor", "harbor_name"]

ANSWER_FILE = "final_answer.txt"
"""Where an exported task's agent writes its answer (Harbor has no submit; answer.txt is the script verifier's)."""
WORKDIR = "/app"
_MATCHERS = ("exact", "normalized", "number", "contains")
_EOF = "SANDGYM_EOF"
HIDDEN = "hidden"
"""The folder of tests/ that holds a ``tests`` verifier's hidden files (Harbor's /tests/hidden)."""
TEST_SH = "#!/bin/bash\nmkdir -p /logs/verifier\npython3 /tests/grade.py\n"

GRADE = r'''"""sandgym's verifier for this task, exported to Harbor: writes /logs/verifier/reward.txt."""
import json, os, re, subprocess, xml.etree.ElementTree as ET
SPEC = json.loads(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "spec.json")).read())
WORK = os.getcwd()
os.makedirs("/logs/verifier", exist_ok=True)


def tests():
    hidden = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hidden")
    xml = "/logs/verifier/junit.xml"
    env = dict(os.environ, PYTHONPATH=WORK + os.pathsep + os.environ.get("PYTHONPATH", ""))
    subprocess.run(["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", hidden,
                    "--junitxml=" + xml, hidden], cwd=WORK, env=env, timeout=SPEC["timeout"])
    if not os.path.exists(xml):
        return 0.0
    cases = list(ET.parse(xml).iter("testcase"))
    passed = sum(1 for c in cases if not any(ch.tag in ("failure", "error", "skipped") for ch in c))
    return min(passed, SPEC["expected"]) / SPEC["expected"]


def norm(s):
    return re.sub(r"\s+", " ", s.strip().lower().strip(".").strip())


def number(s):
    found = re.findall(r"-?\d+(?:\.\d+)?", s.replace(",", ""))
    return float(found[-1]) if found else None


def match():
    path = os.path.join(WORK, SPEC["answer_file"])
    got = open(path).read() if os.path.exists(path) else ""
    want, how = SPEC["answer"], SPEC["matcher"]
    if how == "exact":
        return float(got.strip() == want.strip())
    if how == "normalized":
        return float(norm(got) == norm(want))
    if how == "contains":
        return float(norm(want) in norm(got))
    a, b = number(got), number(want)
    return float(a is not None and b is not None and abs(a - b) <= 1e-6 * max(1.0, abs(b)))


def script():
    path = os.path.join(WORK, SPEC["answer_file"])
    answer = open(path).read() if os.path.exists(path) else ""
    with open(os.path.join(WORK, "answer.txt"), "w") as f:
        f.write(answer)
    out = subprocess.run(["python3", "-c", SPEC["script"]], cwd=WORK, capture_output=True, text=True,
                         timeout=SPEC["timeout"]).stdout
    for line in reversed(out.strip().splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("score"), (int, float)):
            return min(1.0, max(0.0, float(data["score"])))
    return 0.0


reward = {"tests": tests, "match": match, "script": script}[SPEC["kind"]]()
with open("/logs/verifier/reward.txt", "w") as f:
    f.write(str(reward))
print("reward", reward)
'''


def harbor_name(task_id: str) -> str:
    """A directory and ``[task] name`` for ``task_id``: ``/`` and ``:`` become ``__``, other odd characters ``-``."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", task_id.replace("/", "__").replace(":", "__"))


def _why_not(task: Task) -> str:
    v = task.verifier
    if v.kind == "host":
        return f"host-side verifier {v.host} runs in sandgym's process; Harbor runs verifiers in the container"
    if v.kind == "match" and v.matcher not in _MATCHERS:
        return f"matcher {v.matcher!r} is not exported (only {_MATCHERS})"
    if any(isinstance(t, bytes) for t in task.files.values()):
        return "binary task files are not exported"
    return ""


def _solve_sh(files: Mapping[str, str]) -> str:
    """solve.sh: writes ``files`` (path -> text) byte for byte with python3 (no quoting or heredoc pitfalls)."""
    literal = json.dumps(json.dumps(dict(files), ensure_ascii=True))
    return (f"#!/bin/bash\nset -e\ncd {WORKDIR}\npython3 - <<'{_EOF}'\nimport json, os\nFILES = json.loads({literal})\n"
            "for path, text in FILES.items():\n    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)\n"
            "    with open(path, 'w', encoding='utf-8', newline='') as f:\n        f.write(text)\n"
            f"{_EOF}\n")


def _write_task(task: Task, root: Path) -> None:
    v, lim = task.verifier, task.limits
    difficulty = {1: "easy", 2: "medium"}.get(task.difficulty, "hard")
    meta: dict[str, str | bool] = {"difficulty": difficulty, "sandgym_id": task.id,
                                   "family": f"{task.domain}/{task.family}"}
    if v.kind == "tests" and v.traps:
        meta["sandgym_traps_dropped"] = True
    lines = ['version = "1.0"', "", "[task]", f"name = {toml_value(harbor_name(task.id))}", "", "[metadata]"]
    lines += [f"{k} = {toml_value(x)}" for k, x in meta.items()]
    lines += ["", "[verifier]", f"timeout_sec = {float(lim.exec_timeout_s)}", "", "[agent]",
              f"timeout_sec = {float(lim.episode_timeout_s)}", ""]
    (root / "task.toml").write_text("\n".join(lines), encoding="utf-8")
    prompt = task.prompt.replace("/workspace", WORKDIR)
    if v.kind in ("match", "script"):
        prompt += f"\n\nWrite your final answer to {WORKDIR}/{ANSWER_FILE}."
    (root / "instruction.md").write_text(prompt + "\n", encoding="utf-8")
    env = root / "environment"
    for rel, text in task.files.items():
        (env / "workspace" / rel).parent.mkdir(parents=True, exist_ok=True)
        (env / "workspace" / rel).write_text(str(text), encoding="utf-8")
    env.mkdir(parents=True, exist_ok=True)
    pip = " ".join(["pytest", *(json.dumps(r) if " " in r else r for r in task.requirements)])
    docker = ["FROM python:3.11-slim", f"WORKDIR {WORKDIR}", f"RUN pip install --no-cache-dir {pip}"]
    if task.files:
        docker.append(f"COPY workspace/ {WORKDIR}/")
    (env / "Dockerfile").write_text("\n".join(docker) + "\n", encoding="utf-8")
    tests = root / "tests"
    for rel, text in v.tests.items():  # the paths sandgym's grader gives them, as Harbor's container has them
        text = remap_paths(text, [("/workspace", WORKDIR), (GRADER_DIR, f"/tests/{HIDDEN}")])
        (tests / HIDDEN / rel).parent.mkdir(parents=True, exist_ok=True)
        (tests / HIDDEN / rel).write_text(text, encoding="utf-8")
    tests.mkdir(parents=True, exist_ok=True)
    spec = {"kind": v.kind, "expected": v.expected_tests, "answer": v.answer, "matcher": v.matcher,
            "script": v.script, "answer_file": ANSWER_FILE, "timeout": float(lim.exec_timeout_s)}
    (tests / "spec.json").write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
    (tests / "grade.py").write_text(GRADE, encoding="utf-8")
    (tests / "test.sh").write_text(TEST_SH, encoding="utf-8")
    ref = task.reference
    files = {k: str(t) for k, t in (ref.files if ref else {}).items()}
    if ref is not None and ref.answer is not None and v.kind != "tests":
        files[ANSWER_FILE] = ref.answer
    (root / "solution").mkdir(parents=True, exist_ok=True)
    (root / "solution" / "solve.sh").write_text(_solve_sh(files), encoding="utf-8")


def export_harbor(tasks: Iterable[Task], out: str | Path) -> tuple[list[Path], dict[str, str]]:
    """Write each task as a Harbor task directory under ``out``: (the directories written, {task id: why it was
    skipped}). Raises TaskError when a directory would be written twice (two ids with one name)."""
    out = Path(out)
    written: list[Path] = []
    skipped: dict[str, str] = {}
    names: dict[str, str] = {}
    for task in tasks:
        why = _why_not(task)
        if why:
            skipped[task.id] = why
            continue
        name = harbor_name(task.id)
        if name in names:
            raise TaskError(f"tasks {names[name]!r} and {task.id!r} both export to {name!r}; make the ids differ "
                            "in more than '/', ':' and punctuation")
        names[name] = task.id
        root = out / name
        if root.exists() and any(root.iterdir()):
            raise TaskError(f"{root} exists and is not empty; export into a new directory or remove it")
        root.mkdir(parents=True, exist_ok=True)
        _write_task(task, root)
        written.append(root)
    return written, skipped

