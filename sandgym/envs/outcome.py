"""``EpisodeOutcome``: everything rewards and failure-mode reports need to know about a finished episode."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

__all__ = ["EpisodeOutcome", "FailureMode", "FAILURE_MODES", "classify_failure"]

FailureMode = Literal[
    "success", "malformed_tool_call", "tool_error", "runtime_exception", "timeout", "memory", "wrong_answer",
    "budget", "infra", "task_error",
]
FAILURE_MODES: tuple[str, ...] = (
    "success", "malformed_tool_call", "tool_error", "runtime_exception", "timeout", "memory", "wrong_answer",
    "budget", "infra", "task_error",
)


@dataclass(frozen=True)
class EpisodeOutcome:
    """The graded result of one episode, plus counts of how the agent got there (JSON round-trips)."""

    task_id: str = ""
    domain: str = ""
    family: str = ""
    verifier_kind: str = "tests"
    tests_passed: int = 0
    tests_expected: int = 0
    traps_passed: int = 0
    traps_expected: int = 0
    answer_matched: bool | None = None
    script_score: float | None = None
    grader_exceptions: int = 0
    """Hidden tests that errored or a grader run that crashed without a report."""
    malformed_calls: int = 0
    unknown_tools: int = 0
    bad_args: int = 0
    no_call_turns: int = 0
    tool_calls: int = 0
    """Valid JSON tool calls that ran."""
    code_actions: int = 0
    """Fenced code blocks accepted as actions (counted apart from JSON tool calls)."""
    tool_errors: int = 0
    exceptions: int = 0
    timeouts: int = 0
    ooms: int = 0
    sandbox_wall_s: float = 0.0
    turns: int = 0
    submitted: bool = False
    truncation: str | None = None
    """``max_turns``, ``observation_budget`` or ``wall_time`` when a budget ran out, else None."""
    infra_failure: bool = False
    task_error: bool = False
    """The task's own verifier failed to run (a hidden test or check script that cannot import a library, or has
    a syntax error): never the agent's fault. Also an ``infra_failure``, so it is excluded from scoring the same
    way, but counted apart (failure mode ``task_error``)."""
    failure_mode: str = "wrong_answer"
    signals: dict[str, float] = field(default_factory=dict)
    """Runtime signals of tasks that declare them (e.g. ``latency``, ``lost``, ``duplicated``, ``log_errors`` of
    ``coding/service_queue``): the share of each signal's hidden tests that passed."""
    intermediate_matched: int = 0
    """Checkpoints (checkable intermediate states) the agent stated correctly, first claim per checkpoint; counted
    only by ``ToolEnv(turn_rewards=True)`` (see ``sandgym.envs.intermediate``)."""
    intermediate_expected: int = 0
    """Checkpoints the task declares (0 when it declares none or per-turn terms are off)."""

    @property
    def format_errors(self) -> int:
        return self.malformed_calls + self.unknown_tools + self.bad_args + self.no_call_turns

    @property
    def solved(self) -> bool:
        """Fully solved: every main hidden test passed, the answer matched, or the script gave 1.0.

        Traps are not part of it: they are a separate stability signal (``traps_passed``, reward ``traps@v1``).
        """
        if self.infra_failure:
            return False
        if self.verifier_kind == "tests":
            return self.tests_expected > 0 and self.tests_passed >= self.tests_expected
        if self.verifier_kind == "match":
            return bool(self.answer_matched)
        return self.script_score is not None and self.script_score >= 1.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EpisodeOutcome:
        """Inverse of ``to_dict``; unknown keys are an error naming them (typos must not pass silently)."""
        known = {f.name for f in fields(cls)}
        extra = sorted(set(data) - known)
        if extra:
            raise ValueError(f"EpisodeOutcome has no field(s) {extra}; known fields: {sorted(known)}")
        return cls(**data)


def classify_failure(o: EpisodeOutcome) -> FailureMode:
    """The one failure mode that best explains an episode, checked in this order:

    task_error > infra > success > memory > timeout > malformed_tool_call (format errors outnumber valid calls) >
    runtime_exception > budget (ran out without submitting) > tool_error (half the calls failed) > wrong_answer.
    """
    if o.task_error:
        return "task_error"
    if o.infra_failure:
        return "infra"
    if o.solved:
        return "success"
    if o.ooms:
        return "memory"
    if o.timeouts:
        return "timeout"
    if o.format_errors and o.format_errors >= o.tool_calls + o.code_actions:
        return "malformed_tool_call"
    if o.exceptions or o.grader_exceptions:
        return "runtime_exception"
    if o.truncation and not o.submitted:
        return "budget"
    if o.tool_errors and 2 * o.tool_errors >= o.tool_calls + o.code_actions:
        return "tool_error"
    return "wrong_answer"
