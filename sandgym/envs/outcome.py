"""``EpisodeOutcome``: the one typed result of a finished episode, produced once by the env (``ToolEnv._finish``).

It nests what the verifier found (``Grade``), how the agent acted (``Actions``) and what the sandbox measured
(``SandboxRuntime``). Whether the episode succeeded and its failure mode are decided here, by
``EpisodeOutcome.success`` and ``EpisodeOutcome.failure_mode``, from those parts alone; the rollout engine, the
trainer, the evaluator and the rewards read them and never decide again. ``to_dict``/``from_dict`` round-trip it
through JSON (``from_dict`` also reads the flat format written before the outcome was nested).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, TypeVar

__all__ = [
    "Actions",
    "EpisodeOutcome",
    "FAILURE_MODES",
    "FailureMode",
    "Grade",
    "SandboxRuntime",
]

FailureMode = Literal[
    "success", "malformed_tool_call", "tool_error", "runtime_exception", "timeout", "memory", "wrong_answer",
    "budget", "infra", "task_error",
]
FAILURE_MODES: tuple[str, ...] = (
    "success", "malformed_tool_call", "tool_error", "runtime_exception", "timeout", "memory", "wrong_answer",
    "budget", "infra", "task_error",
)


@dataclass(frozen=True)
class Grade:
    """What the task's verifier found (``sandgym.envs.grading.grade``)."""

    kind: str = "tests"
    """The verifier's kind: ``tests``, ``match`` or ``script``."""
    tests_passed: int = 0
    tests_expected: int = 0
    traps_passed: int = 0
    traps_expected: int = 0
    answer_matched: bool | None = None
    script_score: float | None = None
    """The check script's score, or a host-side verifier's (``kind="host"``), in [0, 1]."""
    grader_exceptions: int = 0
    """Hidden tests that errored or a grader run that crashed without a report."""
    wall_s: float = 0.0
    signals: dict[str, float] = field(default_factory=dict)
    """Runtime signals of tasks that declare them (e.g. ``latency``, ``lost``, ``duplicated``, ``log_errors`` of
    ``coding/service_queue``): the share of each signal's hidden tests that passed."""
    components: dict[str, float] = field(default_factory=dict)
    """A host-side verifier's named components (``kind="host"``; its score is ``script_score``)."""
    task_error: str = ""
    """Why the task's own verifier could not run (empty when it ran): a hidden test or check script that cannot
    import a library or has a syntax error. Never the agent's fault: the episode is not the agent's to score."""

    @property
    def solved(self) -> bool:
        """The verifier's verdict: every main hidden test passed, the answer matched, or the script gave 1.0.

        Traps are not part of it: they are a separate stability signal (``traps_passed``, reward ``traps@v1``).
        """
        if self.kind == "tests":
            return self.tests_expected > 0 and self.tests_passed >= self.tests_expected
        if self.kind == "match":
            return bool(self.answer_matched)
        return self.script_score is not None and self.script_score >= 1.0


@dataclass(frozen=True)
class Actions:
    """How the agent acted, counted by the env turn by turn."""

    turns: int = 0
    submitted: bool = False
    tool_calls: int = 0
    """Valid JSON tool calls that ran."""
    code_actions: int = 0
    """Fenced code blocks accepted as actions (counted apart from JSON tool calls)."""
    tool_errors: int = 0
    malformed_calls: int = 0
    unknown_tools: int = 0
    bad_args: int = 0
    no_call_turns: int = 0
    test_runs: int = 0
    """Runs of the visible tests (``run_tests``, or a code block in ``code_action="test"``)."""
    first_test_passed: bool | None = None
    """Did every visible test pass on the first run after the agent changed the workspace (None: no such run)."""
    last_test_passed: bool | None = None
    """Did every visible test pass on the last run (None: the tests were never run)."""
    tested_before_submit: bool = False
    """The agent submitted code that it had run the visible tests on (no change to the workspace since)."""
    evidence_declared: int = 0
    """Evidence lines the task declares (``metadata["evidence"]``; 0 for tasks without a document)."""
    evidence_found: int = 0
    """Of those, the lines a narrow search showed, by ``evidence@v1``'s rules (counted whether or not the term is
    paid; ``sandgym.envs.evidence``)."""
    repeated_calls: int = 0
    """Tool calls that repeated one already run in the episode: the same tool, arguments and output, so they showed
    nothing new (``sandgym.envs.turn_terms.repeated_calls``; counted on every task, whether or not a term charges
    them)."""

    @property
    def format_errors(self) -> int:
        return self.malformed_calls + self.unknown_tools + self.bad_args + self.no_call_turns


@dataclass(frozen=True)
class SandboxRuntime:
    """What the sandbox measured over the episode (a frozen snapshot of ``context.RuntimeStats``)."""

    exec_calls: int = 0
    exceptions: int = 0
    timeouts: int = 0
    ooms: int = 0
    sandbox_wall_s: float = 0.0
    sandbox_cpu_s: float = 0.0
    peak_rss_mb: float = 0.0


