"""``sandgym recipe repo PATH --out DIR``: a team's repository in, a trained adapter scored on held-out code out.

One command, in stages that a rerun with the same ``--out`` resumes:

1. ``sandgym tasks from-repo``: verified tasks from the repository's own tests (re-implement, bug fix and bug
   localisation from a report, ``--kinds``), graded out of the agent's reach, split by source file; writes
   ``DIR/tasks.jsonl``, ``DIR/from_repo_report.json`` and ``DIR/train.toml`` (the training config; kept when present,
   so a user may edit it before the next stages);
2. an SFT warm start on oracle demonstrations (the oracle searches, reads and edits, as a model must);
3. the warm start trained further on its own train-task episodes relabelled by the oracle (``--no-relabel`` skips);
4. GRPO on the train split;
5. base / SFT / SFT + RL on the held-out split (source files no training task targeted), paired over the same
   tasks and seeds, with completion by repository size for ``locate`` tasks; ``DIR/run/REPORT.md`` and ``.html``.

Stages 2-5 are ``sandgym demo --config DIR/train.toml --relabel --out DIR/run``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sandgym.errors import ConfigError
from sandgym.experiments import demo
from sandgym.private.fromrepo import KINDS, REPORT_NAME, TASKS_NAME, FromRepoConfig
from sandgym.private.fromrepo import run as from_repo
from sandgym.private.recipe import TRAIN_NAME, write_recipe

RUN_NAME = "run"
"""The recipe's training, evaluation and report go to ``DIR/run``."""
DEFAULT_KINDS = ("reimplement", "bugfix", "locate")
"""What the recipe makes by default: every kind (``tasks from-repo`` alone makes the first two)."""


def add_commands(sub: Any) -> None:
    recipe = sub.add_parser("recipe", help="end-to-end recipes: `recipe repo PATH` trains and scores a model on "
                                           "your repository's code")
    rsub = recipe.add_subparsers(dest="recipe_command", metavar="RECIPE")
    recipe.set_defaults(func=lambda args: (recipe.print_help(), 0)[1])
    p = rsub.add_parser("repo", help="tasks from a repository, SFT warm start, relabelled warm start, RL, then "
                                     "base / SFT / SFT + RL on held-out code, with a report",
                        description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("path", help="root of a local Python repository with a pytest suite")
    p.add_argument("--out", required=True, help="output folder: tasks, train.toml, run/ (training, eval, report)")
    p.add_argument("--model", default="smollm2-135m", help="the model to train (a local directory or a cached hub "
                                                             "id; default smollm2-135m, the embedded one)")
    p.add_argument("--kinds", default=",".join(DEFAULT_KINDS),
                   help=f"task kinds, comma list of {', '.join(KINDS)} (default: all)")
    p.add_argument("--max-tasks", type=int, default=48, help="verified tasks to make at most (default 48)")
    p.add_argument("--heldout-fraction", type=float, default=0.3, help="share of source files held out (0.3)")
    p.add_argument("--requirement", "-r", action="append", default=[], metavar="SPEC",
                   help="a package the project or its tests import (repeatable; as for tasks from-repo)")
    p.add_argument("--exclude-tests", action="append", default=[], metavar="GLOB",
                   help="test files to leave out (repeatable); for the scrub and snapshot options of tasks "
                        "from-repo, run it first into --out: the recipe reuses the tasks there")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds for the baseline test run (default 120)")
    p.add_argument("--seed", type=int, default=0, help="seed of the tasks, the split and the training")
    p.add_argument("--n-tasks", type=int, default=None, help="held-out tasks evaluated (default: all of them)")
    p.add_argument("--samples", type=int, default=2, help="samples per held-out task (default 2)")
    p.add_argument("--seeds", type=int, default=1, help="sampling seeds of the evaluation (default 1)")
    p.add_argument("--no-relabel", action="store_true", help="skip the relabelled warm start (stage 3)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a key of the training config, e.g. --set optim.steps=8 (repeatable)")
    p.set_defaults(func=cmd_recipe_repo)


def make_tasks(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Stage 1, or the report of an earlier run's tasks in ``out``; the train config is written when missing."""
    report_path = out / REPORT_NAME
    if (out / TASKS_NAME).is_file() and report_path.is_file():
        print(f"[recipe] tasks: reusing {out / TASKS_NAME} (--kinds, --max-tasks, --heldout-fraction, -r and "
              f"--exclude-tests apply only to a new --out; --model only when {out / TRAIN_NAME} is missing)",
              file=sys.stderr, flush=True)
        report: dict[str, Any] = json.loads(report_path.read_text(encoding="utf-8"))
    else:
        kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
        config = FromRepoConfig(repo=args.path, out=str(out), kinds=kinds, max_tasks=args.max_tasks,
                                heldout_fraction=args.heldout_fraction, seed=args.seed,
                                exclude_tests=tuple(args.exclude_tests), timeout_s=args.timeout,
                                requirements=tuple(args.requirement))
        print(f"[recipe] tasks from {args.path} -> {out / TASKS_NAME}", file=sys.stderr, flush=True)
        report = from_repo(config).report()
    splits = report["made_by_split"]
    print(f"[recipe] tasks: {report['made']} made {report['made_by_kind']}, splits {splits}, grading "
          f"{report.get('made_by_isolation')}", file=sys.stderr, flush=True)
    if not splits.get("train") or not splits.get("heldout"):
        raise ConfigError(f"{out / TASKS_NAME} has {splits.get('train', 0)} train and {splits.get('heldout', 0)} "
                          "held-out tasks; the recipe needs both: raise --max-tasks, change --heldout-fraction, or "
                          f"see {report_path} for why candidates were discarded")
    if not (out / TRAIN_NAME).is_file():
        write_recipe(out, model=args.model, n_train=splits["train"], n_heldout=splits["heldout"],
                     train_dir=(out / RUN_NAME / "train").as_posix())
    return report


def cmd_recipe_repo(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"sandgym recipe repo: {args.path}, writing to {out} (tasks, {TRAIN_NAME}; training, evaluation and "
          f"REPORT.md in {out / RUN_NAME})", file=sys.stderr, flush=True)
    report = make_tasks(args, out)
    loop = argparse.Namespace(track=demo.DEFAULT_TRACK, full=False, config=str(out / TRAIN_NAME),
                              out=str(out / RUN_NAME), n_tasks=args.n_tasks or report["made_by_split"]["heldout"],
                              samples=args.samples, seeds=args.seeds, overrides=list(args.overrides),
                              relabel=not args.no_relabel)
    return demo.run(loop)
