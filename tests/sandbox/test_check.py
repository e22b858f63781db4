"""``sandgym sandbox check``: the report and the CLI exit code."""

from __future__ import annotations

import json

import pytest

from sandgym.errors import SandboxError
from sandgym.sandbox.protocol import IsolationReport


def test_isolation_report_contained() -> None:
    assert IsolationReport("local", {"a": True, "b": True}).contained
    assert not IsolationReport("local", {"a": True, "b": False}).contained


def test_cli_check_json(capsys: pytest.CaptureFixture[str]) -> None:
    from sandgym.cli import main
    from sandgym.sandbox import LocalSandbox

    try:
        LocalSandbox().close()
    except SandboxError as exc:
        pytest.skip(str(exc))
    code = main(["sandbox", "check", "--backend", "local", "--json", "--no-latency"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["contained"] and doc["backend"] == "local"
    assert {"network_loopback", "dns", "fork_bomb", "setsid_grandchild", "signal_host"} <= set(doc["probes"])


def test_cli_check_fails_when_backend_cannot_start(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from sandgym.cli import main

    assert main(["sandbox", "check", "--backend", "nonsense"]) == 2
    assert "unknown sandbox backend" in capsys.readouterr().err


def test_check_reports_leaks_under_weak_isolation(tmp_path: object) -> None:
    import os

    from sandgym.sandbox.check import run_check

    if os.geteuid() != 0:
        pytest.skip("the weak backend drops to a slot uid only as root")
    fake = os.path.join(str(tmp_path), "bwrap")
    with open(fake, "w") as f:
        f.write("#!/bin/sh\necho 'bwrap: unshare failed: Operation not permitted' >&2\nexit 1\n")
    os.chmod(fake, 0o755)
    report = run_check("unsafe-local", latency=False, bwrap=fake,
                       only=["network_loopback", "host_env_secret", "setsid_grandchild"])
    assert report.probes["network_loopback"] is False and report.probes["setsid_grandchild"] is False
    assert report.probes["host_env_secret"] is True
    assert not report.contained and any("WEAK ISOLATION" in n for n in report.notes)
