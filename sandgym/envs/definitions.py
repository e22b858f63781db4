"""The ``write_definition`` code action: a reply's code block replaces one function or method of a module.

A task that names a ``definition`` (``metadata["definition"]``: ``function`` or ``Class.method``, the lower rungs of
a repository's ladder, docs/PRIVATE_DATA.md) gets its code block spliced into the entry file in place of that
definition (``sandgym.tasks.definitions``), instead of the block becoming the whole file.
"""

from __future__ import annotations

from sandgym.envs.context import ToolContext
from sandgym.envs.tools import Tool, ToolError
from sandgym.tasks.definitions import DefinitionError, splice_definition

__all__ = ["WRITE_DEFINITION", "write_definition"]


def write_definition(ctx: ToolContext, path: str, name: str, code: str) -> str:
    """Replace one function or method of a workspace file with the definition of that name in ``code``.

    Args:
        path: File path relative to the workspace.
        name: The definition to replace: ``function`` or ``Class.method``.
        code: Python source holding the new definition (other lines are ignored).
    """
    try:
        new = splice_definition(ctx.sandbox.read_file(path), name, code)
    except DefinitionError as exc:
        raise ToolError(str(exc)) from exc
    ctx.sandbox.write_file(path, new)
    return f"Replaced `{name}` in {path}."


WRITE_DEFINITION = Tool.from_function(write_definition)
"""The code action of a task that names a ``definition`` (``metadata["definition"]``): never offered as a tool."""
