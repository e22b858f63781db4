"""The unpaired comparisons of the joint run with the single-domain runs (docs/BENCHMARKS.md, "Joint training at
the single-domain recipes' budget"): a bootstrap of two independent sets of episodes (each resampled with
replacement, 20,000 times, seed 0, 2.5 and 97.5 percentiles) from the solved counts below.

    python docs/results/joint_json_tracking-2026-12-06/unpaired.py

Unpaired because the single-domain runs' episodes were not kept (only their summaries are,
docs/results/json_tools-2026-12-06/, docs/results/long_context-2026-12-05-program_tool/program_tool_mix*/, docs/results/long_context-2026-12-06-program_second_seed/);
both sides ran the same held-out tasks and sampling seeds, so a paired test would be narrower.
"""

from __future__ import annotations

import numpy as np

# (what, joint solved, of, single-domain solved, of, where the single-domain count comes from)
COMPARISONS = [
    ("JSON coding, joint 8 steps vs JSON-only 8 steps", 36, 48, 43, 48, "json_tools-2026-12-06 (0.896)"),
    ("tracking, joint 8 steps vs long-context-only 8 steps", 49, 60, 30, 60, "long_context-2026-12-05-program_tool/program_tool_mix (0.500)"),
    ("JSON coding, joint 16 steps vs JSON-only 8 steps (its recipe)", 38, 48, 43, 48, "json_tools-2026-12-06 (0.896)"),
    ("tracking, joint 16 steps vs long-context-only 16 steps, seed 0", 55, 60, 57, 60,
     "long_context-2026-12-05-program_tool/program_tool_mix16 (0.950)"),
    ("tracking, joint 16 steps vs long-context-only 16 steps, seed 1", 55, 60, 46, 60, "long_context-2026-12-06-program_second_seed/second_run (0.767)"),
    ("multihop, joint 16 steps vs long-context-only 16 steps", 20, 32, 2, 32, "program_tool_mix16/other_families (0.062)"),
]


def unpaired(a: int, n: int, b: int, m: int, rng: np.random.Generator, resamples: int = 20_000) -> tuple[float, float, float]:
    x = np.r_[np.ones(a), np.zeros(n - a)]
    y = np.r_[np.ones(b), np.zeros(m - b)]
    diffs = [rng.choice(x, n).mean() - rng.choice(y, m).mean() for _ in range(resamples)]
    low, high = np.percentile(diffs, [2.5, 97.5])
    return a / n - b / m, float(low), float(high)


def main() -> int:
    rng = np.random.default_rng(0)
    for what, a, n, b, m, source in COMPARISONS:
        d, low, high = unpaired(a, n, b, m, rng)
        print(f"{what}: {a}/{n} vs {b}/{m} ({source}): {d:+.3f} [{low:+.3f}, {high:+.3f}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
