"""RL over SFT on the json_tools track with credit only for submitted work, paired over the same held-out tasks and
seeds, from `require_submit.py`'s evaluations: `python docs/results/json_tools-2026-12-06/compare.py OUT` prints each
policy's completion per family, behaviour, failure modes and most common call plans, and writes OUT/rl_vs_sft.json."""
import json
import sys
from collections import Counter
from pathlib import Path

from sandgym.envs.parsing import parse_turn
from sandgym.evaluate.aggregate import aggregate
from sandgym.evaluate.behaviour import behaviour
from sandgym.evaluate.episodes import read_rows

out = Path(sys.argv[1])
rows = {n: read_rows(out / "eval" / n / "episodes.jsonl") for n in ("base", "sft", "sft_rl")
        if (out / "eval" / n / "episodes.jsonl").is_file()}
trained = ("lists", "numbers", "strings")


def plan(row) -> str:
    """The episode's tool names in order, repeats collapsed (``list_files x3``)."""
    names = [m for t in row.trajectory["turns"] for m in _calls(t["text"])]
    out, prev, n = [], None, 0
    for name in names + [None]:
        if name == prev:
            n += 1
            continue
        if prev is not None:
            out.append(prev + (f" x{n}" if n > 1 else ""))
        prev, n = name, 1
    return " > ".join(out) or "(no call)"


def _calls(text: str) -> list[str]:
    """The turn's tool names as the env parses them, ``(bad)`` for each call it could not parse."""
    turn = parse_turn(text)
    return [c.name for c in turn.calls] + ["(bad)" for e in turn.errors if e.kind == "malformed"]


for name, rs in rows.items():
    ok = [r for r in rs if not r.infra_failure]
    fam = Counter(r.family for r in ok if r.success)
    print(f"{name}: {len(rs)} episodes, completion {sum(r.success for r in ok) / max(1, len(ok)):.3f}; solved per family "
          f"{dict(fam)}; failures {dict(Counter(r.failure_mode for r in ok if not r.success))}")
    print("  behaviour", {k: tuple(round(x, 3) for x in (v["value"], v["low"], v["high"]))
                          for k, v in behaviour(rs).items()})
    print("  plans", Counter(plan(r) for r in rs).most_common(4))
m = aggregate(rows["sft_rl"], samples=1, baseline=rows["sft"], trained_families=trained)
(out / "rl_vs_sft.json").write_text(json.dumps(m, indent=2, default=str), encoding="utf-8")
b = m["baseline"]
for key in ("gain_overall", "gain_trained", "gain_unseen"):
    if b.get(key):
        print(key, {k: b[key][k] for k in ("diff", "p_value", "n_pairs")})
print("behaviour_gain", {k: (round(v["diff"]["value"], 3), round(v["diff"]["low"], 3), round(v["diff"]["high"], 3),
                             round(v["p_value"], 4)) for k, v in (b.get("behaviour_gain") or {}).items()})
