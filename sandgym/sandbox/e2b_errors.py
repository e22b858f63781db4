"""How E2B SDK failures map onto sandgym: the agent's failures become ``ExecResult`` fields, the
infrastructure's become ``SandboxError`` with a message that says what to fix.

The ``e2b`` SDK is an optional extra (``pip install 'sandgym[e2b]'``); without it the exception names below are
placeholders that nothing raises, and ``E2BSandbox()`` says how to install it.
"""

from __future__ import annotations

import re

from sandgym.errors import SandboxError

try:
    from e2b import (
        AuthenticationException,
        CommandExitException,
        FileNotFoundException,
        NotEnoughSpaceException,
        RateLimitException,
        SandboxException,
        SandboxNotRunningException,
        SandboxUnreachableException,
        ServiceBusyException,
        TimeoutException,
    )

    HAVE_E2B = True
except ImportError:  # pragma: no cover - exercised only without the extra

    class _NotInstalled(Exception):
        """Stands in for an SDK exception when ``e2b`` is not installed; never raised."""

    AuthenticationException = CommandExitException = FileNotFoundException = _NotInstalled  # type: ignore
    NotEnoughSpaceException = RateLimitException = SandboxException = _NotInstalled  # type: ignore
    SandboxNotRunningException = SandboxUnreachableException = _NotInstalled  # type: ignore
    ServiceBusyException = TimeoutException = _NotInstalled  # type: ignore
    HAVE_E2B = False

__all__ = [
    "AuthenticationException",
    "CommandExitException",
    "FileNotFoundException",
    "HAVE_E2B",
    "NotEnoughSpaceException",
    "SandboxException",
    "TimeoutException",
    "cap_text",
    "infra_error",
    "is_sandbox_gone",
    "looks_oom",
]

INSTALL_HINT = "install the E2B extra: pip install 'sandgym[e2b]'"


def infra_error(exc: BaseException, doing: str) -> SandboxError:
    """A ``SandboxError`` for an SDK/transport failure while ``doing`` something, with the fix in the message."""
    detail = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, AuthenticationException):
        fix = "set E2B_API_KEY (or pass api_key=) to a valid key from https://e2b.dev/dashboard"
    elif isinstance(exc, RateLimitException):
        fix = "E2B rate-limited this account; lower the number of concurrent sandboxes (pool size) or retry later"
    elif isinstance(exc, ServiceBusyException):
        fix = "E2B has no capacity right now; retry after a short wait"
    elif is_sandbox_gone(exc):
        fix = (
            "the E2B sandbox is gone or unreachable (killed, or its lifetime ran out); create a new one, "
            "and raise lifetime_s if episodes outlive it"
        )
    elif isinstance(exc, SandboxException):
        fix = (
            "E2B refused the request; check the template name, your plan's limits and https://status.e2b.dev"
        )
    elif isinstance(exc, OSError):
        fix = "cannot reach E2B; check the network, E2B_DOMAIN / E2B_API_URL, and any proxy settings"
    else:
        fix = "unexpected failure of the E2B SDK; retry, and report it if it persists"
    return SandboxError(f"E2B sandbox failed while {doing} ({detail}); {fix}")


def is_sandbox_gone(exc: BaseException) -> bool:
    """True when the SDK says the sandbox itself is dead or unreachable (not that a command was slow)."""
    if isinstance(exc, (SandboxNotRunningException, SandboxUnreachableException)):
        return True
    return isinstance(exc, TimeoutException) and "sandbox was killed" in str(exc)


def cap_text(text: str, max_bytes: int) -> tuple[str, bool]:
    """Keep at most ``max_bytes`` UTF-8 bytes of ``text``; the flag says whether anything was cut.

    >>> cap_text("héllo", 2)
    ('h', True)
    """
    raw = text.encode("utf-8", "replace")
    if len(raw) <= max_bytes:
        return text, False
    return raw[:max_bytes].decode("utf-8", "ignore"), True


_OOM_RE = re.compile(r"MemoryError|Cannot allocate memory|std::bad_alloc|out of memory")


def looks_oom(exit_code: int | None, stderr: str) -> bool:
    """True when a failed run's stderr ends with an allocation failure (RLIMIT_AS makes ``malloc`` fail)."""
    return exit_code not in (0, None) and bool(_OOM_RE.search(stderr[-4096:]))
