"""Interoperability with the environment ecosystem (docs/INTEROP.md); sits above rollout, below the CLI.

- ``sandgym.interop.harbor``: Harbor task directories -> Tasks (``sandgym tasks import --format harbor``);
- ``sandgym.interop.openenv``: serve a sandgym env over OpenEnv's HTTP/WebSocket protocol (``sandgym serve``);
- ``sandgym.interop.verifiers``: ``load_environment(...)``, a sandgym env as a ``verifiers`` MultiTurnEnv; and
  ``register_verifiers_env(...)``, a verifiers env as sandgym Tasks scored by its rubric (a host-side verifier).

Importing this package registers the ``harbor`` import format with ``sandgym.tasks.importers``; the heavy
third-party packages (``openenv-core``, ``verifiers``) load only when their module is used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sandgym.interop.harbor import import_harbor
from sandgym.tasks.importers import register_importer
from sandgym.tasks.task import Task


def _import_harbor(path: str | Path, *, split: str = "heldout", **kwargs: Any) -> list[Task]:
    return import_harbor(path, split=split, **kwargs)


register_importer("harbor", _import_harbor)

__all__: list[str] = []
