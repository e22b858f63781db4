"""Versioned reward functions (``name@vN``), their weighted sum, and the golden-case regression check.

Each reward is small and pure: ``(EpisodeOutcome, RewardConfig) -> float``, reading the outcome's nested parts
(``grade``, ``actions``, ``runtime``). Changing what a reward returns for any
input means registering a new version (``correctness@v2``) and adding golden cases for it; ``sandgym rewards
check`` recomputes every golden case in ``sandgym/envs/golden/`` and fails when an output moved.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from sandgym.envs.outcome import EpisodeOutcome, SandboxRuntime
from sandgym.envs.turn_terms import TURN_TERMS, TurnTermSpec, run_turns
from sandgym.errors import ConfigError

__all__ = [
    "REWARDS",
    "RewardConfig",
    "RewardFn",
    "register_reward",
    "resolve",
    "compute_rewards",
    "GOLDEN_DIR",
    "check_golden",
    "SERVICE_SIGNALS",
    "TURN_TERMS",
    "INTERMEDIATE_DEFAULT_WEIGHT",
]

RewardFn = Callable[[EpisodeOutcome, "RewardConfig"], float]
REWARDS: dict[str, RewardFn] = {}
GOLDEN_DIR = Path(__file__).parent / "golden"

_DEFAULT_WEIGHTS = MappingProxyType(
    {"correctness@v1": 1.0, "format@v1": 0.1, "runtime@v1": 0.05, "completion@v1": 0.0, "traps@v1": 0.0,
     "service@v1": 0.0, "alerts@v1": 0.0, "latency@v1": 0.0, "memory@v1": 0.0}
)


def register_reward(name: str) -> Callable[[RewardFn], RewardFn]:
    """Register ``fn`` under ``name@vN``; a name may be registered once (bump the version to change it)."""
    if "@v" not in name or not name.rsplit("@v", 1)[1].isdigit():
        raise ValueError(f"reward name {name!r} must look like 'name@vN', e.g. 'correctness@v2'")

    def deco(fn: RewardFn) -> RewardFn:
        if name in REWARDS:
            raise ValueError(f"reward {name!r} is already registered; register the change as a new version")
        REWARDS[name] = fn
        return fn

    return deco


def resolve(name: str) -> str:
    """``correctness`` -> its latest version ``correctness@vN``; a full ``name@vN`` must exist."""
    if "@v" in name:
        if name not in REWARDS:
            raise ConfigError(f"unknown reward {name!r}; registered: {sorted(REWARDS)}")
        return name
    versions = [k for k in REWARDS if k.split("@v")[0] == name]
    if not versions:
        bases = sorted({k.split("@v")[0] for k in REWARDS})
        raise ConfigError(f"unknown reward {name!r}; choose from {bases} (optionally with @vN)")
    return max(versions, key=lambda k: int(k.rsplit("@v", 1)[1]))


@dataclass(frozen=True)
class RewardConfig:
    """Reward weights (``name`` or ``name@vN`` -> weight) and the runtime budget; zero-weight rewards are metrics."""

    weights: Mapping[str, float] = field(default_factory=lambda: dict(_DEFAULT_WEIGHTS))
    latency_budget_s: float = 10.0
    """Sandbox wall time per episode above which ``runtime`` starts to penalise latency."""

    def __post_init__(self) -> None:
        resolved = {resolve(k): float(v) for k, v in self.weights.items()}
        for key, value in resolved.items():
            if not math.isfinite(value):
                raise ConfigError(f"reward weight {key}={value} must be a finite number")
        if self.latency_budget_s <= 0:
            raise ConfigError(f"latency_budget_s={self.latency_budget_s} must be > 0")
        object.__setattr__(self, "weights", MappingProxyType(resolved))


@register_reward("correctness@v1")
def correctness_v1(o: EpisodeOutcome, cfg: RewardConfig) -> float:
    """Fraction of hidden tests passed (short reports count missing tests as failed), match 0/1, or script score.

    >>> correctness_v1(EpisodeOutcome(grade=Grade(tests_passed=3, tests_expected=4)), RewardConfig())
    0.75
    """
    g = o.grade
    if o.infra_failure:
        return 0.0
    if g.kind == "tests":
        return min(g.tests_passed, g.tests_expected) / g.tests_expected if g.tests_expected > 0 else 0.0
    if g.kind == "match":
        return 1.0 if g.answer_matched else 0.0
    return min(1.0, max(0.0, g.script_score or 0.0))


@register_reward("completion@v1")
def completion_v1(o: EpisodeOutcome, cfg: RewardConfig) -> float:
    """1.0 when the episode succeeded (``EpisodeOutcome.success``: fully solved, no infra failure), else 0.0."""
    return 1.0 if o.success else 0.0


@register_reward("format@v1")
def format_v1(o: EpisodeOutcome, cfg: RewardConfig) -> float:
    """Minus the share of turns with a format error (malformed call, unknown tool, bad args, no call); in [-1, 0].

    >>> format_v1(EpisodeOutcome(actions=Actions(turns=4, malformed_calls=1)), RewardConfig())
    -0.25
    """
    a = o.actions
    if a.turns <= 0:
        return 0.0
    return 0.0 - min(1.0, a.format_errors / a.turns)


@register_reward("runtime@v1")
def runtime_v1(o: EpisodeOutcome, cfg: RewardConfig) -> float:
    """Penalty in [-1, 0]: a quarter each for exceptions (3+ = full), any timeout, any OOM, and sandbox wall time
    beyond ``cfg.latency_budget_s`` (full at twice the budget)."""
    r: SandboxRuntime = o.runtime
    exc = min(1.0, r.exceptions / 3)
    latency = min(1.0, max(0.0, r.sandbox_wall_s / cfg.latency_budget_s - 1.0))
    return 0.0 - 0.25 * (exc + float(r.timeouts > 0) + float(r.ooms > 0) + latency)


@register_reward("traps@v1")
def traps_v1(o: EpisodeOutcome, cfg: RewardConfig) -> float:
    """Fraction of trap (edge-case) tests passed; 0.0 when the task has none."""
    g = o.grade
    if o.infra_failure or g.traps_expected <= 0:
        return 0.0
    return min(g.traps_passed, g.traps_expected) / g.traps_expected


SERVICE_SIGNALS = ("latency", "log_errors", "lost", "duplicated")
"""Runtime signals of service tasks (``coding/service_queue``): handler latency within its budget, no errors in the
service log, no message lost, no message whose effect happened twice."""


@register_reward("service@v1")
def service_v1(o: EpisodeOutcome, cfg: RewardConfig) -> float:
    """Mean, over the service signals the task declares, of the share of each signal's hidden tests passed; 0.0
    when it declares none.

    >>> service_v1(EpisodeOutcome(grade=Grade(signals={"latency": 1.0, "lost": 0.5})), RewardConfig())
    0.75
    """
    signals = o.grade.signals
    values = [signals[s] for s in SERVICE_SIGNALS if s in signals]
    if o.infra_failure or not values:
        return 0.0
    return min(1.0, max(0.0, sum(values) / len(values)))


def _signal_reward(signal: str) -> RewardFn:
    def reward(o: EpisodeOutcome, cfg: RewardConfig) -> float:
        return 0.0 if o.infra_failure else min(1.0, max(0.0, float(o.grade.signals.get(signal, 0.0))))

    reward.__doc__ = f"Share of the ``{signal}`` signal's hidden tests passed (0.0 when the task has no such signal)."
    return reward


for _signal in SERVICE_SIGNALS:  # one opt-in component per signal (not weighted by default)
    register_reward(f"service_{_signal}@v1")(_signal_reward(_signal))


def _answered(signals: Mapping[str, float]) -> float:
    """Share of a stack's measured requests that got a right reply (0.0 when none was measured)."""
    n = signals.get("requests", 0.0)
    return max(0.0, 1.0 - signals.get("failed_requests", 0.0) / n) if n > 0 else 0.0


