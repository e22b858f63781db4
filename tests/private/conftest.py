"""Keep pytest out of the fixture repositories (their tests run only inside the sandbox); skip what needs a local
sandbox where this machine cannot make one."""

from __future__ import annotations

import pytest

collect_ignore = ["fixtures"]


def sandbox_or_skip() -> None:
    """Skip the calling test when no local sandbox can be made here (the sandbox's own tests cover that)."""
    from sandgym.sandbox import LocalSandbox

    try:
        LocalSandbox().close()
    except Exception as exc:  # no namespaces here
        pytest.skip(f"local sandbox unavailable: {exc}")
