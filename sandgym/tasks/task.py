"""The typed task model: frozen data, no behaviour beyond validation of its own fields."""

from __future__ import annotations

import base64
import binascii
import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from sandgym.errors import TaskError

Split = Literal["train", "heldout"]
VerifierKind = Literal["tests", "match", "script", "host"]
Matcher = Literal["exact", "normalized", "number", "contains", "regex", "set"]
Isolation = Literal["process", "in-process"]
ISOLATIONS: tuple[str, ...] = ("process", "in-process")

SPLITS: tuple[str, ...] = ("train", "heldout")
VERIFIER_KINDS: tuple[str, ...] = ("tests", "match", "script", "host")
HOST_VERIFIER_NAME = re.compile(r"^[A-Za-z_][\w.\-/]*@v\d+$")
"""A host-side verifier's registered name: ``name@vN`` (``sandgym.envs.host_verifiers``)."""
MATCHERS: tuple[str, ...] = ("exact", "normalized", "number", "contains", "regex", "set")


@dataclass(frozen=True)
class Verifier:
    """How a task is decided.

    - ``tests``: hidden pytest files (``tests``) run against the workspace; ``expected_tests`` is the number of
      test cases the structured report must list (a short report counts the missing ones as failed).
      ``traps`` are extra hidden edge-case tests kept apart from the main ones.
    - ``match``: the submitted answer is compared with ``answer`` by ``matcher``.
    - ``script``: ``script`` (Python) runs in the sandbox with the answer in ``answer.txt`` and must print a JSON
      line ``{"score": float in [0, 1]}``.
    - ``host``: the host-side verifier registered as ``host`` (``name@vN``, ``sandgym.envs.host_verifiers``) scores
      the episode's final state (submitted answer, workspace files, the report of the hidden ``tests`` when there
      are any, runtime signals) on the host, where any Python library can be used. It reads data only: the
      agent's code never runs outside the sandbox. ``answer`` is passed to it as the answer key.
    """

    kind: VerifierKind
    tests: Mapping[str, str] = field(default_factory=dict)
    expected_tests: int = 0
    traps: Mapping[str, str] = field(default_factory=dict)
    expected_traps: int = 0
    answer: str | None = None
    matcher: Matcher = "normalized"
    script: str | None = None
    host: str | None = None
    """``kind="host"``: the registered host-side verifier's ``name@vN``."""
    isolation: Isolation = "process"
    """``process`` (default): the agent's modules run in a sandbox of their own and only plain data reaches the
    tests (always-equal objects, patched builtins and pytest tampering cannot score). ``in-process``: the tests
    import the agent's code into the grader's own process, for system tests that share environment variables,
    /tmp or sockets with the code under test; such tasks keep the in-process tampering limit (docs/SANDBOX.md)."""
    data: Mapping[str, str] = field(default_factory=dict)
    """Binary files the hidden tests read (ELF or image fixtures, compiled catalogues): path -> base64. They are
    hidden like ``tests`` and laid out beside them."""

    @property
    def hidden_files(self) -> dict[str, str | bytes]:
        """What a grading run gets: ``tests`` and the decoded ``data``."""
        return {**decode_data(self.data, "verifier.data"), **self.tests}

    def __post_init__(self) -> None:
        decode_data(self.data, "verifier.data")
        if self.isolation not in ISOLATIONS:
            raise TaskError(f"verifier.isolation={self.isolation!r} is not one of {ISOLATIONS}; use 'process' "
                            "unless the tests must share the solution's process")
        if self.kind not in VERIFIER_KINDS:
            raise TaskError(f"verifier.kind={self.kind!r} is not one of {VERIFIER_KINDS}; pick one of them")
        if self.kind == "tests" and (not self.tests or self.expected_tests <= 0):
            raise TaskError(
                "verifier.kind='tests' needs verifier.tests (file name -> pytest source) and "
                f"verifier.expected_tests > 0 (got {len(self.tests)} files, expected_tests={self.expected_tests})"
            )
        if self.kind == "match" and self.answer is None:
            raise TaskError("verifier.kind='match' needs verifier.answer; add the expected answer string")
        if self.kind == "match" and self.matcher not in MATCHERS:
            raise TaskError(f"verifier.matcher={self.matcher!r} is not one of {MATCHERS}")
        if self.kind == "script" and not self.script:
            raise TaskError("verifier.kind='script' needs verifier.script (Python printing {\"score\": x})")
        if self.kind == "host" and not HOST_VERIFIER_NAME.match(self.host or ""):
            raise TaskError(f"verifier.kind='host' needs verifier.host = a registered host-side verifier 'name@vN' "
                            f"(got {self.host!r}); `sandgym rewards list` shows the registered ones")
        if self.kind == "host" and self.tests and self.expected_tests <= 0:
            raise TaskError("verifier.kind='host' with hidden tests needs verifier.expected_tests > 0 (the number "
                            "of test cases the tests contain)")
        if self.host is not None and self.kind != "host":
            raise TaskError(f"verifier.host={self.host!r} is only read when verifier.kind='host' "
                            f"(kind is {self.kind!r}); set kind='host' or remove host")


