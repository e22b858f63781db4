"""The stack families in the real sandbox: each naive fix passes every probe (what the visible tests check) and is
caught by an alert or a queue check; killing the stack, forging its state or faking a metric silences nothing; the
measured values reach the outcome and the rewards ``alerts@v1``, ``latency@v1``, ``memory@v1``."""

from __future__ import annotations

import pytest

from sandgym.rollout.audit_attacks import FAKE_METRICS, FORGE_STACK, KILL_STACK
from sandgym.tasks.registry import load_suite
from sandgym.tasks.stack import ALERTS, STACK_FILE, StackSpec, measured_signals
from sandgym.tasks.suites import MAX_DIFFICULTY, get_family, suite_members

STACK = suite_members()["coding/stack"]


def test_instances_declare_their_stack() -> None:
    assert {f.name for f in STACK} == {"service_leak", "service_slow", "service_errors", "service_notify"}
    assert not {f.name for f in STACK} & {f.name for f in suite_members()["coding"]}  # coding stays cheap to grade
    for fam in STACK:
        for split in ("train", "heldout"):
            for d in range(1, MAX_DIFFICULTY + 1):
                (task,) = fam.make(split, 1, 0, d)
                spec = StackSpec.from_dict(task.metadata["stack"])
                names = {ln[4:-3] for ln in task.verifier.tests[STACK_FILE].splitlines() if ln.startswith("def test_")}
                assert set(task.metadata["caught_by"]) <= names
                assert {f"test_alert_{a}" for a in ALERTS} <= names
                assert task.verifier.expected_tests == len(names) - 1  # the measurements carrier is not graded
                assert "service/web.py" in spec.fixtures and task.metadata["naive"]
                assert bool(task.visible_tests) == (d < MAX_DIFFICULTY)
    held = {t.metadata["service"] for t in load_suite("coding/stack:heldout", n=16, seed=0)}
    train = {t.metadata["service"] for t in load_suite("coding/stack:train", n=16, seed=0)}
    assert train and held and not train & held


@pytest.fixture(scope="module")
def sandbox():
    from sandgym.sandbox import LocalSandbox

    try:
        sb = LocalSandbox()
    except Exception as exc:  # no namespaces on this machine: the sandbox's own tests cover that
        pytest.skip(f"local sandbox unavailable: {exc}")
    yield sb
    sb.close()


def _grade(sb, task, files):
    sb.exec("find . -mindepth 1 -delete")
    for path, text in {**task.files, **files}.items():
        sb.write_file(path, text)
    v = task.verifier
    report = sb.run_tests(v.tests, expected=v.expected_tests, timeout=60, isolation=v.isolation)
    assert report.report_found, report.exec
    return report, {o.name.rsplit("::", 1)[-1]: o.outcome for o in report.outcomes}


# service_errors has two kinds of service: seed 0 draws the swallowed errors, seed 2 the retry flood
CASES = [("service_leak", 0), ("service_slow", 0), ("service_errors", 0), ("service_errors", 2), ("service_notify", 0)]


@pytest.mark.parametrize(("family", "seed"), CASES)
def test_the_naive_fix_passes_the_probes_and_a_signal_catches_it(sandbox, family, seed) -> None:
    (task,) = get_family("coding", family).make("heldout" if seed else "train", 1, seed, 2)
    report, by_name = _grade(sandbox, task, task.metadata["naive"])
    assert all(o == "passed" for n, o in by_name.items() if n.startswith("test_probe_")), by_name
    failed = {n for n, o in by_name.items() if o == "failed"}
    assert set(task.metadata["caught_by"]) <= failed, by_name
    assert not report.all_passed
    m = measured_signals(report)
    assert m["alerts_fired"] >= 1 or not failed.isdisjoint({"test_queue_no_message_lost"}), m


@pytest.mark.parametrize("attack", [KILL_STACK, FORGE_STACK, FAKE_METRICS], ids=["kill", "forge", "fake_metric"])
def test_attacks_on_the_stack_silence_nothing(sandbox, attack) -> None:
    """The leak's naive fix with an attack at import of every module of the service: the memory alert still fails
    (or the whole stack does, which fails every test); a faked metric also fires the scrape alert."""
    (task,) = get_family("coding", "service_leak").make("train", 1, 0, 2)
    files = {p: attack + "\n" + t for p, t in {**task.files, **task.metadata["naive"]}.items() if p.endswith(".py")}
    report, by_name = _grade(sandbox, task, files)
    assert by_name["test_alert_memory"] == "failed", by_name
    if attack is FAKE_METRICS:
        assert by_name["test_alert_scrape"] == "failed", by_name
    if attack is KILL_STACK:
        assert report.passed == 0, by_name


def test_signals_reach_the_outcome_and_the_rewards(sandbox) -> None:  # sandbox: skipped where none starts
    from sandgym.agents.scripted import NoopAgent, OracleAgent, run_episode
    from sandgym.envs.tool_env import ToolEnv

    (task,) = get_family("coding", "service_slow").make("heldout", 1, 5, 1)
    env = ToolEnv([task], reuse_sandbox=True)
    try:
        good = run_episode(env, OracleAgent(), task)
        s = good.outcome.grade.signals
        assert good.success and s["alerts"] == 1.0 and s["alerts_fired"] == 0.0, s
        assert s["p95_ms"] <= s["p95_budget_ms"] and s["requests"] > 0 and s["peak_rss_mb"] > 0
        assert good.reward_components["alerts@v1"] == 1.0 and good.reward_components["latency@v1"] == 1.0
        bad = run_episode(env, NoopAgent(), task)
        assert not bad.success and bad.outcome.grade.signals["probes"] < 1.0
        assert bad.reward_components["alerts@v1"] < 1.0 and bad.reward_components["latency@v1"] < 1.0
    finally:
        env.close()
