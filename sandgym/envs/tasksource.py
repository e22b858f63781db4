"""Lazy task lists for environments: a suite is loaded on first use, not at ``gymnasium.make`` time."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sandgym.envs.demo_tasks import demo_tasks
from sandgym.errors import ConfigError
from sandgym.tasks.registry import load_suite
from sandgym.tasks.task import Task

__all__ = ["TaskSource", "load_tasks"]


def load_tasks(spec: str, *, n: int | None = None, seed: int = 0, difficulty: int | None = None,
               **suite_kwargs: Any) -> list[Task]:
    """``sandgym.tasks.registry.load_suite`` (suite name, JSONL file or task folder) as a list."""
    return list(load_suite(spec, n=n, seed=seed, difficulty=difficulty, **suite_kwargs))


class TaskSource:
    """The tasks an environment draws from: a given list, or a suite spec resolved on first access.

    ``filter`` (the env's ``task_filter``) narrows a suite; an explicit list of tasks is used as given.
    """

    def __init__(
        self,
        spec: Sequence[Task] | str | None,
        *,
        n: int | None = None,
        seed: int = 0,
        difficulty: int | None = None,
        filter: Callable[[Task], bool] | None = None,
        suite_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.spec = spec
        self.suite_kwargs = dict(suite_kwargs or {})
        self.n, self.seed, self.difficulty = n, seed, difficulty
        self.filter = filter
        self._tasks: list[Task] | None = None
        self._by_id: dict[str, Task] = {}

    @property
    def tasks(self) -> list[Task]:
        if self._tasks is None:
            if self.spec is None:  # ToolEnv() without a suite: the three demo tasks
                tasks = demo_tasks()
            elif isinstance(self.spec, str):
                tasks = load_tasks(self.spec, n=self.n, seed=self.seed, difficulty=self.difficulty,
                                   **self.suite_kwargs)
            else:
                tasks = list(self.spec)
            if self.filter is not None and isinstance(self.spec, str):  # narrows suites, never explicit lists
                tasks = [t for t in tasks if self.filter(t)]
            if not tasks:
                raise ConfigError(f"no tasks for {self.spec!r} (after this env's filter); pass tasks= or a suite")
            self._tasks = tasks
            self._by_id = {t.id: t for t in tasks}
        return self._tasks

    def get(self, task_id: str) -> Task:
        """The task with this id; an unknown id is an error with the closest ids."""
        self.tasks  # noqa: B018 - load
        if task_id not in self._by_id:
            close = difflib.get_close_matches(task_id, list(self._by_id), n=3)
            hint = f" Did you mean {close}?" if close else ""
            raise ConfigError(f"task id {task_id!r} is not in this env's tasks ({len(self._by_id)} tasks).{hint}")
        return self._by_id[task_id]
