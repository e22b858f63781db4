"""Shared fixtures of the sandbox tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sandbox.fake_e2b import FakeE2B


@pytest.fixture()
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeE2B]:
    """The loopback fake of E2B's HTTP API, running, with the SDK's environment pointed at it."""
    with FakeE2B() as server:
        for name in ("E2B_API_URL", "E2B_SANDBOX_URL"):
            monkeypatch.setenv(name, server.url)
        monkeypatch.setenv("E2B_API_KEY", server.api_key)
        monkeypatch.delenv("E2B_DOMAIN", raising=False)
        yield server
