"""Sandbox backends by name: a registry (``local``, ``unsafe-local``, ``e2b``, plugins) and ``make_sandbox``.

A backend is a callable ``(limits, *, requirements=(), **kwargs) -> Sandbox``. Register your own with
``register_backend("mine", factory)`` or, from a package, the entry point group ``sandgym.sandboxes``
(``mine = "my_pkg.sandbox:make"``); ``make_sandbox("mine")`` then builds it, ToolEnv's ``backend="mine"`` and
``rollout.sandbox = "mine"`` use it. Every backend should pass the conformance suite in
``tests/sandbox/conformance.py`` (run it against yours with ``run_conformance(factory)``).
"""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import Any

from sandgym.errors import SandboxError
from sandgym.sandbox.local import LocalSandbox
from sandgym.sandbox.protocol import Limits, Sandbox
from sandgym.sandbox.pyenv import ensure_env

BackendFactory = Callable[..., Sandbox]
"""``factory(limits, *, requirements=(), **kwargs) -> Sandbox``."""

ENTRY_POINT_GROUP = "sandgym.sandboxes"
_REGISTRY: dict[str, BackendFactory] = {}
_plugins_loaded = False


def _local(limits: Limits, *, requirements: Sequence[str] = (), **kwargs: Any) -> Sandbox:
    if requirements:
        kwargs["python_env"] = ensure_env(requirements)
    return LocalSandbox(limits, **kwargs)


def _unsafe_local(limits: Limits, *, requirements: Sequence[str] = (), **kwargs: Any) -> Sandbox:
    """The rlimits-only fallback when namespaces are refused (loud warning; not for untrusted code)."""
    return _local(limits, requirements=requirements, allow_weak_isolation=True, **kwargs)


def _e2b(limits: Limits, *, requirements: Sequence[str] = (), **kwargs: Any) -> Sandbox:
    from sandgym.sandbox.e2b import E2BSandbox  # the e2b SDK is optional: imported only when used

    return E2BSandbox(limits=limits, requirements=requirements, **kwargs)


def register_backend(name: str, factory: BackendFactory, *, replace: bool = False) -> None:
    """Make ``factory`` available as ``make_sandbox(name)``; ValueError if the name is taken (unless ``replace``)."""
    if not name or name == "auto" or not name.replace("-", "_").isidentifier():
        raise ValueError(f"backend name {name!r} must be a word like 'my-cloud' (and not 'auto')")
    if name in _REGISTRY and not replace and _REGISTRY[name] is not factory:
        raise ValueError(f"sandbox backend {name!r} is already registered; pass replace=True to override it")
    _REGISTRY[name] = factory


def _load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in _REGISTRY:
            continue
        try:
            register_backend(ep.name, ep.load())
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not hide the built-in backends
            logging.getLogger(__name__).warning("sandbox backend plugin %r (%s) failed to load: %s",
                                                ep.name, ep.value, exc)


def backends() -> tuple[str, ...]:
    """Every registered backend name (built-ins, then plugins), plus ``auto``."""
    _load_plugins()
    return (*_REGISTRY, "auto")


def resolve_backend(backend: str = "auto") -> str:
    """The concrete backend name: "auto" means e2b when ``E2B_API_KEY`` is set, else local."""
    if backend == "auto":
        return "e2b" if os.environ.get("E2B_API_KEY") else "local"
    if backend not in _REGISTRY:
        _load_plugins()
    if backend not in _REGISTRY:
        names = backends()
        close = difflib.get_close_matches(backend, names, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise SandboxError(f"unknown sandbox backend {backend!r}; choose one of {', '.join(names)}.{hint}")
    return backend


def make_sandbox(backend: str = "auto", limits: Limits | None = None, *, requirements: Sequence[str] = (),
                 **kwargs: Any) -> Sandbox:
    """Create a sandbox of a registered backend.

    ``requirements``: the task's packages (``Task.requirements``): a cached host environment mounted read-only
    (local backends, ``sandgym.sandbox.pyenv``) or installed into the VM (E2B).
    """
    name = resolve_backend(backend)
    return _REGISTRY[name](limits or Limits(), requirements=tuple(requirements), **kwargs)


for _name, _factory in (("local", _local), ("unsafe-local", _unsafe_local), ("e2b", _e2b)):
    register_backend(_name, _factory)

BACKENDS = ("local", "e2b", "unsafe-local", "auto")
"""The built-in names (``backends()`` also lists plugins)."""
