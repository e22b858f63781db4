"""``sandgym train`` and ``sft`` (from :mod:`sandgym.train.cli`, with periodic evaluation and the judge's
re-calibration wired in as the loop's hook), ``sandgym sweep`` and ``sandgym demo``."""

from __future__ import annotations

import argparse
from typing import Any

from sandgym.experiments import sweep_cli
from sandgym.experiments.demo import main
from sandgym.experiments.periodic_eval import training_hooks
from sandgym.train import cli as train_cli


def add_commands(sub: Any) -> None:
    train_cli.add_commands(sub, on_eval=training_hooks)
    sweep_cli.add_commands(sub)
    demo = sub.add_parser("demo", add_help=False, prefix_chars="+", help="the demo: SFT, RL and base/SFT/SFT+RL evaluation of one "
                          "track (--track long_context|single_turn|test_and_fix|json_tools|all; `sandgym demo --help`)")
    demo.add_argument("demo_args", nargs=argparse.REMAINDER)
    demo.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    return main(list(args.demo_args))
