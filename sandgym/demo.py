"""``python -m sandgym.demo`` (what ``make demo`` runs): the demo lives in :mod:`sandgym.experiments.demo`."""

import sys

from sandgym.experiments.demo import check_same_config, console_main, eval_config, evaluate, main, report

__all__ = ["check_same_config", "console_main", "eval_config", "evaluate", "main", "report"]

if __name__ == "__main__":
    sys.exit(console_main())
