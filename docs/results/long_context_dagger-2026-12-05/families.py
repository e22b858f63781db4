"""Per family and per length, solved of the 60 held-out 4K/8K tasks, for each evaluation given (NAME=DIR with an
episodes.jsonl), on the task ids of the first; with turns and failure modes.

    python docs/results/long_context_dagger-2026-12-05/families.py warm_start=runs/long_context_4k-2026-12-04/eval/sft \
        dagger_sft=runs/long_context_dagger-2026-12-05/eval/sft rl=runs/long_context_dagger-2026-12-05/eval/rl_dagger_evidence [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("evals", nargs="+", metavar="NAME=DIR")
    ap.add_argument("--json")
    args = ap.parse_args()
    out, ids = {}, None
    for spec in args.evals:
        name, folder = spec.split("=", 1)
        rows = [json.loads(line) for line in (Path(folder) / "episodes.jsonl").read_text().splitlines()]
        ids = ids or {r["task_id"] for r in rows}
        rows = [r for r in rows if r["task_id"] in ids]
        fams = Counter(r["family"] for r in rows if r["success"])
        lengths = Counter(r["doc_tokens"] > 5000 for r in rows if r["success"])
        out[name] = {"episodes": len(rows), "solved": sum(r["success"] for r in rows),
                     "by_family": {f: fams.get(f, 0) for f in sorted({r["family"] for r in rows})},
                     "4K": lengths.get(False, 0), "8K": lengths.get(True, 0),
                     "turns": round(sum(r["turns"] for r in rows) / len(rows), 2),
                     "failures": dict(Counter(r["failure_mode"] for r in rows))}
        print(name, json.dumps(out[name]))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
