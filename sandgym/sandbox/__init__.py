"""Sandboxes: every piece of model-written code runs here, never in the harness process.

``LocalSandbox`` (bubblewrap namespaces + a dedicated uid + rlimits) is the default; ``E2BSandbox`` runs the same
interface on E2B when ``E2B_API_KEY`` is set. Backends are imported lazily so the ``e2b`` SDK is optional.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sandgym.sandbox.protocol import (
    CodeSession,
    ExecResult,
    IsolationReport,
    Limits,
    Sandbox,
    SandboxError,
    TestOutcome,
    TestReport,
)

if TYPE_CHECKING:
    from sandgym.sandbox.e2b import E2BSandbox
    from sandgym.sandbox.factory import make_sandbox
    from sandgym.sandbox.local import LocalSandbox
    from sandgym.sandbox.pool import SandboxPool

_LAZY = {
    "LocalSandbox": "sandgym.sandbox.local",
    "E2BSandbox": "sandgym.sandbox.e2b",
    "SandboxPool": "sandgym.sandbox.pool",
    "make_sandbox": "sandgym.sandbox.factory",
}

__all__ = [
    "CodeSession",
    "E2BSandbox",
    "ExecResult",
    "IsolationReport",
    "Limits",
    "LocalSandbox",
    "Sandbox",
    "SandboxError",
    "SandboxPool",
    "TestOutcome",
    "TestReport",
    "make_sandbox",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sandgym.sandbox' has no attribute {name!r}")