def _within(value: float, budget: float) -> float:
    """1.0 up to ``budget``, then down linearly to 0.0 at four times the budget."""
    if budget <= 0:
        return 0.0
    return min(1.0, max(0.0, 1.0 - (value / budget - 1.0) / 3.0))


@register_reward("alerts@v1")
def alerts_v1(o: EpisodeOutcome, cfg: RewardConfig) -> float:
    """Share of a service stack's alert rules that stayed quiet (``sandgym.tasks.stack``); 0.0 without a stack.

    >>> alerts_v1(EpisodeOutcome(grade=Grade(signals={"alerts_fired": 1.0, "alert_rules": 4.0})), RewardConfig())
    0.75
    """
    s = o.grade.signals
    rules = s.get("alert_rules", 0.0)
    if o.infra_failure or rules <= 0:
        return 0.0
    return min(1.0, max(0.0, 1.0 - s.get("alerts_fired", rules) / rules))


@register_reward("latency@v1")
def latency_v1(o: EpisodeOutcome, cfg: RewardConfig) -> float:
    """A stack's client-side p95 latency against its budget (1.0 within it, 0.0 at four times it), times the share
    of requests answered right (a fast failure is not fast service); 0.0 without a stack.

    >>> latency_v1(EpisodeOutcome(grade=Grade(signals={"p95_ms": 60.0, "p95_budget_ms": 30.0, "requests": 10.0})),
    ...            RewardConfig())
    0.6666666666666667
    """
    s = o.grade.signals
    if o.infra_failure or "p95_ms" not in s or "p95_budget_ms" not in s:
        return 0.0
    return _within(s["p95_ms"], s["p95_budget_ms"]) * _answered(s)


