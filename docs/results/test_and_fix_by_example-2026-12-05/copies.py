"""Did the policy copy the expected constant from a failing test run into its next block? (``by_example`` episodes)

    python docs/results/test_and_fix_by_example-2026-12-05/copies.py NAME=EVAL_DIR [NAME=EVAL_DIR ...]

For each policy's ``episodes.jsonl`` (a ``sandgym eval`` or demo evaluation), over the ``by_example`` episodes:
how many blocks the policy wrote, how many episodes' first run failed, in how many of those a later block contains
every constant of the task's reference (the string literals of its body, which only the failing test showed) inside
its own string literals, how
many repeated the failing block verbatim, and how many ended correct. Prints one JSON object per policy.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

from sandgym.envs.parsing import extract_code_blocks
from sandgym.tasks.registry import load_suite


def constants(source: str) -> list[str]:
    """The string literals of the reference function's body (its docstring left out)."""
    fn = ast.parse(source).body[-1]
    assert isinstance(fn, ast.FunctionDef)
    return [n.value for stmt in fn.body[1:] for n in ast.walk(stmt)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value != " "]


def blocks(episode: dict) -> list[str]:
    """The block the env ran in each turn that had one (the last fenced block of the turn, as the env picks it)."""
    return [bs[-1] for t in episode["trajectory"]["turns"] for bs in [extract_code_blocks(t.get("text", ""))] if bs]


def literals(block: str) -> list[str]:
    """The quoted strings of a block (parsed loosely: the block may not compile)."""
    return [a or b for a, b in re.findall(r"'([^'\n]*)'|\"([^\"\n]*)\"", block)]


def summary(path: Path) -> dict[str, int]:
    eps = [json.loads(line) for line in (path / "episodes.jsonl").open() if '"by_example"' in line]
    tasks: dict[str, object] = {}
    for e in eps:
        if e["task_id"] not in tasks:
            split, d, rest = e["task_id"].split("/")[2:5]
            seed = int(rest[1:].split("-")[0])
            for t in load_suite(f"coding/by_example:{split}", n=int(rest.split("-")[1]) + 1, seed=seed,
                                difficulty=int(d[1:])):
                tasks[t.id] = t
    out = dict(episodes=len(eps), first_run_failed=0, copied_later=0, repeated_failing_block=0, recovered=0,
               correct=sum(bool(e["success"]) for e in eps))
    for e in eps:
        outcome = e["trajectory"].get("outcome") or {}
        first = (outcome.get("actions") or {}).get("first_test_passed")
        bs = blocks(e)
        if first is not False or not bs:
            continue
        out["first_run_failed"] += 1
        want = constants(tasks[e["task_id"]].reference.files["solution.py"])  # type: ignore[attr-defined]
        later = bs[1:]
        out["copied_later"] += any(all(any(c in lit for lit in literals(b)) for c in want) for b in later)
        out["repeated_failing_block"] += bool(later) and later[0] == bs[0]
        out["recovered"] += bool(e["success"])
    return out


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        name, _, where = arg.partition("=")
        print(json.dumps({"policy": name, **summary(Path(where))}))
