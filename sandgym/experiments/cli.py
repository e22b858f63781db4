"""``sandgym train`` and ``sft`` (from :mod:`sandgym.train.cli`, with periodic evaluation wired in as the loop's
hook) and ``sandgym sweep``."""

from __future__ import annotations

from typing import Any

from sandgym.experiments import sweep_cli
from sandgym.experiments.periodic_eval import maybe_periodic_eval
from sandgym.train import cli as train_cli


def add_commands(sub: Any) -> None:
    train_cli.add_commands(sub, on_eval=maybe_periodic_eval)
    sweep_cli.add_commands(sub)
