"""``make_sandbox``: pick a backend by name ("local", "e2b", "unsafe-local" or "auto")."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from sandgym.errors import SandboxError
from sandgym.sandbox.protocol import Limits, Sandbox

BACKENDS = ("local", "e2b", "unsafe-local", "auto")


def resolve_backend(backend: str = "auto") -> str:
    """The concrete backend name: "auto" means e2b when ``E2B_API_KEY`` is set, else local."""
    if backend not in BACKENDS:
        import difflib

        close = difflib.get_close_matches(backend, BACKENDS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise SandboxError(f"unknown sandbox backend {backend!r}; choose one of {', '.join(BACKENDS)}.{hint}")
    if backend == "auto":
        return "e2b" if os.environ.get("E2B_API_KEY") else "local"
    return backend


def make_sandbox(backend: str = "auto", limits: Limits | None = None, *, requirements: Sequence[str] = (),
                 **kwargs: Any) -> Sandbox:
    """Create a sandbox. ``unsafe-local`` allows the rlimits-only fallback when namespaces are refused.

    ``requirements``: the task's packages (``Task.requirements``): a cached host environment mounted read-only
    (local backends, ``sandgym.sandbox.pyenv``) or installed into the VM (E2B).
    """
    name = resolve_backend(backend)
    limits = limits or Limits()
    if name == "e2b":
        from sandgym.sandbox.e2b import E2BSandbox  # written separately; imported lazily (optional SDK)

        return E2BSandbox(limits=limits, requirements=requirements, **kwargs)
    from sandgym.sandbox.local import LocalSandbox

    if requirements:
        from sandgym.sandbox.pyenv import ensure_env

        kwargs["python_env"] = ensure_env(requirements)
    if name == "unsafe-local":
        kwargs["allow_weak_isolation"] = True
    return LocalSandbox(limits, **kwargs)
