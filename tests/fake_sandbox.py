"""The one test double of sandgym's ``Sandbox`` protocol: a temp-dir workspace and plain subprocesses (NOT
isolation; tests only).

A test that needs one behaviour changed subclasses it and overrides that method (``tests/sandbox/test_pool.py``
scripts ``exec``; ``tests/tasks/test_importers.py`` and ``tests/private/test_fromrepo.py`` script ``run_tests``).
``tests/sandbox/fake_e2b.py`` is a different thing: a fake of E2B's HTTP API for the E2B backend to drive.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path

from sandgym.errors import SandboxError
from sandgym.sandbox.protocol import ExecResult, Limits, TestOutcome, TestReport


class FakeSandbox:
    """Runs commands with subprocess in a temp workspace.

    Args:
        limits: the sandbox's ``limits`` (only ``timeout_s`` is applied).
        fail_after: protocol calls after the first ``fail_after`` raise SandboxError (the sandbox "died").

    For assertions it keeps ``calls`` (protocol calls so far), ``written`` (the last data ``write_file`` got for
    each path, as given, kept after ``close``), ``resets`` (times ``reset`` ran) and ``closed``.
    """

    def __init__(self, limits: Limits | None = None, fail_after: int | None = None) -> None:
        self.limits = limits or Limits()
        self.workdir = tempfile.mkdtemp(prefix="fakesb-")
        self.calls = 0
        self.fail_after = fail_after
        self.written: dict[str, str | bytes] = {}
        self.resets = 0
        self.closed = False

    @property
    def alive(self) -> bool:
        """False once closed (``SandboxPool`` reuses only live sandboxes)."""
        return not self.closed

    def _tick(self) -> None:
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise SandboxError("fake sandbox died")

    def _path(self, path: str) -> Path:
        if os.path.isabs(path) or ".." in Path(path).parts:
            raise ValueError(f"path {path!r} must be relative to the workspace, without '..'")
        return Path(self.workdir) / path

    def exec(self, cmd: str | Sequence[str], *, timeout: float | None = None,
             env: Mapping[str, str] | None = None, stdin: str | bytes | None = None) -> ExecResult:
        self._tick()
        argv = ["bash", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        start = time.monotonic()
        try:
            p = subprocess.run(argv, cwd=self.workdir, capture_output=True, text=True,
                               timeout=timeout or self.limits.timeout_s,
                               input=stdin if isinstance(stdin, str) else None)
        except subprocess.TimeoutExpired:
            return ExecResult(None, "", "", timed_out=True, wall_s=time.monotonic() - start)
        return ExecResult(p.returncode, p.stdout, p.stderr, wall_s=time.monotonic() - start)

    def run_python(self, code: str, *, timeout: float | None = None) -> ExecResult:
        return self.exec([sys.executable, "-c", code], timeout=timeout)

    def run_tests(self, tests: Mapping[str, str | bytes], *, expected: int, timeout: float | None = None,
                  isolation: str = "process") -> TestReport:
        self._tick()
        hidden = tempfile.mkdtemp(prefix="fakesb-tests-")
        try:
            for name, src in tests.items():
                Path(hidden, name).parent.mkdir(parents=True, exist_ok=True)
                Path(hidden, name).write_bytes(src.encode() if isinstance(src, str) else src)
            xml = Path(hidden, "report.xml")
            res = self.exec([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", hidden,
                             f"--junitxml={xml}", hidden], timeout=timeout or 60)
            self.calls -= 1
            outcomes: list[TestOutcome] = []
            if xml.exists():
                for case in ET.parse(xml).iter("testcase"):
                    kind = "passed"
                    for child in case:
                        if child.tag in ("failure", "error", "skipped"):
                            kind = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                    outcomes.append(TestOutcome(case.get("name", "?"), kind))  # type: ignore[arg-type]
            return TestReport(expected, tuple(outcomes), res, report_found=xml.exists())
        finally:
            shutil.rmtree(hidden, ignore_errors=True)

    def write_file(self, path: str, data: str | bytes) -> None:
        self._tick()
        p = self._path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
        self.written[path] = data

    def read_file(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8", errors="replace")

    def read_bytes(self, path: str) -> bytes:
        self._tick()
        return self._path(path).read_bytes()

    def list_files(self, path: str = ".") -> list[str]:
        self._tick()
        root = self._path(path)
        return sorted(str(p.relative_to(self.workdir)) for p in root.rglob("*") if p.is_file())

    def reset(self) -> None:
        """Wipe the workspace for the next episode (what ``reuse_sandbox`` and ``SandboxPool(reuse=True)`` need)."""
        self.resets += 1
        shutil.rmtree(self.workdir, ignore_errors=True)
        os.mkdir(self.workdir)

    def close(self) -> None:
        self.closed = True
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> FakeSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
