"""Per-step record of a joint run's training: each domain's success, which domains
the learner trained on, and the cosine between their LoRA gradients.

    python docs/results/joint_json_tracking-2026-12-06/summarize.py RUN_DIR [--out docs/results/joint_json_tracking-2026-12-06]

RUN_DIR is a run of examples/joint_json_tracking.toml (`sandgym train examples/joint_json_tracking.toml --set
out_dir=...`). Writes OUT/steps.json and OUT/STEPS.md and prints the table.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

DOMAINS = ("coding", "long_context")


def fmt(x: Any, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def rows(run: Path) -> list[dict[str, Any]]:
    out = []
    for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
        m = json.loads(line)
        out.append({"step": m["step"], **{f"{d}_success": m.get(f"domain/{d}/success") for d in DOMAINS},
                    **{f"{d}_length": m.get(f"domain/{d}/length") for d in DOMAINS},
                    "trained_domains": m.get("losses/trained_domains"), "grad_cosine": m.get("losses/grad_cosine"),
                    "step_s": m.get("perf/step_s")})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run")
    ap.add_argument("--out", default=str(Path(__file__).parent))
    args = ap.parse_args()
    run, out = Path(args.run), Path(args.out)
    table = rows(run)
    lines = ["| step | coding success | long-context success | domains trained | grad cosine | step s |",
             "|---|---|---|---|---|---|"]
    for r in table:
        lines.append(f"| {r['step']} | {fmt(r['coding_success'])} | {fmt(r['long_context_success'])} | "
                     f"{fmt(r['trained_domains'], 0)} | {fmt(r['grad_cosine'], 3)} | {fmt(r['step_s'], 0)} |")
    cos = [r["grad_cosine"] for r in table if r["grad_cosine"] is not None]
    lines.append("")
    lines.append(f"Gradient cosine measured in {len(cos)} of {len(table)} steps"
                 + (f": mean {sum(cos) / len(cos):+.3f}, min {min(cos):+.3f}, max {max(cos):+.3f}." if cos else "."))
    text = "\n".join(lines) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "steps.json").write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    (out / "STEPS.md").write_text(text, encoding="utf-8")
    print(text)
    print(f"wrote {out / 'steps.json'} and {out / 'STEPS.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
