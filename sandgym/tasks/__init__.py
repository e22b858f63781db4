"""Tasks: the typed task model, loaders, importers, validation and the built-in suites."""

from sandgym.tasks.task import Reference, Task, TaskLimits, Verifier

__all__ = ["Task", "Verifier", "Reference", "TaskLimits"]
