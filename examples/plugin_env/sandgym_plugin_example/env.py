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


class StatsEnv(ToolEnv):
    """Statistics of a data file, written to result.json; scored on the host by ``plugin_example.stats@v1``."""

    default_suite = "stats:train"
    PROMPT = ("You compute statistics of data files. Tools: python (a calculator), list_files, read_file, write_file, submit. Call one "
              "tool per turn as <tool_call>{{\"name\": ..., \"arguments\": {{...}}}}</tool_call>.")

    def __init__(self, tasks: Any = None, **kwargs: Any) -> None:
        kwargs.setdefault("tools", builtin_tools(["python", "list_files", "read_file", "write_file", "submit"]))
        kwargs.setdefault("system_prompt", self.PROMPT)
        super().__init__(tasks, **kwargs)
