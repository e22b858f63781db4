"""Constructed episodes with turns for the episode browser's tests (no model, no sandbox)."""

from __future__ import annotations

from sandgym.evaluate.episodes import EpisodeRow
from sandgym.evaluate.report_browser import PolicyEpisodes

EVIL = ("</script><script>alert(1)</script><img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">"
        "<!-- & &amp; \u2028")
"""Text that would run script if the page put it in as HTML, or end the data's <script> element early."""
EVIL_TASK = "strings-0"
LONG_OBS = "x" * 10_000


def _turns(task: str, ok: bool) -> list[dict]:
    if task == EVIL_TASK:
        return [{"text": EVIL, "observation": LONG_OBS, "truncated": False},
                {"text": '<tool_call>{"name": "submit", "arguments": {"answer": "</script>"}}</tool_call>',
                 "observation": "", "truncated": False}]
    return [{"text": f"```python\ndef solve(x):\n    return x  # {task}\n```", "observation": "1 of 2 tests failed",
             "truncated": False},
            {"text": '<tool_call>{"name": "run_tests", "arguments": {}}</tool_call>' if ok else "<tool_call>{oops",
             "observation": "2 of 2 tests passed" if ok else "Tool call is not valid JSON", "truncated": not ok}]


def policy_rows(rate: dict[str, float], n_tasks: int = 4, samples: int = 2) -> tuple[EpisodeRow, ...]:
    """Episodes of one policy: per family a share ``rate`` solved, two turns each (one task's text is hostile)."""
    rows = []
    for fam, p in rate.items():
        for t in range(n_tasks):
            for s in range(samples):
                ok = (t * samples + s) % 10 < p * 10
                task = f"{fam}-{t}"
                rows.append(EpisodeRow(
                    seed=0, task_id=task, domain="coding", family=fam, unseen=fam == "parsing", sample=s, success=ok,
                    reward=float(ok), failure_mode="success" if ok else ("max_turns" if t % 2 else "wrong_answer"),
                    turns=2, gen_tokens=40, sandbox_s=0.1, truncated=False, infra_failure=False,
                    reward_components={"tests@v1": float(ok), "format@v1": 1.0},
                    trajectory={"turns": _turns(task, ok)}))
    return tuple(rows)


RATES = ({"strings": 0.3, "parsing": 0.0}, {"strings": 0.6, "parsing": 0.1}, {"strings": 0.9, "parsing": 0.2})


def three_policies() -> list[PolicyEpisodes]:
    """base / SFT / SFT+RL on the same tasks and seeds, as in the demo's report."""
    return [PolicyEpisodes(label, policy_rows(rate))
            for label, rate in zip(("base model", "SFT only", "SFT + RL"), RATES, strict=True)]
