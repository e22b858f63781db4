"""``sandgym tasks from-repo``: turn a local Python repository with a pytest suite into verified coding tasks.

Flow: snapshot the repo (small, text only, scrubbed) -> run its tests once in the sandbox (baseline) -> for each
function or method the tests mention, make a re-implement task (body removed) and/or a bug-fix task (one small
mutation) -> keep only the baseline-passing tests that now fail as the hidden tests -> check in the sandbox that
they fail on the starting state and pass on the reference -> split by source file -> write ``tasks.jsonl`` and
``from_repo_report.json``. Every discarded candidate is counted by reason.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandgym.errors import ConfigError, SandboxError, TaskError
from sandgym.private.rungs import LADDER, PREFIX_CUTS, RUNGS, TURNS, complete_prompt, find_prompt, fix_prompt
from sandgym.private.scrub import Scrubber, ScrubReport
from sandgym.private.snapshot import (
    DEFAULT_MAX_DATA_BYTES,
    DEFAULT_MAX_FILE_BYTES,
    Snapshot,
    keys_with_imports,
    read_repo,
    select_tests,
    test_key,
    with_imported_tests,
)
from sandgym.sandbox.factory import make_sandbox
from sandgym.sandbox.protocol import Limits, Sandbox, TestReport
from sandgym.tasks.definitions import DefinitionError
from sandgym.tasks.load import save_jsonl
from sandgym.tasks.mutations import Mutation, Target, bug_mutations, find_targets, remove_body
from sandgym.tasks.suites.long_context import CHARS_PER_TOKEN
from sandgym.tasks.task import Isolation, Reference, Task, TaskLimits, Verifier, encode_data

log = logging.getLogger(__name__)

KINDS: tuple[str, ...] = LADDER
"""Easiest first (``sandgym.private.rungs``): ``complete`` (the module around a definition in the prompt, its body
cut out; one code block), ``fix`` (the definition with one small bug and the failing test run in the prompt; code
blocks, each tested), ``reimplement`` (a body removed; the prompt names the function), ``bugfix`` (one small
mutation; the prompt names the file and the failing tests), ``locate`` (one small mutation; the prompt is a bug
report: a failing test's name and what it printed, never the file or the function: the agent searches the whole
repository). The last three are multi-turn tool use over the whole workspace."""
DEFAULT_KINDS: tuple[str, ...] = ("reimplement", "bugfix")
REPORT_NAME = "from_repo_report.json"
TASKS_NAME = "tasks.jsonl"


@dataclass(frozen=True)
class FromRepoConfig:
    """What ``sandgym tasks from-repo`` does."""

    repo: str
    """Root of a local Python repository with a pytest suite."""
    out: str
    """Output folder: ``tasks.jsonl`` and ``from_repo_report.json`` are written there."""
    kinds: tuple[str, ...] = DEFAULT_KINDS
    """Task kinds to make (``KINDS``): ``reimplement`` (body removed), ``bugfix`` (one small mutation, the file
    named), ``locate`` (one small mutation, found from a bug report across the whole repository)."""
    max_tasks: int | None = None
    """Stop after this many verified tasks (None: every candidate)."""
    heldout_fraction: float = 0.3
    """Share of source files whose tasks go to the heldout split (whole files, never mixed)."""
    seed: int = 0
    name: str | None = None
    """Suite name used in task ids (default: the repository folder's name)."""
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    """Cap per data file (a file in a package or under a test folder that is not Python source) that no source
    names; Python source and the data files it names are kept whatever their size (``snapshot.py``)."""
    max_data_bytes: int = DEFAULT_MAX_DATA_BYTES
    """Cap on all the snapshot's data files together (smallest kept first; the rest listed as skipped)."""
    exclude_tests: tuple[str, ...] = ()
    """Glob patterns of test files to leave out (e.g. a suite of 50k parametrised cases too slow to re-run per
    candidate); they are listed in the report's skipped files."""
    scrub: bool = True
    """Remove secrets from every file and prompt (see ``sandgym.private.scrub``)."""
    scrub_patterns: Mapping[str, str] = field(default_factory=dict)
    """Extra kind -> regex patterns to scrub."""
    max_mutation_tries: int = 3
    """Bug-fix mutations tried per function before giving up on it (each try is one sandbox test run)."""
    timeout_s: float = 120.0
    """Limit of the baseline test run; later runs get 3x the baseline time plus 10 s."""
    backend: str = "local"
    requirements: tuple[str, ...] = ()
    """Packages the project and its tests import (pip specifiers; e.g. ``hypothesis`` or ``.[test]`` deps
    spelled out): every sandbox run and every task gets them (``Task.requirements``, a cached environment)."""
    allow_in_process: bool = False
    """Keep candidates whose every deciding test needs the project's code in the test's own process, graded
    in-process (``Verifier.isolation = "in-process"``). Off by default: there an agent's code can forge its reward
    (always-equal objects, a patched pytest: ``sandgym rewards audit`` shows it), so they are discarded as
    ``needs_in_process``."""

    def __post_init__(self) -> None:
        bad = [k for k in self.kinds if k not in KINDS]
        if bad or not self.kinds:
            raise ConfigError(f"kinds={list(self.kinds)!r}: each must be one of {KINDS}, e.g. --kinds reimplement,bugfix "
                              "or --kinds locate")
        if not 0.0 <= self.heldout_fraction < 1.0:
            raise ConfigError(f"heldout_fraction={self.heldout_fraction} must be in [0, 1), e.g. 0.3")
        if self.max_tasks is not None and self.max_tasks <= 0:
            raise ConfigError(f"max_tasks={self.max_tasks} must be a positive integer (or omitted for all)")

    @property
    def suite_name(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]", "_", self.name or Path(self.repo).resolve().name)


@dataclass(frozen=True)
class Discard:
    """A candidate that did not become a task, and why."""

    candidate: str
    reason: str
    detail: str = ""


@dataclass(frozen=True)
class FromRepoResult:
    """The tasks made and the report written next to them."""

    tasks: tuple[Task, ...]
    discards: tuple[Discard, ...]
    baseline: Mapping[str, Any]
    splits: Mapping[str, str]
    """Source file (or ``file::definition`` in a one-file project) -> split."""
    scrub: ScrubReport
    snapshot_files: int
    skipped: tuple[tuple[str, str], ...]

    @property
    def made(self) -> int:
        return len(self.tasks)

    def report(self) -> dict[str, Any]:
        return {
            "made": self.made,
            "made_by_kind": dict(Counter(str(t.metadata["kind"]) for t in self.tasks)),
            "made_by_split": dict(Counter(t.split for t in self.tasks)),
            "made_by_isolation": dict(Counter(t.verifier.isolation for t in self.tasks)),
            "tests_dropped_needs_in_process": sum(int(t.metadata.get("tests_dropped_needs_in_process", 0))
                                                  for t in self.tasks),
            "discarded": len(self.discards),
            "discarded_by_reason": dict(sorted(Counter(d.reason for d in self.discards).items())),
            "discards": [vars(d) for d in self.discards],
            "baseline": dict(self.baseline),
            "split_by_file": dict(self.splits),
            "split_unit": "definition" if any("::" in k for k in self.splits) else "file",
            "snapshot": {"files": self.snapshot_files, "skipped": [list(s) for s in self.skipped]},
            "scrub": self.scrub.to_json(),
        }


SandboxFactory = Callable[[float], Sandbox]


SAFE_ISOLATION: Isolation = "process"
"""How from-repo tasks grade: the agent's code runs in a process of its own and reaches the project's tests only as
plain data and handles (docs/SANDBOX.md, "Grading the agent cannot reach"), so always-equal objects, patched pytest
or a forged report earn nothing. A hidden test that needs the code in its own process (``isinstance`` against the
project's classes, a subclass of one, a callback passed in, two of its objects compared) fails there on the
reference: it is dropped from the task (counted in ``tests_dropped_needs_in_process``), and a candidate left with no
such test is discarded as ``needs_in_process``."""
DISCOVERY_ISOLATION: Isolation = "in-process"
"""The baseline and the starting-state runs that only *find* which tests a change breaks (never a reward) run the
tests in-process: cheaper, and every test counts there."""


def _default_factory(backend: str, requirements: tuple[str, ...] = ()) -> SandboxFactory:
    def make(timeout_s: float) -> Sandbox:
        return make_sandbox(backend, limits=Limits(timeout_s=timeout_s, memory_mb=2048), requirements=requirements)
    return make


class _Runner:
    """One sandbox holding the snapshot; runs hidden tests with one file swapped in.

    When the sandbox itself dies (``SandboxError``, e.g. a mutation that exhausted it), a fresh one is made with
    the snapshot and the run reports nothing (``report_found`` False), which discards that candidate.
    """

    def __init__(self, make: SandboxFactory, files: Mapping[str, str], timeout_s: float,
                 support: Mapping[str, str] | None = None, data: Mapping[str, bytes] | None = None,
                 support_data: Mapping[str, bytes] | None = None) -> None:
        self.make, self.files, self.timeout_s = make, files, timeout_s
        self.data = dict(data or {})
        """Binary package data, written into the workspace with the files."""
        self.support = dict(support or {})
        """The tests' conftest files, helpers and data: part of every hidden run, laid out as in the repo."""
        self.support_data = dict(support_data or {})
        """Binary files under test folders: hidden, beside the tests, in every run."""
        self.sb = self._fresh()
        self.restarts = 0
        self._memo: dict[tuple[Any, ...], TestReport] = {}
        """Reports of runs already made: one candidate posed at several rungs is verified once."""

    def _fresh(self) -> Sandbox:
        sb = self.make(self.timeout_s)
        content: dict[str, str | bytes] = {**self.data, **self.files}
        for path, body in content.items():
            sb.write_file(path, body)
        return sb

    def run(self, tests: Mapping[str, str], expected: int, swap: tuple[str, str] | None = None,
            isolation: Isolation = DISCOVERY_ISOLATION) -> TestReport:
        key = (tuple(sorted(tests.items())), expected, swap, isolation)
        if key not in self._memo:
            self._memo[key] = self._run(tests, expected, swap, isolation)
        return self._memo[key]

    def _run(self, tests: Mapping[str, str], expected: int, swap: tuple[str, str] | None,
             isolation: Isolation) -> TestReport:
        try:
            if swap is not None:
                self.sb.write_file(*swap)
            try:
                return self.sb.run_tests({**self.support_data, **self.support, **tests}, expected=max(expected, 1),
                                         timeout=self.timeout_s, isolation=isolation)
            finally:
                if swap is not None:
                    self.sb.write_file(swap[0], self.files[swap[0]])
        except SandboxError as exc:
            log.warning("sandbox failed (%s); starting a fresh one", exc)
            self.close()
            self.restarts += 1
            self.sb = self._fresh()
            return TestReport(expected=max(expected, 1))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.sb.close()


def split_files(files: list[str], fraction: float, seed: int) -> dict[str, str]:
    """Whole source files to ``train``/``heldout`` (seeded); both splits non-empty when there are >= 2 files."""
    order = sorted(files)
    random.Random(seed).shuffle(order)
    n = round(len(order) * fraction)
    if fraction > 0 and len(order) >= 2:
        n = min(max(n, 1), len(order) - 1)
    return {f: ("heldout" if i < n else "train") for i, f in enumerate(order)}


def split_units(files: Mapping[str, str], fraction: float, seed: int) -> dict[str, str]:
    """Split by whole source file; a project with one source file (a single-module package) is split by its
    top-level definitions instead (``file::name``: a function, or a class with all its methods), so it still has a
    held-out split whose code no training task touched."""
    if len(files) != 1 or fraction <= 0:
        return split_files(list(files), fraction, seed)
    (path, source), = files.items()
    tops = sorted({f"{path}::{t.qualname.split('.')[0]}" for t in find_targets(source, path)})
    return {path: "train", **split_files(tops, fraction, seed)}


def split_of(splits: Mapping[str, str], target: Target) -> str:
    """The split of ``target``: its top-level definition's when the project was split by definition."""
    return splits.get(f"{target.file}::{target.qualname.split('.')[0]}", splits.get(target.file, "train"))


def _candidates(snap: Snapshot, files: Mapping[str, str], seed: int, unreferenced: list[Discard]) -> Iterator[Target]:
    """Targets the tests mention by name, round-robin over files (seeded order within each file).

    Functions no test names are appended to ``unreferenced`` (they cannot be verified by the tests).
    """
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", "\n".join(snap.tests.values())))
    per_file: list[list[Target]] = []
    for path in snap.source_files():
        found = find_targets(files[path], path)
        targets = [t for t in found if _referenced(t, words)]
        unreferenced += [Discard(f"{path}::{t.qualname}", "not_referenced_by_tests",
                                 "no test file names it (or its class, for a special method)")
                         for t in found if t not in targets]
        random.Random(f"{seed}:{path}").shuffle(targets)
        if targets:
            per_file.append(targets)
    i = 0
    while any(per_file):
        bucket = per_file[i % len(per_file)]
        if bucket:
            yield bucket.pop(0)
        i += 1


def _referenced(target: Target, words: set[str]) -> bool:
    """Whether the tests name ``target``; a special method (``__getitem__``, ``__init__``, ...) runs through syntax
    (``c[k]``, ``C()``), so naming its class is enough."""
    if target.name.startswith("test"):
        return False
    return target.name in words or (_is_special(target) and target.qualname.split(".")[0] in words)


def _is_special(target: Target) -> bool:
    return target.is_method and target.name.startswith("__") and target.name.endswith("__")


def from_repo(config: FromRepoConfig, sandbox_factory: SandboxFactory | None = None) -> FromRepoResult:
    """Make verified tasks from a repository (see the module docstring); nothing is written."""
    snap = read_repo(config.repo, max_file_bytes=config.max_file_bytes, max_data_bytes=config.max_data_bytes,
                     exclude_tests=tuple(config.exclude_tests))
    scrubber = Scrubber(dict(config.scrub_patterns))
    files, tests, support = dict(snap.files), dict(snap.tests), dict(snap.support)
    if snap.pytest_config is not None:  # the grader runs every hidden test with the repository's settings
        support["pytest.ini"] = snap.pytest_config.ini
    scrub_report = ScrubReport()
    if config.scrub:
        files, r1 = scrubber.files(files)
        tests, r2 = scrubber.files(tests)
        support, r3 = scrubber.files(support)
        scrub_report = ScrubReport(r1.findings + r2.findings + r3.findings)
    make = sandbox_factory or _default_factory(config.backend, tuple(config.requirements))
    runner = _Runner(make, files, config.timeout_s, support, snap.data, snap.support_data)
    try:
        log.info("from-repo: baseline run of %d test file(s) in the sandbox", len(tests))
        base = runner.run(tests, expected=1)
        if not base.report_found:
            tail = (base.exec.stderr[-800:] if base.exec else "")
            raise TaskError(f"{config.repo}: the baseline test run gave no report (timed out or crashed): {tail}; "
                            f"raise --timeout (now {config.timeout_s}s) or check that the tests run with plain pytest")
        passing = {o.name for o in base.outcomes if o.outcome == "passed"}
        errors = [f"{o.name}: {_last_error_line(o.message)}" for o in base.outcomes
                  if o.outcome == "error" and "::" not in o.name]
        why = Counter(_last_error_line(o.message) for o in base.outcomes
                      if o.outcome in ("failed", "error") and "::" in o.name)
        wall = round(base.exec.wall_s if base.exec else 0.0, 2)
        baseline: dict[str, Any] = {"collected": base.reported, "passed": len(passing), "test_files": len(tests),
                                    "wall_s": wall, "collection_errors": errors[:20],
                                    "failures_by_reason": dict(why.most_common(10)),
                                    **diagnose([*errors, *why], snap),
                                    "pytest_config": snap.pytest_config.to_json() if snap.pytest_config else None}
        runner.timeout_s = 3 * wall + 10.0
        made, discards, splits = _generate(config, snap, files, tests, base, passing, runner, scrubber)
    finally:
        runner.close()
    return FromRepoResult(tuple(made), tuple(discards), baseline, splits, scrub_report, len(files), snap.skipped)


_NETWORK = re.compile(r"name resolution|Name or service not known|Network is unreachable|nodename nor servname|"
                      r"getaddrinfo|Connection refused|urlopen error")


def diagnose(reasons: list[str], snap: Snapshot | None = None) -> dict[str, Any]:
    """What the baseline's error lines point at.

    ``missing_modules``: modules that no file of the repository provides (install them with ``--requirement``);
    ``missing_own_modules``: modules the repository itself provides (``snap``) that did not import, each with where
    it lies, the files of it the snapshot left out and a ``hint`` (never to install the project itself);
    ``network_errors``: lines that need a network (the sandbox has none: those tests cannot decide tasks)."""
    names = sorted({m.group(1) for r in reasons for m in [re.search(r"No module named '([\w.]+)'", r)] if m})
    own: list[dict[str, Any]] = []
    external: set[str] = set()
    for name in names:
        kept, left_out = snap.locate_module(name) if snap is not None else ([], [])
        if kept or left_out:
            own.append({"module": name, "in_snapshot": kept[:5], "skipped": [list(s) for s in left_out[:10]],
                        "hint": _own_module_hint(name, kept, left_out)})
        else:
            external.add(name.split(".")[0])
    return {"missing_modules": sorted(external), "missing_own_modules": own,
            "network_errors": sum(bool(_NETWORK.search(r)) for r in reasons)}


def _own_module_hint(name: str, kept: list[str], left_out: list[tuple[str, str]]) -> str:
    top = name.split(".")[0]
    if left_out:
        shown = "; ".join(f"{p} ({why})" for p, why in left_out[:3]) + (" and more" if len(left_out) > 3 else "")
        return (f"the project's own module {name!r} did not import: the snapshot left out {shown}; it is part of "
                f"the repository, not a package to install with --requirement (see the report's snapshot.skipped)")
    at_root = any(p == f"{top}.py" or p.startswith(f"{top}/") for p in kept)
    if not at_root:
        return (f"the project's own module {name!r} did not import: it lies at {kept[0]}, which is not importable "
                f"from the workspace root (only a src/ layout is flattened); not a package to install with "
                f"--requirement")
    return (f"the project's own module {name!r} did not import although the snapshot holds {kept[0]}: see the "
            f"collection errors (a compiled extension from-repo cannot build?); not a package to install with "
            f"--requirement")


def _last_error_line(message: str) -> str:
    """The line of a collection error that says why (``E   ModuleNotFoundError: ...``), for the report."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip().startswith("E ")]
    return (lines[-1][1:].strip() if lines else message.strip()[-200:])[:300]


def _generate(config: FromRepoConfig, snap: Snapshot, files: dict[str, str], tests: dict[str, str],
              base: TestReport, passing: set[str], runner: _Runner, scrubber: Scrubber
              ) -> tuple[list[Task], list[Discard], dict[str, str]]:
    collected: dict[str, set[str]] = defaultdict(set)
    instances: Counter[tuple[str, str]] = Counter()
    broken: set[tuple[str, str]] = set()  # tests with an instance that does not pass at baseline
    for o in base.outcomes:
        f, key = test_key(o.name)
        if key:
            collected[f].add(key)
            instances[(f, key)] += 1
            if o.outcome not in ("passed", "skipped"):  # a skipped instance (speedups unavailable) is no fault
                broken.add((f, key))
    splits = split_units({f: files[f] for f in snap.source_files()}, config.heldout_fraction, config.seed)
    made: list[Task] = []
    discards: list[Discard] = []
    for target in _candidates(snap, files, config.seed, discards):
        for kind in config.kinds:
            if config.max_tasks is not None and sum(not t.metadata.get("variant") for t in made) >= config.max_tasks:
                return made, discards, splits
            cand = f"{target.file}::{target.qualname} ({kind})"
            mutations = ([dataclasses.replace(remove_body(files[target.file], target), kind=kind)]
                         if kind in ("reimplement", "complete")
                         else [dataclasses.replace(m, kind=kind) for m in
                               bug_mutations(files[target.file], target, config.seed)[: config.max_mutation_tries]])
            if not mutations:
                discards.append(Discard(cand, "no_mutation_site", "no single-line site to mutate"))
                continue
            outcome: Task | Discard | None = None
            # a train definition's fix rung keeps every verified mutant (more demonstrations); others the first
            wanted = len(mutations) if kind == "fix" and split_of(splits, target) == "train" else 1
            found: list[Task] = []
            for mutation in mutations:
                outcome = _try(config, snap, files, tests, target, mutation, passing, collected, instances, broken,
                               runner, splits, scrubber)
                if isinstance(outcome, Task):
                    found.append(outcome if not found else
                                 dataclasses.replace(outcome, metadata={**outcome.metadata, "variant": len(found)}))
                    if len(found) >= wanted:
                        break
            for outcome in found:
                if any(t.id == outcome.id for t in made):  # e.g. a property and its setter share a name
                    outcome = dataclasses.replace(outcome, id=f"{outcome.id}-L{target.lineno}")
                made.append(outcome)
                made += prefix_variants(outcome, target, files[target.file], splits)
                log.info("from-repo: made %s (%d made, %d discarded)", outcome.id, len(made), len(discards))
            if found:
                continue
            if outcome is not None and not isinstance(outcome, Task):
                discards.append(Discard(cand, outcome.reason, outcome.detail))
                log.info("from-repo: discarded %s: %s (%d made, %d discarded)", cand, outcome.reason, len(made),
                         len(discards))
    return made, discards, splits


def _try(config: FromRepoConfig, snap: Snapshot, files: dict[str, str], tests: dict[str, str], target: Target,
         mutation: Mutation, passing: set[str], collected: Mapping[str, set[str]],
         instances: Counter[tuple[str, str]], broken: set[tuple[str, str]], runner: _Runner,
         splits: Mapping[str, str], scrubber: Scrubber) -> Task | Discard:
    names = [target.name] + ([target.qualname.split(".")[0]] if _is_special(target) else [])
    word = re.compile("|".join(rf"\b{re.escape(n)}\b" for n in names))
    related = {n: tests[n] for n in with_imported_tests({n for n, s in tests.items() if word.search(s)}, tests)}
    swap = (target.file, mutation.source)
    found = runner.run(related, expected=1, swap=swap)
    if not found.report_found:
        return Discard("", "starting_state_timeout", "the test run on the starting state gave no report (timed out "
                                                     "or crashed the sandbox)")
    now_passing = {o.name for o in found.outcomes if o.outcome == "passed"}
    failing = {test_key(n) for n in passing - now_passing if n.partition("::")[0] in related}
    keep = {(f, k) for f, k in failing if (f, k) not in broken}
    if not keep:
        reason = "not_exercised" if mutation.kind in ("reimplement", "complete") else "mutation_survived"
        return Discard("", reason, "no baseline-passing test fails on the starting state")
    hidden, expected = _select(keep, tests, collected, instances)
    isolation, dropped = SAFE_ISOLATION, 0
    ref = proc = runner.run(hidden, expected, isolation=SAFE_ISOLATION)
    safe = _passing_keys(ref, keep)
    if not safe:  # nothing passes out of process: does the reference pass them at all?
        ref = runner.run(hidden, expected)
        if _passing_keys(ref, keep) != keep:
            return _reference_fails(ref, keep)
        if not config.allow_in_process:
            return Discard("", "needs_in_process", f"none of the {len(keep)} deciding test(s) pass with the code in "
                                                   f"a process of its own; e.g. {_first_failure(proc)}")
        isolation = DISCOVERY_ISOLATION
    elif safe != keep:  # some tests need the code in their process: the task keeps the others
        dropped, keep = len(keep - safe), safe
        hidden, expected = _select(keep, tests, collected, instances)
        ref = runner.run(hidden, expected, isolation=SAFE_ISOLATION)
        if _passing_keys(ref, keep) != keep:
            return _reference_fails(ref, keep)
    expected = ref.passed  # what the filtered files collect (inherited tests may add a few), less skipped instances
    start = runner.run(hidden, expected, swap=swap, isolation=isolation)
    if start.passed >= expected:
        return Discard("", "starting_state_passes", f"{start.passed}/{expected} hidden tests pass unchanged")
    report = (bug_report(start) if mutation.kind in ("locate", "find") else fix_prompt(target, mutation, start)
              if mutation.kind == "fix" else "")
    task = _task(config, snap, files, target, mutation, {**runner.support, **hidden}, expected,
                 sorted(f"{f}::{k}" for f, k in keep), splits, scrubber, runner.timeout_s, isolation, report)
    metadata = {**task.metadata, "tests_dropped_needs_in_process": dropped}
    return dataclasses.replace(task, metadata=metadata)


def _select(keep: set[tuple[str, str]], tests: Mapping[str, str], collected: Mapping[str, set[str]],
            instances: Counter[tuple[str, str]]) -> tuple[dict[str, str], int]:
    """The hidden test files holding only ``keep`` (and what they import), and how many instances they run."""
    hidden: dict[str, str] = {}
    expected = 0
    for f, keys in keys_with_imports(keep, tests).items():
        hidden[f] = select_tests(tests[f], keys, collected[f])
        expected += sum(instances[(f, k)] for k in keys)
    return hidden, expected


def _passing_keys(report: TestReport, keep: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The tests of ``keep`` that ran and had no instance fail (a skipped instance is no fault)."""
    if not report.report_found:
        return set()
    ran = {test_key(o.name) for o in report.outcomes}
    bad = {test_key(o.name) for o in report.outcomes if o.outcome not in ("passed", "skipped")}
    bad |= {(o.name, "") for o in report.outcomes if "::" not in o.name and o.outcome == "error"}
    broken_files = {f for f, k in bad if not k}  # a collection error takes the whole file
    return {(f, k) for f, k in keep if (f, k) in ran and (f, k) not in bad and f not in broken_files}


def _reference_fails(ref: TestReport, keep: set[tuple[str, str]]) -> Discard:
    ran = {test_key(o.name) for o in ref.outcomes}
    bad = [o.name for o in ref.outcomes if o.outcome not in ("passed", "skipped")]
    return Discard("", "reference_fails", f"{ref.passed}/{ref.reported} hidden tests pass on the reference "
                                          f"(missing {len(keep - ran)}); e.g. {bad[:3]}")


def _first_failure(report: TestReport) -> str:
    """Why the first hidden test failed (the detail of a ``needs_in_process`` discard)."""
    if not report.report_found:
        return "the run gave no report (it timed out or crashed)"
    for o in report.outcomes:
        if o.outcome not in ("passed", "skipped"):
            return f"{o.name}: {_last_error_line(o.message)}"
    return "no report"


def _prompt(target: Target, mutation: Mutation, failing: list[str], report: str = "") -> str:
    what = f"method `{target.qualname}`" if target.is_method else f"function `{target.name}`"
    if mutation.kind == "reimplement":
        return (f"The workspace is a snapshot of a Python project. The body of the {what} in `{target.file}` has "
                "been removed (it now raises NotImplementedError). Re-implement it so that the project's tests "
                "pass again. Keep its signature and docstring, and do not change other behaviour.")
    if mutation.kind == "locate":
        return ("The workspace is a whole Python project (its tests are not in it). A user reports a bug: since a "
                f"recent change, the project's test `{failing[0]}` fails"
                + (f" ({len(failing) - 1} other test(s) too)" if len(failing) > 1 else "") +
                f". What it printed:\n\n```\n{report}\n```\n\nFind the code that causes it (search the "
                "project: grep, list_files, read_file), fix it with a minimal change, and do not change other "
                "behaviour. Then submit.")
    shown = ", ".join(f"`{n}`" for n in failing[:5]) + (" and others" if len(failing) > 5 else "")
    return (f"The workspace is a snapshot of a Python project. A recent change introduced a bug in `{target.file}`: "
            f"these tests of the project now fail: {shown}. Find the bug and fix it with a minimal change; do not "
            "change other behaviour.")


REPORT_LINES = 12
"""Lines of a failing test's output a ``locate`` prompt shows."""


def bug_report(start: TestReport) -> str:
    """What the first failing hidden test printed, as a user would paste it: the test's own line and the error
    lines, without a file path, a line number or a line of the project's code (those would name the place)."""
    for o in start.outcomes:
        if o.outcome in ("passed", "skipped") or "::" not in o.name:
            continue
        text = o.message.split("raised in the solution's process")[0]
        lines = text.splitlines()
        first = next((ln.strip() for ln in lines if ln.startswith(">")), "")
        errors = [ln.strip() for ln in lines if ln.lstrip().startswith("E ") and ".py" not in ln]
        shown = [first.lstrip("> ").strip()] if first else []
        shown += [e for e in errors if e.strip() != "E"]
        if shown:
            return "\n".join(shown[:REPORT_LINES])[:1500]
    return "(the test failed without output)"


def workspace_tokens(files: Mapping[str, str]) -> int:
    """The workspace's size in tokens (characters / ``CHARS_PER_TOKEN``, as the long-context documents count)."""
    return sum(len(text) for text in files.values()) // CHARS_PER_TOKEN


def _edit(mutation: Mutation, original: str, path: str) -> dict[str, Any]:
    """How the oracle undoes the starting state (``metadata["edit"]``): one ``edit_file`` whose ``old`` text occurs
    once in the file, and the line to read around first (never a whole-file write, which a model's window may not
    hold)."""
    old, new = unique_edit(mutation.source, original)
    return {"path": path, "line": mutation.line, "old": old, "new": new}


def unique_edit(mutated: str, original: str) -> tuple[str, str]:
    """(old, new): the lines that differ, with as many neighbours as make ``old`` occur once in ``mutated``."""
    a, b = mutated.splitlines(keepends=True), original.splitlines(keepends=True)
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    j = 0
    while j < min(len(a), len(b)) - i and a[-1 - j] == b[-1 - j]:
        j += 1
    for k in range(40):
        lo, end_a = max(0, i - k), min(len(a), len(a) - j + k)
        end_b = len(b) - j + (end_a - (len(a) - j))
        old = "".join(a[lo:end_a])
        if old and mutated.count(old) == 1:
            return old, "".join(b[lo:end_b])
    return mutated, original


def _task(config: FromRepoConfig, snap: Snapshot, files: dict[str, str], target: Target, mutation: Mutation,
          hidden: dict[str, str], expected: int, failing: list[str], splits: Mapping[str, str], scrubber: Scrubber,
          timeout_s: float, isolation: Isolation = SAFE_ISOLATION, report: str = "") -> Task:
    module = target.file.removesuffix(".py").replace("/", ".")
    suffix = f"-{mutation.operator}-L{mutation.line}" if mutation.kind not in ("reimplement", "complete") else ""
    prompt = (complete_prompt(target, mutation, files[target.file], hides(splits, target))
              if mutation.kind == "complete"
              else report if mutation.kind == "fix" else find_prompt(failing, report) if mutation.kind == "find"
              else _prompt(target, mutation, failing, report))
    if config.scrub:
        prompt, _ = scrubber.text(prompt, "<prompt>")
    if mutation.kind == "find":
        return _find_task(config, target, mutation, splits, prompt, failing, snap.repo_path(target.file))
    difficulty = 2 if mutation.kind in ("bugfix", "fix") else 3 if mutation.kind == "locate" else min(
        4, 1 + (target.body_lines > 5) + (target.body_lines > 15) + (target.body_lines > 40))
    workspace = {**files, target.file: mutation.source}
    # a locate task never says where: no entry file (a system prompt could show it); the oracle's search instead,
    # and the workspace's size in tokens (evaluation reports completion by it, as by a document's length)
    where: dict[str, Any] = ({"search": {"grep": rf"def {re.escape(target.name)}\b"},
                              "tokens": workspace_tokens(workspace)} if mutation.kind == "locate"
                             else {"entry_file": target.file})
    where["edit"] = _edit(mutation, files[target.file], target.file)
    rung = mutation.kind in RUNGS  # one definition, answered with a code block that replaces it
    if rung:
        where["definition"] = target.qualname
    if mutation.kind == "fix":  # the deciding tests run on each block; grading still runs them out of reach
        where["visible_expected"] = expected
    return Task(
        id=f"{config.suite_name}/{mutation.kind}/{module}.{target.qualname}{suffix}",
        domain="coding", family=f"repo_{mutation.kind}", split=split_of(splits, target),  # type: ignore[arg-type]
        prompt=prompt,
        verifier=Verifier(kind="tests", tests=hidden, expected_tests=expected, isolation=isolation,
                          data=encode_data(snap.support_data)),
        files=workspace,
        data_files=encode_data(snap.data),
        reference=Reference(files={target.file: files[target.file]}),
        visible_tests=hidden if mutation.kind == "fix" else {},
        limits=TaskLimits(max_turns=TURNS.get(mutation.kind, 12), exec_timeout_s=max(10.0, round(timeout_s)),
                          episode_timeout_s=600.0),
        difficulty=difficulty,
        requirements=tuple(config.requirements),
        metadata={**where, "source_file": snap.repo_path(target.file), "repo": config.suite_name,
                  "function": target.qualname, "kind": mutation.kind,
                  "mutation": {"operator": mutation.operator, "line": mutation.line, "before": mutation.before,
                               "after": mutation.after},
                  "hidden_tests": failing},
    )


def _find_task(config: FromRepoConfig, target: Target, mutation: Mutation, splits: Mapping[str, str], prompt: str,
               failing: list[str], source_file: str) -> Task:
    """A ``find`` task: graded by the name alone (no workspace, no test run): the reply's block is the answer."""
    module = target.file.removesuffix(".py").replace("/", ".")
    return Task(
        id=f"{config.suite_name}/find/{module}.{target.qualname}-{mutation.operator}-L{mutation.line}",
        domain="coding", family="repo_find", split=split_of(splits, target),  # type: ignore[arg-type]
        prompt=prompt, verifier=Verifier(kind="match", answer=target.qualname, matcher="exact"),
        reference=Reference(answer=target.qualname), limits=TaskLimits(max_turns=TURNS["find"]), difficulty=2,
        metadata={"answer_block": True, "repo": config.suite_name, "function": target.qualname, "kind": "find",
                  "source_file": source_file, "hidden_tests": failing,
                  "mutation": {"operator": mutation.operator, "line": mutation.line}},
    )


def hides(splits: Mapping[str, str], target: Target) -> Callable[[Target], bool]:
    """Which other definitions a ``complete`` prompt of ``target`` cuts the bodies out of: a train task's prompt
    never shows a held-out definition's body; a held-out task's prompt shows its module as it is."""
    if split_of(splits, target) != "train":
        return lambda t: False
    return lambda t: split_of(splits, t) == "heldout"


def prefix_variants(task: Task, target: Target, original: str, splits: Mapping[str, str]) -> list[Task]:
    """More ``complete`` tasks of a train definition (``rungs.PREFIX_CUTS``): the same verified candidate, its body
    shown up to a third and two thirds; held-out definitions are posed once, with the body cut out whole."""
    if task.metadata.get("kind") != "complete" or task.split != "train" or target.body_lines < 3:
        return []
    mutation = remove_body(original, target)
    heldout = hides(splits, target)
    variants = []
    for i, share in enumerate(PREFIX_CUTS, 1):
        with contextlib.suppress(DefinitionError):  # a cut inside a multi-line statement: no such variant
            variants.append(dataclasses.replace(task, id=f"{task.id}-cut{i}", metadata={**task.metadata, "variant": i},
                                                prompt=complete_prompt(target, mutation, original, heldout, share)))
    return variants


def write_suite(result: FromRepoResult, out: str | Path, config: FromRepoConfig | None = None) -> Path:
    """Write ``tasks.jsonl`` and ``from_repo_report.json`` into ``out``; returns the JSONL path."""

    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    path = save_jsonl(result.tasks, folder / TASKS_NAME)
    report = result.report()
    if config is not None:
        report = {"repo": str(Path(config.repo).resolve()), "suite": config.suite_name, "kinds": list(config.kinds),
                  "seed": config.seed, "heldout_fraction": config.heldout_fraction, **report}
    (folder / REPORT_NAME).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return path


def run(config: FromRepoConfig, sandbox_factory: SandboxFactory | None = None) -> FromRepoResult:
    """Make the tasks and write them (the CLI's entry point)."""
    result = from_repo(config, sandbox_factory)
    write_suite(result, config.out, config)
    return result
