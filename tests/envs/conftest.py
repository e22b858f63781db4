"""Shared fixtures: the real local sandbox (skipped where bubblewrap cannot run) and a fake one."""

from __future__ import annotations

import pytest

from sandgym.errors import SandboxError
from tests.fake_sandbox import FakeSandbox


@pytest.fixture(scope="session")
def local_ok() -> bool:
    """True when the real local sandbox starts here; tests that need it skip otherwise."""
    try:
        from sandgym.sandbox.local import LocalSandbox

        LocalSandbox().close()
    except (SandboxError, ImportError) as exc:
        pytest.skip(f"local sandbox unavailable: {exc}")
    return True


@pytest.fixture
def fake_factory():
    made: list[FakeSandbox] = []

    def factory(task):
        sb = FakeSandbox()
        made.append(sb)
        return sb

    factory.made = made  # type: ignore[attr-defined]
    yield factory
    for sb in made:
        sb.close()
