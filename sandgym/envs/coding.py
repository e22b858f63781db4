"""Coding environments: ``sandgym/Coding-v0`` (write or fix code; hidden tests decide) and ``sandgym/RepoFix-v0``."""

from __future__ import annotations

from typing import Any

from sandgym.envs.tool_env import CodeAction, ToolEnv
from sandgym.tasks.task import Task

__all__ = ["CodingEnv", "RepoFixEnv"]


class CodingEnv(ToolEnv):
    """Implement or fix Python code in a workspace; the hidden tests of the coding suite decide."""

    default_suite = "coding:train"

    def __init__(self, tasks: Any = None, *, code_action: CodeAction = "submit", **kwargs: Any) -> None:
        super().__init__(tasks, code_action=code_action, **kwargs)


class RepoFixEnv(CodingEnv):
    """A multi-file package with a failing behaviour: explore, edit and test; hidden tests include regressions."""

    default_suite = "coding/repo_fix:train"

    def task_filter(self, task: Task) -> bool:
        return task.family == "repo_fix"
