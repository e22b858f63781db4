"""The error hierarchy. Every message names the bad value, what is allowed, and the fix."""

from __future__ import annotations


class SandgymError(Exception):
    """Base class of every error sandgym raises on purpose."""


class ConfigError(SandgymError, ValueError):
    """A config file or command-line override is invalid (the message names the key, the value and the fix)."""


class TaskError(SandgymError, ValueError):
    """A task file or task definition is invalid (the message names the file, line, field and fix)."""


class SandboxError(SandgymError, RuntimeError):
    """Infrastructure failure of a sandbox: it could not start, died, or its backend is unreachable.

    Never the agent's fault: callers retry or drop the sample, never score it as a failure of the agent.
    """


class ModelNotAvailableError(SandgymError, RuntimeError):
    """A requested model is not available offline (the message says which name and how to provide it)."""