LIMIT_BOUNDS: dict[str, tuple[float, float, str]] = {
    "max_turns": (1, 1000, "turns"),
    "exec_timeout_s": (0.1, 3600.0, "seconds"),
    "episode_timeout_s": (1.0, 7 * 24 * 3600.0, "seconds"),
    "max_observation_chars": (100, 10_000_000, "characters"),
}
"""Allowed range (inclusive) of each ``limits`` field: zero, negative, NaN and absurd values wreck episodes."""
DIFFICULTY_BOUNDS = (1, 100)


def limit_error(name: str, value: Any) -> tuple[str, str] | None:
    """(message, fix) when ``limits.<name>`` (or ``difficulty``) is out of range, else None (types checked elsewhere)."""
    lo: float
    hi: float
    if name == "difficulty":
        lo, hi, unit = DIFFICULTY_BOUNDS[0], DIFFICULTY_BOUNDS[1], "(1 = easiest)"
    elif name in LIMIT_BOUNDS:
        lo, hi, unit = LIMIT_BOUNDS[name]
    else:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or not lo <= value <= hi:
        fix = f"set it between {lo:g} and {hi:g} {unit}"
        if name in LIMIT_BOUNDS:
            fix += f", or leave it out for the default ({getattr(_default_limits(), name):g})"
        return f"{value!r} is out of range: must be a finite number between {lo:g} and {hi:g}", fix
    return None


@functools.cache
def _default_limits() -> TaskLimits:
    return TaskLimits()


def decode_data(data: Mapping[str, str], where: str) -> dict[str, bytes]:
    """Binary files stored as base64 text (``data_files``, ``verifier.data``) -> bytes; TaskError names a bad one."""
    out: dict[str, bytes] = {}
    for path, text in data.items():
        try:
            out[path] = base64.b64decode(text, validate=True)
        except (binascii.Error, TypeError, ValueError) as exc:
            raise TaskError(f"{where}[{path!r}] is not base64 ({exc}); store binary files as "
                            "base64.b64encode(data).decode()") from None
    return out


def encode_data(data: Mapping[str, bytes]) -> dict[str, str]:
    """``decode_data``'s inverse."""
    return {path: base64.b64encode(raw).decode("ascii") for path, raw in data.items()}


@dataclass(frozen=True)
class Reference:
    """A known-good solution: workspace files to write and/or a final answer to submit."""

    files: Mapping[str, str] = field(default_factory=dict)
    answer: str | None = None