@register_reward("memory@v1")
def memory_v1(o: EpisodeOutcome, cfg: RewardConfig) -> float:
    """A stack's RSS growth over the load against its budget (1.0 within it, 0.0 at four times it), times the share
    of requests answered right; 0.0 without a stack.

    >>> memory_v1(EpisodeOutcome(grade=Grade(signals={"rss_growth_mb": 12.0, "rss_growth_budget_mb": 6.0,
    ...                                                "requests": 10.0})), RewardConfig())
    0.6666666666666667
    """
    s = o.grade.signals
    if o.infra_failure or "rss_growth_mb" not in s or "rss_growth_budget_mb" not in s:
        return 0.0
    return _within(s["rss_growth_mb"], s["rss_growth_budget_mb"]) * _answered(s)


INTERMEDIATE_DEFAULT_WEIGHT = 0.2
"""Weight of a per-turn term (``TURN_TERMS``) when ``ToolEnv(turn_rewards=True)`` and the reward weights do not
name it (no per-turn term is in the default weights: it is paid per turn, never in the final reward)."""


def _turn_total(o: EpisodeOutcome, cfg: RewardConfig) -> float:
    """Episode total of the env's per-turn term: share of the task's declared items credited (see
    ``sandgym.envs.turn_terms``); 0.0 when the task declares none.

    >>> _turn_total(EpisodeOutcome(intermediate_matched=3, intermediate_expected=4), RewardConfig())
    0.75
    """
    if o.infra_failure or o.intermediate_expected <= 0:
        return 0.0
    return min(o.intermediate_matched, o.intermediate_expected) / o.intermediate_expected


intermediate_v1 = register_reward("intermediate@v1")(_turn_total)
evidence_v1 = register_reward("evidence@v1")(_turn_total)
evidence_norepeat_v1 = register_reward("evidence_norepeat@v1")(_turn_total)
"""``evidence_norepeat@v1``'s episode total is the share of evidence lines found, as ``evidence@v1``'s: the cost of
repeated calls is charged in the per-turn credits (``info["turn_reward"]``, negative on a turn that only repeats)
and is not in this total, which stays in [0, 1]."""


