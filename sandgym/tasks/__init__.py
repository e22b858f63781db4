"""Tasks: the typed task model, loaders, importers, validation and the built-in suites."""

from sandgym.tasks.load import load_hf, load_jsonl, load_path, save_folder, save_jsonl, validate_path
from sandgym.tasks.registry import list_suites, load_suite, parse_suite_spec
from sandgym.tasks.suites.base import FamilySpec
from sandgym.tasks.task import Reference, Task, TaskLimits, Verifier
from sandgym.tasks.validate import Problem

__all__ = [
    "FamilySpec",
    "Problem",
    "Reference",
    "Task",
    "TaskLimits",
    "Verifier",
    "list_suites",
    "load_hf",
    "load_jsonl",
    "load_path",
    "load_suite",
    "parse_suite_spec",
    "save_folder",
    "save_jsonl",
    "validate_path",
]
