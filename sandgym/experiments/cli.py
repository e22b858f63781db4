"""``sandgym train`` and ``sft`` (from :mod:`sandgym.train.cli`, with periodic evaluation and the judge's
re-calibration wired in as the loop's hook), ``sandgym sweep``, ``sandgym demo`` and ``sandgym recipe repo``."""

from __future__ import annotations

import argparse
from typing import Any

from sandgym.experiments import repo_recipe, sweep_cli
from sandgym.experiments.demo import DESCRIPTION, add_arguments, run, track_lines
from sandgym.experiments.periodic_eval import training_hooks
from sandgym.train import cli as train_cli


def add_commands(sub: Any) -> None:
    train_cli.add_commands(sub, on_eval=training_hooks)
    sweep_cli.add_commands(sub)
    demo = sub.add_parser("demo", help="the demo: SFT, RL and base / SFT / SFT + RL evaluation of one track "
                          "(`sandgym demo --help` lists the tracks)", description=DESCRIPTION, epilog=track_lines(),
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(demo)
    demo.set_defaults(func=run)
    repo_recipe.add_commands(sub)