def compute_rewards(outcome: EpisodeOutcome, config: RewardConfig | None = None) -> tuple[float, dict[str, float]]:
    """(weighted score, every weighted reward's value by ``name@vN``). Infra failures score 0."""
    config = config or RewardConfig()
    components = {name: float(REWARDS[name](outcome, config)) for name in config.weights}
    if outcome.infra_failure:
        return 0.0, components
    total = sum(config.weights[name] * value for name, value in components.items())
    return float(total), components


def _check_turn_cases(path: Path, data: Mapping[str, Any], terms: Mapping[str, TurnTermSpec],
                      covered: set[str]) -> list[str]:
    """Golden cases of per-turn terms: ``"turn_cases": {name: [{"metadata", "turns", "expected", "files"?}, ...]}``."""
    problems: list[str] = []
    for name, cases in (data.get("turn_cases") or {}).items():
        covered.add(name)
        if name not in terms:
            problems.append(f"{name} in {path.name}: per-turn term is not registered")
            continue
        for i, case in enumerate(cases):
            got = run_turns(terms[name].credit, case["turns"], case["metadata"], case.get("files"))
            want = [float(x) for x in case["expected"]]
            if len(got) != len(want) or not all(
                math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-9) for g, w in zip(got, want, strict=False)
            ):
                problems.append(
                    f"{name} (per-turn) changed on golden case {path.stem}[{i}]: expected {want!r}, got {got!r}; "
                    "register the new behaviour as a new version instead of editing this one"
                )
    return problems


def _load_case(path: Path) -> tuple[EpisodeOutcome, RewardConfig, dict[str, float]]:
    data: dict[str, Any] = json.loads(path.read_text())
    outcome = EpisodeOutcome.from_dict(data["outcome"])
    config = RewardConfig(**data.get("config", {}))
    return outcome, config, {k: float(v) for k, v in data["expected"].items()}


def check_golden(directory: Path | None = None, rewards: Mapping[str, RewardFn] | None = None,
                 turn_terms: Mapping[str, TurnTermSpec] | None = None) -> list[str]:
    """Recompute every golden case; return one line per problem (empty list = all rewards unchanged).

    A problem is a reward whose value moved (name the reward, the case, old and new value), a golden case naming
    an unregistered reward, or a registered reward with no golden case at all. Per-turn terms (``TURN_TERMS``) are
    checked the same way from the cases' optional ``turn_cases``: one credit per turn of a scripted turn sequence.
    """
    directory = directory or GOLDEN_DIR
    rewards = REWARDS if rewards is None else rewards
    turn_terms = TURN_TERMS if turn_terms is None else turn_terms
    problems: list[str] = []
    covered: set[str] = set()
    turn_covered: set[str] = set()
    cases = sorted(directory.glob("*.json"))
    if not cases:
        return [f"no golden cases in {directory}; add JSON files with 'outcome' and 'expected'"]
    for path in cases:
        try:
            outcome, config, expected = _load_case(path)
            problems += _check_turn_cases(path, json.loads(path.read_text()), turn_terms, turn_covered)
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(f"{path.name}: cannot load ({exc})")
            continue
        for name, want in expected.items():
            covered.add(name)
            if name not in rewards:
                problems.append(f"{name} in {path.name}: reward is not registered")
                continue
            got = float(rewards[name](outcome, config))
            if not math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9):
                problems.append(
                    f"{name} changed on golden case {path.stem}: expected {want!r}, got {got!r}; "
                    "register the new behaviour as a new version instead of editing this one"
                )
    for name in sorted(set(rewards) - covered):
        problems.append(f"{name} has no golden case; add one to {directory}")
    for name in sorted(set(turn_terms) - turn_covered):
        problems.append(f"{name} (per-turn) has no golden turn case; add 'turn_cases' to a case in {directory}")
    return problems