@dataclass(frozen=True)
class EpisodeOutcome:
    """The graded result of one episode: ``grade``, ``actions``, ``runtime``, how it ended, and its verdict."""

    task_id: str = ""
    domain: str = ""
    family: str = ""
    grade: Grade = field(default_factory=Grade)
    actions: Actions = field(default_factory=Actions)
    runtime: SandboxRuntime = field(default_factory=SandboxRuntime)
    truncation: str | None = None
    """``max_turns``, ``observation_budget``, ``wall_time`` when a budget ran out, ``infra``, else None."""
    infra_failure: bool = False
    """The sandbox or the harness failed (or the task's verifier did: ``task_error``): excluded from scoring."""
    intermediate_matched: int = 0
    """Items of the env's per-turn term the agent earned (``intermediate@v1``: checkpoints stated correctly, first
    claim each; ``evidence@v1`` and ``evidence_norepeat@v1``: evidence lines its searches showed; the latter's
    charges for repeated calls are in the per-turn rewards only, see ``Actions.repeated_calls``); counted only by ``ToolEnv(turn_rewards=True)``
    (see ``sandgym.envs.turn_terms``)."""
    intermediate_expected: int = 0
    """Items the task declares for that term (0 when it declares none or per-turn terms are off)."""

    # ---- the verdict: decided here, read everywhere else --------------------------------------------------------
    @property
    def task_error(self) -> bool:
        """The task's own verifier failed to run (``grade.task_error`` says why)."""
        return bool(self.grade.task_error)

    @property
    def success(self) -> bool:
        """Solved (``grade.solved``) by an episode that counts: no infra failure, no task error."""
        return not self.task_error and not self.infra_failure and self.grade.solved

    @property
    def failure_mode(self) -> FailureMode:
        """The one failure mode that best explains the episode, checked in this order:

        task_error > infra > success > memory > timeout > malformed_tool_call (format errors outnumber valid
        calls) > runtime_exception > budget (ran out without submitting) > tool_error (half the calls failed) >
        wrong_answer. A task error is also an infra failure (excluded from scores) but keeps its own mode.
        """
        a, r = self.actions, self.runtime
        if self.task_error:
            return "task_error"
        if self.infra_failure:
            return "infra"
        if self.success:
            return "success"
        if r.ooms:
            return "memory"
        if r.timeouts:
            return "timeout"
        if a.format_errors and a.format_errors >= a.tool_calls + a.code_actions:
            return "malformed_tool_call"
        if r.exceptions or self.grade.grader_exceptions:
            return "runtime_exception"
        if self.truncation and not a.submitted:
            return "budget"
        if a.tool_errors and 2 * a.tool_errors >= a.tool_calls + a.code_actions:
            return "tool_error"
        return "wrong_answer"

    # ---- JSON ----------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Nested JSON-ready dict; ``success`` and ``failure_mode`` are included for readers (and checked on load)."""
        return {**asdict(self), "success": self.success, "failure_mode": self.failure_mode}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EpisodeOutcome:
        """Inverse of ``to_dict``. Unknown keys are an error naming them (typos must not pass silently), and so is
        a stored ``success``/``failure_mode`` that this outcome does not give. A flat outcome (the format before
        ``grade``/``actions``/``runtime`` were nested, e.g. in an older run's trajectories.jsonl) is converted."""
        data = dict(data)
        if "grade" not in data and any(k in data for k in _FLAT_GRADE | _FLAT_ACTIONS | _FLAT_RUNTIME):
            data = _unflatten(data)
        stored = {k: data.pop(k) for k in ("success", "failure_mode") if k in data}
        parts = {"grade": Grade, "actions": Actions, "runtime": SandboxRuntime}
        kwargs = {k: _build(parts[k], v, f"EpisodeOutcome.{k}") if k in parts else v for k, v in data.items()}
        outcome = _build(cls, kwargs, "EpisodeOutcome")
        decided = {"success": outcome.success, "failure_mode": outcome.failure_mode}
        wrong = {k: v for k, v in stored.items() if v != decided[k]}
        if wrong:
            raise ValueError(f"EpisodeOutcome stored {wrong} but its grade, actions and runtime give "
                             f"{ {k: decided[k] for k in wrong} }; the stored verdict does not match the outcome")
        return outcome


_T = TypeVar("_T")


def _build(cls: type[_T], data: Any, where: str) -> _T:
    if not isinstance(data, dict):
        raise ValueError(f"{where} must be a JSON object, got {type(data).__name__}")
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    extra = sorted(set(data) - known)
    if extra:
        raise ValueError(f"{where} has no field(s) {extra}; known fields: {sorted(known)}")
    return cls(**data)


_FLAT_GRADE = {"verifier_kind", "tests_passed", "tests_expected", "traps_passed", "traps_expected", "answer_matched",
               "script_score", "grader_exceptions", "signals", "task_error"}
_FLAT_ACTIONS = {f.name for f in fields(Actions)}
_FLAT_RUNTIME = {"exceptions", "timeouts", "ooms", "sandbox_wall_s"}


def _unflatten(flat: dict[str, Any]) -> dict[str, Any]:
    """The nested form of a flat outcome (the format before nesting: all fields on one level)."""
    flat = dict(flat)
    grade = {k: flat.pop(k) for k in sorted(_FLAT_GRADE) if k in flat}
    if "verifier_kind" in grade:
        grade["kind"] = grade.pop("verifier_kind")
    if "task_error" in grade:  # a bool then; the reason was only in the env's info["error"]
        grade["task_error"] = "the task's verifier failed (reason not recorded)" if grade["task_error"] else ""
    actions = {k: flat.pop(k) for k in sorted(_FLAT_ACTIONS) if k in flat}
    runtime = {k: flat.pop(k) for k in sorted(_FLAT_RUNTIME) if k in flat}
    return {**flat, "grade": grade, "actions": actions, "runtime": runtime}
