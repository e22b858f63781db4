"""Runtime signals in evaluation: metrics.json["signals"] has each family's means beside its completion, the report a
"Runtime signals" table; suites without signals say so."""

from __future__ import annotations

from sandgym.evaluate.aggregate import aggregate
from sandgym.evaluate.episodes import EpisodeRow
from sandgym.evaluate.report import markdown


def _row(task: str, family: str, success: bool, signals: dict[str, float], alerts: float = 1.0,
         infra: bool = False) -> EpisodeRow:
    return EpisodeRow(seed=0, task_id=task, domain="coding", family=family, unseen=False, sample=0, success=success,
                      reward=float(success), failure_mode="success" if success else "wrong_answer", turns=2,
                      gen_tokens=10, sandbox_s=1.0, truncated=False, infra_failure=infra,
                      reward_components={"correctness@v1": float(success), "alerts@v1": alerts}, signals=signals)


def test_signals_by_family_beside_completion_and_in_the_report() -> None:
    stack = {"alert_rules": 5.0, "alerts_fired": 0.0, "p95_ms": 10.0, "rss_growth_mb": 1.0}
    rows = [
        _row("a/1", "service_leak", True, stack),
        _row("a/2", "service_leak", False, {**stack, "alerts_fired": 1.0, "rss_growth_mb": 11.0}, alerts=0.8),
        _row("a/3", "service_leak", False, {**stack, "p95_ms": 99.0}, infra=True),  # excluded from scores
        _row("b/1", "strings", True, {}),  # no signals: not in the section
    ]
    m = aggregate(rows, samples=1)
    leak = m["signals"]["by_family"]["service_leak"]
    assert leak["episodes"] == 2 and leak["completion"] == 0.5
    assert leak["means"]["rss_growth_mb"] == 6.0 and leak["means"]["p95_ms"] == 10.0
    assert leak["means"]["alerts@v1"] == 0.9 and "strings" not in m["signals"]["by_family"]
    md = markdown({**m, "policy": {"spec": "oracle"}})
    section = md.split("## Runtime signals", 1)[1].split("\n## ", 1)[0]
    assert "| service_leak | 2 | 0.500 | 0.900 |" in section and "RSS growth MiB" in section


def test_no_signals_says_so() -> None:
    m = aggregate([_row("b/1", "strings", True, {})], samples=1)
    assert m["signals"] is None
    assert "No task in these suites measures runtime signals." in markdown({**m, "policy": {"spec": "oracle"}})


def test_rows_written_before_signals_still_load() -> None:
    data = _row("a/1", "x", True, {}).to_json()
    data.pop("signals")
    assert EpisodeRow.from_json(data).signals == {}
