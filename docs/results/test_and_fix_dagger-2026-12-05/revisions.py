"""What a test-and-fix policy does after its first block fails the visible tests, from its evaluation episodes.

    python docs/results/test_and_fix_dagger-2026-12-05/revisions.py NAME=EPISODES_DIR [NAME=EPISODES_DIR ...]

Per policy, over the episodes whose first test run did not pass every visible test: how many wrote another block,
how many of those repeated the failing block unchanged, how many revisions passed more visible tests than the first
block, how many later passed them all, and how many episodes ended correct (recovery's numerator).
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

PASSED = re.compile(r"Visible tests: (\d+) passed, (\d+) not passed")


def revisions(folder: Path) -> dict[str, int]:
    out: Counter[str] = Counter()
    for line in (folder / "episodes.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        turns = row["trajectory"]["turns"]
        blocks = [t["text"].strip() for t in turns if "```python" in t["text"]]
        runs = [(int(m.group(1)), int(m.group(2))) for t in turns if (m := PASSED.search(t.get("observation") or ""))]
        if not runs or runs[0][1] == 0:
            continue
        out["first_run_failed"] += 1
        out["ended_correct"] += bool(row["success"])
        if len(blocks) >= 2:
            out["wrote_another_block"] += 1
            out["same_block_again"] += blocks[1] == blocks[0]
            out["passed_more"] += len(runs) > 1 and runs[1][0] > runs[0][0]
            out["later_passed_all"] += any(bad == 0 for _, bad in runs[1:])
    return dict(out)


def main() -> int:
    result = {}
    for arg in sys.argv[1:]:
        name, _, folder = arg.partition("=")
        result[name] = revisions(Path(folder))
        print(f"{name}: {result[name]}")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
