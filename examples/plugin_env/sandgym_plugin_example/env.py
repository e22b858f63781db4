"""The plugin's environment: mental arithmetic with a calculator (the python tool) and submit."""

from __future__ import annotations

from typing import Any

from sandgym.envs.builtin_tools import builtin_tools
from sandgym.envs.tool_env import ToolEnv


class ArithEnv(ToolEnv):
    """Answer arithmetic questions; the python tool is a calculator, submit gives the number."""

    default_suite = "arith:train"

    def __init__(self, tasks: Any = None, **kwargs: Any) -> None:
        kwargs.setdefault("tools", builtin_tools(["python", "submit"]))
        super().__init__(tasks, **kwargs)
