"""``sandgym recipe repo PATH --out DIR``: a team's repository in, a trained adapter scored on held-out code out.

One command, in stages that a rerun with the same ``--out`` resumes:

1. ``sandgym tasks from-repo``: verified tasks from the repository's own tests at each rung of the ladder
   (``--rungs``, easiest first: ``complete`` a definition with its module in view, ``fix`` it from the failing test
   run, then the tool-using ``reimplement``, ``bugfix``, ``locate``), graded out of the agent's reach, split by
   source file (or top-level definition) the same way at every rung; ``DIR/tasks.jsonl``,
   ``DIR/from_repo_report.json``;
2. the ladder (``sandgym.experiments.ladder``): the base model probed on each rung's train tasks, an SFT warm start
   and GRPO on the rungs where it has a foothold (``DIR/train.toml``, kept when present so a user may edit it), then
   base, one-shot base, SFT and SFT + RL on the held-out tasks of the rungs RL trained on (``--score-all``: every
   rung), paired; ``DIR/run/REPORT.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from sandgym.errors import ConfigError
from sandgym.experiments.ladder import SIZES, ladder_report, run_ladder
from sandgym.private.fromrepo import KINDS, REPORT_NAME, TASKS_NAME, FromRepoConfig
from sandgym.private.fromrepo import run as from_repo
from sandgym.private.recipe import TRAIN_NAME

RUN_NAME = "run"
"""The recipe's training, evaluation and report go to ``DIR/run``."""


def add_commands(sub: Any) -> None:
    recipe = sub.add_parser("recipe", help="end-to-end recipes: `recipe repo PATH` trains and scores a model on "
                                           "your repository's code")
    rsub = recipe.add_subparsers(dest="recipe_command", metavar="RECIPE")
    recipe.set_defaults(func=lambda args: (recipe.print_help(), 0)[1])
    p = rsub.add_parser("repo", help="tasks from a repository at each rung of a ladder, the base model probed, SFT "
                                     "and RL where it has a foothold, then base / one-shot / SFT / SFT + RL per "
                                     "rung on held-out code, with a report",
                        description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("path", help="root of a local Python repository with a pytest suite")
    p.add_argument("--out", required=True, help="output folder: tasks, train.toml, run/ (training, eval, report)")
    p.add_argument("--model", default="smollm2-135m", help="the model to train (a local directory or a cached hub "
                                                             "id; default smollm2-135m, the embedded one)")
    p.add_argument("--rungs", default=None,
                   help=f"the ladder's rungs to make and score, comma list of {', '.join(KINDS)} (default: "
                        f"{','.join(SIZES['cpu'].rungs)} with --size cpu, all with --size gpu)")
    p.add_argument("--size", choices=list(SIZES), default="cpu",
                   help="budgets: cpu (default; the embedded model on a 2-core CPU within an hour) or gpu (a bigger "
                        "model on an accelerator: more demonstrations and RL steps, every rung)")
    p.add_argument("--max-tasks", type=int, default=160, help="verified candidates to make at most, over all rungs "
                   "(default 160; a train definition's extra cut points of `complete` are not counted)")
    p.add_argument("--heldout-fraction", type=float, default=0.3, help="share of source files held out (0.3)")
    p.add_argument("--requirement", "-r", action="append", default=[], metavar="SPEC",
                   help="a package the project or its tests import (repeatable; as for tasks from-repo)")
    p.add_argument("--exclude-tests", action="append", default=[], metavar="GLOB",
                   help="test files to leave out (repeatable); for the scrub and snapshot options of tasks "
                        "from-repo, run it first into --out: the recipe reuses the tasks there")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds for the baseline test run (default 120)")
    p.add_argument("--seed", type=int, default=0, help="seed of the tasks and the split")
    p.add_argument("--samples", type=int, default=None, help="samples per held-out task (default: the size's, 1 on "
                   "cpu)")
    p.add_argument("--score-all", action="store_true", help="score every rung's held-out tasks (the default of "
                   "--size gpu); with --size cpu only the rungs RL trained or climbed to are scored, and a rung no probe "
                   "solved a task of is reported out of reach from its probes")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a key of the training config, e.g. --set optim.steps=8 (repeatable)")
    p.set_defaults(func=cmd_recipe_repo)


def make_tasks(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Stage 1, or the report of an earlier run's tasks in ``out``."""
    report_path = out / REPORT_NAME
    if (out / TASKS_NAME).is_file() and report_path.is_file():
        print(f"[recipe] tasks: reusing {out / TASKS_NAME} (--rungs, --max-tasks, --heldout-fraction, -r and "
              f"--exclude-tests apply only to a new --out; --model and --size only when {out / TRAIN_NAME} is "
              "missing)",
              file=sys.stderr, flush=True)
        report: dict[str, Any] = json.loads(report_path.read_text(encoding="utf-8"))
    else:
        config = FromRepoConfig(repo=args.path, out=str(out), kinds=rungs(args), max_tasks=args.max_tasks,
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
    return report


def rungs(args: argparse.Namespace) -> tuple[str, ...]:
    """The rungs asked for, easiest first; ConfigError names an unknown one."""
    asked = tuple(k.strip() for k in args.rungs.split(",") if k.strip()) if args.rungs else SIZES[args.size].rungs
    bad = [k for k in asked if k not in KINDS]
    if bad or not asked:
        raise ConfigError(f"--rungs {args.rungs!r}: each must be one of {', '.join(KINDS)}, e.g. --rungs complete,fix")
    return tuple(k for k in KINDS if k in asked)


def cmd_recipe_repo(args: argparse.Namespace) -> int:
    rungs(args)  # an unknown rung is refused before anything is made
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"sandgym recipe repo: {args.path}, writing to {out} (tasks, rungs/, probe/, {TRAIN_NAME}; training, "
          f"evaluation and REPORT.md in {out / RUN_NAME})", file=sys.stderr, flush=True)
    t = time.perf_counter()
    made = not (out / TASKS_NAME).is_file()
    make_tasks(args, out)
    size = SIZES[args.size]
    if args.samples:
        size = dataclasses.replace(size, samples=args.samples)
    if args.score_all:
        size = dataclasses.replace(size, score_all=True)
    summary = run_ladder(out, out / TASKS_NAME, rungs(args), args.model, size, list(args.overrides),
                         tasks_s=time.perf_counter() - t if made else None)
    print("\n" + ladder_report(summary).markdown())
    print(f"report:      {out / RUN_NAME / 'REPORT.md'} ({out / RUN_NAME / 'REPORT.html'})")
    print(f"training:    {out / RUN_NAME / 'train'} (metrics.jsonl, sft/, checkpoints/)")
    print(f"evaluation:  {out / RUN_NAME / 'eval'}/<rung>/<policy>/ (episodes.jsonl)")
    return 0
