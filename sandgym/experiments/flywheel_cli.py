"""``sandgym feedback train`` and ``sandgym feedback simulate`` (added to ``sandgym feedback`` by :mod:`sandgym.cli`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sandgym.experiments import feedback_loop, flywheel
from sandgym.private.feedback import RewardMapping
from sandgym.train.config import load_config


def add_commands(feedback_sub: Any) -> None:
    """Register ``train`` and ``simulate`` on the ``sandgym feedback`` sub-parsers."""
    p = feedback_sub.add_parser("train", help="import a feedback log, train on it (reward-weighted SFT), evaluate")
    p.add_argument("logs", help="adoption log JSONL (prompt, output, outcome, edited_output, ...)")
    p.add_argument("--config", default=None, help="training TOML: model, [rollout] (system prompt), [sft], [eval] "
                                                  "(e.g. examples/quickstart.toml)")
    p.add_argument("--out", required=True, help="output folder: imported.jsonl, sft/adapter, eval/")
    p.add_argument("--eval-suite", action="append", default=[], metavar="SUITE",
                   help="held-out suite (repeatable; default: each training suite's :heldout split)")
    p.add_argument("--no-eval", action="store_true", help="stop after training")
    p.add_argument("--no-baseline", action="store_true", help="do not evaluate the starting policy for a paired gain")
    _common(p)
    _mapping(p)
    p.add_argument("--skip-bad", action="store_true", help="keep the valid records, report malformed ones")
    p.set_defaults(func=cmd_train)

    s = feedback_sub.add_parser("simulate", help="the flywheel with hidden tests as the user: rounds of suggest, "
                                                 "judge, import, train, held-out adoption")
    s.add_argument("config", help="training TOML with a single-turn [rollout] (e.g. examples/quickstart.toml)")
    s.add_argument("--out", required=True, help="output folder: rounds.json, ROUNDS.md, round-N/")
    s.add_argument("--rounds", type=int, default=3, help="training rounds after round 0 (default 3)")
    s.add_argument("--prompts", type=int, default=48, help="train-split prompts per round (default 48)")
    _common(s)
    _mapping(s)
    s.set_defaults(func=cmd_simulate)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a training-config key, e.g. --set sft.epochs=2 --set eval.n_tasks=16 (repeatable)")


def _mapping(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mapping", default="accepted=1.0,edited=0.5,rejected=0.0",
                   help="outcome -> reward, which is also the SFT weight (default: accepted=1.0,edited=0.5,rejected=0.0)")
    p.add_argument("--edit-distance-scale", type=float, default=None,
                   help="edited reward falls linearly from accepted to rejected over this many characters of edit")


def cmd_train(args: argparse.Namespace) -> int:
    config = feedback_loop.FeedbackTrainConfig(
        logs=args.logs, train=load_config(args.config, args.overrides), out=args.out,
        mapping=RewardMapping.parse(args.mapping, args.edit_distance_scale), skip_bad=args.skip_bad,
        eval_suites=tuple(args.eval_suite), evaluate=not args.no_eval, baseline=not args.no_baseline)
    print(f"sandgym feedback train: writing to {args.out} (imported.jsonl, sft/adapter, eval/)", file=sys.stderr,
          flush=True)
    result = feedback_loop.run(config)
    print(f"adapter: {result.adapter}" + (f"\nevaluation: {result.eval_dir}" if result.eval_dir else ""))
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    config = flywheel.FlywheelConfig(train=load_config(args.config, args.overrides), out=args.out,
                                     rounds=args.rounds, prompts=args.prompts,
                                     mapping=RewardMapping.parse(args.mapping, args.edit_distance_scale))
    print(f"sandgym feedback simulate: {args.rounds} round(s), writing to {args.out} (rounds.json, ROUNDS.md, "
          "round-N/)", file=sys.stderr, flush=True)
    flywheel.run(config)
    print(f"rounds: {args.out}/rounds.json, table: {args.out}/ROUNDS.md")
    return 0