@dataclass(frozen=True)
class TaskLimits:
    """Per-task budgets (the environment may tighten but never loosen them)."""

    max_turns: int = 8
    exec_timeout_s: float = 10.0
    episode_timeout_s: float = 300.0
    max_observation_chars: int = 8000

    def __post_init__(self) -> None:
        for name in type(self).__dataclass_fields__:
            bad = limit_error(name, getattr(self, name))
            if bad is not None:
                raise TaskError(f"limits.{name}={getattr(self, name)!r}: {bad[0]} (fix: {bad[1]})")


def requirement_error(req: str) -> str | None:
    """Why ``req`` is not one plain pip requirement specifier (None when it is)."""
    if not req.strip():
        return "is empty; remove it"
    if "\n" in req or "\r" in req:
        return "spans lines; give one requirement per list item"
    if req.lstrip().startswith("-"):
        return "is a pip option; give package specifiers only (a wheelhouse is set with SANDGYM_WHEELHOUSE)"
    return None


VISIBLE_NOTE = "Visible tests are in the workspace (run_tests runs them)."
"""The sentence a task's prompt ends with when it ships visible tests (every family and importer says it alike)."""


@dataclass(frozen=True)
class Task:
    """One task instance: what the agent is told, the workspace it starts in, and how it is decided."""

    id: str
    domain: str
    family: str
    split: Split
    prompt: str
    verifier: Verifier
    files: Mapping[str, str] = field(default_factory=dict)
    visible_tests: Mapping[str, str] = field(default_factory=dict)
    reference: Reference | None = None
    limits: TaskLimits = field(default_factory=TaskLimits)
    difficulty: int = 1
    unseen: bool = False
    """Family held out of training by default, so evaluation can measure transfer."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    requirements: tuple[str, ...] = ()
    """Python packages (pip requirement specifiers, e.g. ``"attrs>=23"``) that the agent's code and the tests
    need: built once on the host into a cached environment and mounted read-only first on the sandbox's Python
    path (``sandgym.sandbox.pyenv``). They come from the task author, never from the agent."""
    data_files: Mapping[str, str] = field(default_factory=dict)
    """Binary workspace files (compiled locale catalogues, images): path -> base64, written with ``files``."""

    @property
    def workspace_files(self) -> dict[str, str | bytes]:
        """The starting workspace: ``files`` and the decoded ``data_files``."""
        return {**decode_data(self.data_files, f"task {self.id}: data_files"), **self.files}

    def __post_init__(self) -> None:
        if not self.id:
            raise TaskError("task.id is empty; give every task a unique id")
        decode_data(self.data_files, f"task {self.id}: data_files")
        if isinstance(self.requirements, str) or not all(isinstance(r, str) for r in self.requirements):
            raise TaskError(f"task {self.id}: requirements={self.requirements!r} must be a list of strings "
                            "such as ['attrs>=23']")
        object.__setattr__(self, "requirements", tuple(self.requirements))
        for req in self.requirements:
            why = requirement_error(req)
            if why:
                raise TaskError(f"task {self.id}: requirement {req!r}: {why}")
        if self.split not in SPLITS:
            raise TaskError(f"task {self.id}: split={self.split!r} is not one of {SPLITS}")
        if not self.prompt.strip():
            raise TaskError(f"task {self.id}: prompt is empty; say what the agent must do")
        bad = limit_error("difficulty", self.difficulty)
        if bad is not None:
            raise TaskError(f"task {self.id}: difficulty={self.difficulty!r}: {bad[0]} (fix: {bad[1]})")


def build_task(data: Mapping[str, Any]) -> Task:
    """A Task from a parsed record whose schema was checked (``tasks.validate.check_record``): the nested
    ``verifier``, ``reference`` and ``limits`` objects become their dataclasses."""
    fields = dict(data)
    fields["verifier"] = Verifier(**dict(fields["verifier"]))
    if fields.get("reference") is not None:
        fields["reference"] = Reference(**dict(fields["reference"]))
    if fields.get("limits") is not None:
        fields["limits"] = TaskLimits(**dict(fields["limits"]))
    else:
        fields.pop("limits", None)
    return Task(**fields)
