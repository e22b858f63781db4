"""The ``sandgym`` command. Thin: each subpackage adds its subcommands; handlers build a config and call run()."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from sandgym import __version__
from sandgym.errors import SandgymError
from sandgym.experiments.flywheel_cli import add_commands as add_feedback_loop
from sandgym.interop.cli import add_tasks_export
from sandgym.private.cli import add_from_repo

# Each module defines ``add_commands(subparsers)``; handlers are set with ``set_defaults(func=...)`` and return
# an exit code. Modules import heavy dependencies inside their handlers so ``sandgym --help`` stays fast.
COMMAND_MODULES: tuple[str, ...] = (
    "sandgym.rollout.cli",  # run, envs, rewards
    "sandgym.tasks.cli",
    "sandgym.experiments.cli",  # train + sft (sandgym.train.cli, with the periodic evaluation hook), sweep
    "sandgym.evaluate.cli",
    "sandgym.experiments.transfer",  # transfer (a demo run's policies on a public benchmark)
    "sandgym.sandbox.cli",
    "sandgym.private.cli",
    "sandgym.interop.cli",  # serve (OpenEnv); registers the harbor format of `tasks import`
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sandgym",
        description="Post-train LLM agents with RL on multi-step tasks in a real sandbox.",
        epilog="`sandgym COMMAND --help` for one command; docs/CLI.md has them all, docs/CONFIG.md every config key.",
    )
    parser.add_argument("--version", action="version", version=f"sandgym {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        added = importlib.import_module(name).add_commands(sub)
        if name == "sandgym.tasks.cli":  # `tasks from-repo` (sandgym.private), `tasks export` (sandgym.interop)
            add_from_repo(added)
            add_tasks_export(added)
        if name == "sandgym.private.cli":  # `feedback train`, `feedback simulate` (sandgym.experiments)
            add_feedback_loop(added)
    return parser


def _show_progress_messages() -> None:
    """sandgym's own INFO messages (resumed from..., sweep run 2/6...) go to stderr, unless logging is configured."""

    logger = logging.getLogger("sandgym")
    if not logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("sandgym: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 0

    _show_progress_messages()
    try:
        return int(func(args) or 0)
    except SandgymError as exc:
        print(f"sandgym: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
