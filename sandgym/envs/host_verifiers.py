"""Host-side verifiers: versioned ``name@vN`` callables that score an episode's final state on the host.

The two kinds of verifier (docs/ENVIRONMENTS.md, "Two kinds of verifiers"):

- **in-sandbox** (``Verifier(kind="tests" | "match" | "script")``): hidden tests or a check script run inside the
  sandbox, next to the agent's code, with the standard library and pytest only;
- **host-side** (``Verifier(kind="host", host="name@vN")``): a function registered here receives a
  ``FinalState`` (the submitted answer, the workspace's text files, the hidden tests' report when the task has
  tests, the agent's actions and the sandbox's runtime signals) and returns a ``VerifierScore`` (score in [0, 1]
  with named components). It runs in the harness process, so it may use any library installed there. It only
  reads data: the agent's code never runs on the host (tests that run it still run in the sandbox, first).

Like the built-in rewards, a host-side verifier is versioned (change its scores = register ``name@v2``) and has
golden cases (``register_verifier(name, golden=DIR)``: JSON files ``{"verifier", "state", "expected"}``) that
``sandgym rewards check`` recomputes. Third-party packages register theirs through the ``sandgym.verifiers``
entry-point group (the entry point loads a module that registers on import, or a callable that registers when
called with no arguments); they are loaded the first time an unknown name is looked up, and by
``sandgym rewards check|list``.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

from sandgym.envs.outcome import Actions, SandboxRuntime
from sandgym.errors import ConfigError
from sandgym.sandbox.protocol import TestOutcome, TestReport
from sandgym.tasks.task import HOST_VERIFIER_NAME

__all__ = [
    "ENTRY_POINT_GROUP",
    "FinalState",
    "HOST_VERIFIERS",
    "HostVerifier",
    "VerifierScore",
    "check_host_golden",
    "get_verifier",
    "load_verifier_plugins",
    "register_verifier",
    "score_state",
]

ENTRY_POINT_GROUP = "sandgym.verifiers"


@dataclass(frozen=True)
class FinalState:
    """What a host-side verifier sees of a finished episode: data only, never anything to execute."""

    task_id: str = ""
    domain: str = ""
    family: str = ""
    answer_key: str | None = None
    """The task's ``verifier.answer`` (None when it has none)."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """The task's metadata (where a suite keeps what its verifier needs: expected values, tolerances)."""
    submitted: str | None = None
    """The answer the agent submitted (None: it never submitted)."""
    files: Mapping[str, str] = field(default_factory=dict)
    """The workspace's text files after the agent's last turn (path -> text, UTF-8 with replacement)."""
    tests: TestReport | None = None
    """The hidden tests' structured report when the task has ``verifier.tests`` (run in the sandbox first)."""
    actions: Actions = field(default_factory=Actions)
    runtime: SandboxRuntime = field(default_factory=SandboxRuntime)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (golden cases); the tests' ``exec`` result is not kept."""
        tests = None if self.tests is None else {
            "expected": self.tests.expected, "report_found": self.tests.report_found,
            "outcomes": [{"name": o.name, "outcome": o.outcome, "message": o.message} for o in self.tests.outcomes]}
        return {"task_id": self.task_id, "domain": self.domain, "family": self.family, "answer_key": self.answer_key,
                "metadata": dict(self.metadata), "submitted": self.submitted, "files": dict(self.files),
                "tests": tests, "actions": vars(self.actions).copy(), "runtime": vars(self.runtime).copy()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FinalState:
        """Inverse of ``to_dict``; unknown keys are an error naming them."""
        data = dict(data)
        extra = sorted(set(data) - set(cls.__dataclass_fields__))
        if extra:
            raise ValueError(f"FinalState has no field(s) {extra}; known: {sorted(cls.__dataclass_fields__)}")
        tests = data.get("tests")
        if tests is not None:
            data["tests"] = TestReport(expected=int(tests["expected"]), report_found=bool(tests.get("report_found")),
                                       outcomes=tuple(TestOutcome(**o) for o in tests.get("outcomes", ())))
        data["actions"] = Actions(**data.get("actions", {}))
        data["runtime"] = SandboxRuntime(**data.get("runtime", {}))
        return cls(**data)


@dataclass(frozen=True)
class VerifierScore:
    """A host-side verifier's result: ``score`` in [0, 1] (the episode's ``correctness``; 1.0 = solved) and named
    components in [0, 1] (reported as metrics, ``info["reward_components"]["<verifier>/<name>"]``)."""

    score: float
    components: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        values = {"score": self.score, **{f"components[{k!r}]": v for k, v in self.components.items()}}
        for key, value in values.items():
            if not isinstance(value, (int, float)) or not math.isfinite(value) or not 0.0 <= value <= 1.0:
                raise ValueError(f"VerifierScore {key}={value!r} must be a finite number in [0, 1]; clip or "
                                 "normalise it in the verifier")
        object.__setattr__(self, "score", float(self.score))
        object.__setattr__(self, "components", MappingProxyType({str(k): float(v)
                                                                for k, v in self.components.items()}))


HostVerifierFn = Callable[[FinalState], "VerifierScore | float"]


@dataclass(frozen=True)
class HostVerifier:
    """A registered host-side verifier: its ``name@vN``, the function, and the directory of its golden cases."""

    name: str
    fn: HostVerifierFn
    golden: Path | None = None


HOST_VERIFIERS: dict[str, HostVerifier] = {}


def register_verifier(name: str, *, golden: str | Path | None = None) -> Callable[[HostVerifierFn], HostVerifierFn]:
    """Register ``fn`` as the host-side verifier ``name@vN`` (once: bump the version to change what it returns).

    ``golden``: a directory of golden cases (``{"verifier": name, "state": FinalState.to_dict(), "expected":
    {"score": x, "components": {...}}}``) that ``sandgym rewards check`` recomputes.
    """
    if not HOST_VERIFIER_NAME.match(name):
        raise ValueError(f"host verifier name {name!r} must look like 'name@vN', e.g. 'mypkg.answer@v1'")

    def deco(fn: HostVerifierFn) -> HostVerifierFn:
        if name in HOST_VERIFIERS and HOST_VERIFIERS[name].fn is not fn:
            raise ValueError(f"host verifier {name!r} is already registered; register the change as a new version")
        HOST_VERIFIERS[name] = HostVerifier(name, fn, Path(golden) if golden is not None else None)
        return fn

    return deco


_loaded_plugins: list[str] = []


def load_verifier_plugins() -> list[str]:
    """Load the ``sandgym.verifiers`` entry points (once); a broken one gives a warning. Returns their names."""
    if _loaded_plugins:
        return list(_loaded_plugins)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
            if callable(obj) and not isinstance(obj, ModuleType):
                obj()
        except Exception as exc:  # a broken plugin must not break sandgym
            warnings.warn(f"sandgym.verifiers entry point {ep.name!r} ({ep.value}) failed to load: {exc}",
                          stacklevel=2)
            continue
        _loaded_plugins.append(ep.name)
    _loaded_plugins.append("")  # marks "done" even when no plugin is installed
    return [n for n in _loaded_plugins if n]


def get_verifier(name: str) -> HostVerifier:
    """The registered verifier ``name@vN`` (plugins are loaded on a miss); ConfigError naming the registered ones."""
    if name not in HOST_VERIFIERS:
        load_verifier_plugins()
    if name not in HOST_VERIFIERS:
        raise ConfigError(f"unknown host-side verifier {name!r}; registered: {sorted(HOST_VERIFIERS) or 'none'}. "
                          f"Install the package that registers it (entry-point group {ENTRY_POINT_GROUP!r}) or "
                          "fix verifier.host")
    return HOST_VERIFIERS[name]


def score_state(name: str, state: FinalState) -> VerifierScore:
    """Run the verifier ``name`` on ``state``; a bare float result becomes a score without components."""
    result = get_verifier(name).fn(state)
    if isinstance(result, VerifierScore):
        return result
    if isinstance(result, (int, float)) and not isinstance(result, bool):
        return VerifierScore(float(result))
    raise TypeError(f"host verifier {name!r} returned {type(result).__name__}; return a VerifierScore or a float")


def _check_case(path: Path, verifier: HostVerifier) -> list[str]:
    data = json.loads(path.read_text())
    want = data["expected"]
    got = score_state(verifier.name, FinalState.from_dict(data["state"]))
    want_components = {k: float(v) for k, v in (want.get("components") or {}).items()}
    same = math.isclose(got.score, float(want["score"]), abs_tol=1e-9) and set(got.components) == set(
        want_components) and all(math.isclose(got.components[k], v, abs_tol=1e-9) for k, v in want_components.items())
    if same:
        return []
    return [f"{verifier.name} changed on golden case {path.stem}: expected score {want['score']!r} and components "
            f"{want_components}, got {got.score!r} and {dict(got.components)}; register the new behaviour as a new "
            "version instead of editing this one"]


def check_host_golden(verifiers: Mapping[str, HostVerifier] | None = None) -> tuple[list[str], int]:
    """Recompute every registered host-side verifier's golden cases: (one line per problem, cases checked).

    A problem is a verifier whose score or components moved, one registered without golden cases (or whose
    directory has none for it), or a case that cannot be loaded or raises.
    """
    if verifiers is None:
        load_verifier_plugins()
        verifiers = HOST_VERIFIERS
    problems: list[str] = []
    n = 0
    for name, verifier in sorted(verifiers.items()):
        if verifier.golden is None:
            problems.append(f"{name} has no golden cases; pass golden=DIR to register_verifier")
            continue
        cases = []
        for path in sorted(verifier.golden.glob("*.json")):
            try:
                if json.loads(path.read_text()).get("verifier") == name:
                    cases.append(path)
            except (ValueError, OSError) as exc:
                problems.append(f"{path}: cannot load ({exc})")
        if not cases:
            problems.append(f"{name} has no golden case in {verifier.golden}; add a JSON file with "
                            f"'verifier': {name!r}, 'state' and 'expected'")
        for path in cases:
            n += 1
            try:
                problems += _check_case(path, verifier)
            except Exception as exc:  # a broken case or verifier is a problem to report, not a crash
                problems.append(f"{name} on golden case {path.stem}: {type(exc).__name__}: {exc}")
    return problems, n
