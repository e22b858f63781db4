"""Every registered backend passes the one conformance suite (E2B over the loopback fake of its API), and the
suite catches a backend that breaks the protocol (it asserts behaviour, it cannot pass by construction)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandgym.sandbox import Limits, LocalSandbox
from sandgym.sandbox.conformance import CHECKS, Check, run_conformance
from sandgym.sandbox.factory import backends, make_sandbox, register_backend
from tests.sandbox.fake_e2b import FakeE2B


@pytest.mark.parametrize("backend", ["local", "unsafe-local"])
def test_backend_conforms(backend: str) -> None:
    assert run_conformance(lambda: make_sandbox(backend, Limits(timeout_s=10, max_output_bytes=4096))) == []


@pytest.mark.parametrize("check", [
    pytest.param(c, id=c.name) for c in CHECKS])
def test_e2b_backend_conforms_over_the_fake_api(check: Check, fake: FakeE2B, tmp_path: Path) -> None:
    """The E2B backend, through the real SDK, against tests/sandbox/fake_e2b.py with its commands run on this
    host in a folder standing for the VM (``execute_on_host``)."""
    pytest.importorskip("e2b")
    fake.execute_on_host(tmp_path)
    # max_procs: RLIMIT_NPROC counts every process of the uid; in the VM the sandbox user is alone, here it is not
    limits = Limits(timeout_s=10, max_output_bytes=4096, max_procs=4096)
    assert run_conformance(lambda: make_sandbox("e2b", limits), (check,)) == []


class TrustsExitCodes(LocalSandbox):
    """A broken backend: reports every hidden test passed when the run exits 0."""

    def run_tests(self, tests, *, expected, timeout=None, isolation="process"):  # type: ignore[no-untyped-def]
        from sandgym.sandbox.protocol import TestOutcome, TestReport

        r = self.exec(["python3", "-c", "import solution"])
        ok = "passed" if r.exit_code == 0 else "failed"
        return TestReport(expected, tuple(TestOutcome(f"test_hidden.py::t{i}", ok) for i in range(expected)), r)


def test_the_suite_catches_a_broken_backend() -> None:
    register_backend("broken-for-test", lambda limits, **kw: TrustsExitCodes(limits), replace=True)
    assert "broken-for-test" in backends()
    tests_check = tuple(c for c in CHECKS if c.name == "tests")
    failures = run_conformance(lambda: make_sandbox("broken-for-test"), tests_check)
    assert failures and failures[0].startswith("tests:"), failures


def test_registry_errors_name_the_choices() -> None:
    from sandgym.errors import SandboxError

    with pytest.raises(SandboxError, match="choose one of local"):
        make_sandbox("no-such-backend")
    with pytest.raises(ValueError, match="already registered"):
        register_backend("local", lambda limits, **kw: LocalSandbox(limits))
