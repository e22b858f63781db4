"""Registers sandgym's environments with Gymnasium (and third-party ones from the ``sandgym.envs`` group)."""

from __future__ import annotations


def register_envs() -> None:
    """Register every built-in env id; cheap (entry points are strings, nothing heavy is imported)."""
