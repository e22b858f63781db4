"""``sandgym feedback import``, ``sandgym judge calibrate`` and (hooked under ``tasks``) ``sandgym tasks from-repo``.

Heavy imports stay inside the handlers so that ``sandgym --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sandgym.private.calibrate import calibrate, load_judge_policy, load_labelled
from sandgym.private.feedback import RewardMapping, import_feedback
from sandgym.private.fromrepo import DEFAULT_KINDS, KINDS, REPORT_NAME, TASKS_NAME, FromRepoConfig, run
from sandgym.private.judge import JudgeReward
from sandgym.private.recipe import TRAIN_NAME, write_recipe
from sandgym.private.rungs import RUNGS
from sandgym.private.scrub import parse_patterns


def add_commands(subparsers: Any) -> Any:
    """Register ``sandgym feedback ...`` and ``sandgym judge ...``; returns the ``feedback`` sub-parsers (where
    :mod:`sandgym.cli` adds ``feedback train`` and ``feedback simulate``, which live in ``sandgym.experiments``)."""
    fb = subparsers.add_parser("feedback", help="user feedback logs: import (trajectories, pairs), train on them, "
                                                "simulate the flywheel")
    fb_sub = fb.add_subparsers(dest="feedback_command", metavar="ACTION")
    fb.set_defaults(func=lambda args: (fb.print_help(), 0)[1])
    p = fb_sub.add_parser("import", help="LOGS.jsonl of (prompt, output, outcome) -> trajectories + pairs")
    p.add_argument("logs", help="JSONL: prompt, output, outcome (accepted|edited|rejected), optional edit_distance, "
                                "edited_output, id, metadata")
    p.add_argument("--out", required=True, help="output trajectories (.jsonl)")
    p.add_argument("--pairs", default=None, help="output preference pairs (default: OUT with .pairs.jsonl)")
    p.add_argument("--mapping", default="accepted=1.0,edited=0.5,rejected=0.0",
                   help="outcome -> reward (default: accepted=1.0,edited=0.5,rejected=0.0)")
    p.add_argument("--edit-distance-scale", type=float, default=None,
                   help="edited reward falls linearly from accepted to rejected over this many characters of edit")
    p.add_argument("--skip-bad", action="store_true", help="keep the valid records, report malformed ones")
    p.add_argument("--no-scrub", action="store_true", help="keep secrets in the texts (not recommended)")
    p.set_defaults(func=cmd_feedback_import)

    jd = subparsers.add_parser("judge", help="model-based judge rewards: calibrate against labels")
    jd_sub = jd.add_subparsers(dest="judge_command", metavar="ACTION")
    jd.set_defaults(func=lambda args: (jd.print_help(), 0)[1])
    p = jd_sub.add_parser("calibrate", help="agreement, confusion matrix and calibration error on a labelled set")
    p.add_argument("--labelled", required=True, help="JSONL of prompt, answer, label (1/0)")
    p.add_argument("--judge", required=True, help="python:module:attr, openai:URL#model, or a model/adapter path")
    p.add_argument("--rubric", default="The answer is correct, complete and follows the task's instructions.",
                   help="rubric text, or @FILE to read it from a file")
    p.add_argument("--version", default="v1", help="judge version label (part of the reward version hash)")
    p.add_argument("--threshold", type=float, default=0.5, help="score at or above which the judge says 'pass'")
    p.add_argument("--bins", type=int, default=10, help="bins of the expected calibration error")
    p.add_argument("--out", default=None, help="write the report as JSON here")
    p.set_defaults(func=cmd_judge_calibrate)
    return fb_sub


def add_from_repo(sub: Any) -> None:
    """Register ``from-repo`` on the ``sandgym tasks`` sub-parsers (called from :mod:`sandgym.cli`)."""
    p = sub.add_parser("from-repo", help="synthesise verified tasks from a local Python repo and its pytest suite")
    p.add_argument("path", help="root of the repository")
    p.add_argument("--out", required=True, help="suite folder: tasks.jsonl + from_repo_report.json")
    p.add_argument("--kinds", default=",".join(DEFAULT_KINDS),
                   help=f"comma list of {', '.join(KINDS)}, easiest first (complete and fix: one definition, "
                        "answered with a code block; locate: a bug report, the agent searches the whole repository); "
                        f"default {','.join(DEFAULT_KINDS)}")
    p.add_argument("--max-tasks", type=int, default=None, help="stop after this many verified tasks")
    p.add_argument("--heldout-fraction", type=float, default=0.3, help="share of source files held out (default 0.3)")
    p.add_argument("--seed", type=int, default=0, help="seed of the train/heldout split of files and of the "
                   "mutations (default 0)")
    p.add_argument("--name", default=None, help="suite name in task ids (default: the folder name)")
    p.add_argument("--max-file-kb", type=int, default=64,
                   help="cap per data file (not Python source, which is kept whatever its size): larger ones that no "
                        "source names are left out (default 64)")
    p.add_argument("--max-data-mb", type=int, default=10,
                   help="cap on all data files of the snapshot together, smallest kept first (default 10)")
    p.add_argument("--exclude-tests", action="append", default=[], metavar="GLOB",
                   help="test files to leave out, e.g. tests/test_huge.py (repeatable)")
    p.add_argument("--no-scrub", action="store_true", help="do not remove secrets (not recommended)")
    p.add_argument("--scrub-pattern", action="append", default=[], metavar="KIND=REGEX",
                   help="extra secret pattern (repeatable)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds for the baseline test run (default 120)")
    p.add_argument("--backend", default="local", help="sandbox backend (default: local)")
    p.add_argument("--requirement", "-r", action="append", default=[], metavar="SPEC",
                   help="a package the project or its tests import (repeatable; pip specifier, built once into a "
                        "cached environment mounted in the sandbox; SANDGYM_WHEELHOUSE for offline)")
    p.add_argument("--allow-in-process", action="store_true",
                   help="keep candidates whose tests work only with the project's code in the test's own process "
                        "(subclasses of its classes, two of its objects compared), graded in-process: an agent's "
                        "code can then forge its reward there (see docs/SANDBOX.md); off by default")
    p.add_argument("--model", default="smollm2-135m",
                   help="the model the written train.toml trains and eval.toml compares against (default: "
                        "smollm2-135m; a local directory or a cached hub id)")
    p.set_defaults(func=cmd_from_repo)


def cmd_from_repo(args: argparse.Namespace) -> int:
    config = FromRepoConfig(
        repo=args.path, out=args.out, kinds=tuple(k.strip() for k in args.kinds.split(",") if k.strip()),
        max_tasks=args.max_tasks, heldout_fraction=args.heldout_fraction, seed=args.seed, name=args.name,
        max_file_bytes=args.max_file_kb * 1000, max_data_bytes=args.max_data_mb * 1_000_000,
        exclude_tests=tuple(args.exclude_tests), scrub=not args.no_scrub,
        scrub_patterns=parse_patterns(args.scrub_pattern), timeout_s=args.timeout, backend=args.backend,
        requirements=tuple(args.requirement), allow_in_process=args.allow_in_process)
    print(f"sandgym tasks from-repo: {args.path}, writing to {args.out} ({TASKS_NAME}, {REPORT_NAME})",
          file=sys.stderr, flush=True)
    result = run(config)
    report = result.report()
    print(f"made {report['made']} task(s) {report['made_by_kind']} splits {report['made_by_split']}")
    print(f"discarded {report['discarded']}: {report['discarded_by_reason']}")
    print(f"grading: {report['made_by_isolation']} (tests dropped as needing the code in their own process: "
          f"{report['tests_dropped_needs_in_process']})")
    base = dict(report["baseline"])
    errors = base.pop("collection_errors", [])
    why = base.pop("failures_by_reason", {})
    cfg = base.pop("pytest_config", None)
    missing, network = base.pop("missing_modules", []), base.pop("network_errors", 0)
    own = base.pop("missing_own_modules", [])
    print(f"baseline: {base}; secrets removed: {report['scrub']['by_kind'] or 'none'}")
    if cfg:
        print(f"  pytest configuration from {cfg['source']}: kept {sorted(cfg['options']) or 'nothing'}, "
              f"dropped {len(cfg['dropped'])} (see the report)")
    for err in errors:
        print(f"  baseline collection error: {err}")
    for reason, n in why.items():
        print(f"  baseline failures ({n}): {reason}")
    if missing:
        print(f"  missing modules: {', '.join(missing)}: declare the packages with --requirement (-r), e.g. "
              f"-r {missing[0]}")
    for entry in own:
        print(f"  {entry['hint']}")
    if network:
        print(f"  {network} baseline error line(s) need a network, which the sandbox does not have")
    print(f"wrote {Path(args.out) / TASKS_NAME} and {Path(args.out) / REPORT_NAME}")
    splits = report["made_by_split"]
    if set(report["made_by_kind"]) & set(RUNGS):  # each rung rolls out its own way: the recipe writes that config
        print(f"next: sandgym recipe repo {args.path} --out {args.out}    # the ladder: probe, train and score per "
              "rung (it reuses these tasks)")
        return 0 if result.made else 1
    for path in write_recipe(args.out, model=args.model, n_train=splits.get("train", 0),
                             n_heldout=splits.get("heldout", 0)):
        verb = "train on the train split" if path.name == TRAIN_NAME else "score it on the held-out split"
        print(f"next: sandgym {'train' if path.name == TRAIN_NAME else 'eval'} {path}    # {verb}")
    return 0 if result.made else 1


def cmd_feedback_import(args: argparse.Namespace) -> int:
    mapping = RewardMapping.parse(args.mapping, args.edit_distance_scale)
    result = import_feedback(args.logs, args.out, mapping=mapping, pairs_out=args.pairs, skip_bad=args.skip_bad,
                             scrub=not args.no_scrub)
    for bad in result.bad:
        print(f"skipped {args.logs}:{bad}", file=sys.stderr)
    pairs = args.pairs or str(Path(args.out).with_suffix(".pairs.jsonl"))
    print(f"imported {len(result.trajectories)} record(s) -> {args.out}; {len(result.pairs)} preference pair(s) -> "
          f"{pairs}; skipped {len(result.bad)} malformed; secrets removed: {result.scrub.by_kind or 'none'}")
    return 0


def cmd_judge_calibrate(args: argparse.Namespace) -> int:
    rubric = Path(args.rubric[1:]).read_text(encoding="utf-8") if args.rubric.startswith("@") else args.rubric
    judge = JudgeReward(load_judge_policy(args.judge), rubric, version=args.version)
    stats = calibrate(judge, load_labelled(args.labelled), threshold=args.threshold, bins=args.bins)
    (tn, fp), (fn, tp) = stats.confusion
    print(f"judge {judge.identity} -> reward version {stats.judge_version}")
    print(f"n={stats.n} agreement={stats.agreement:.3f} kappa={stats.kappa:.3f} ECE={stats.ece:.3f} "
          f"brier={stats.brier:.3f} unparsed={stats.unparsed}")
    print("confusion (rows: label, columns: judge)\n            judge=0  judge=1")
    print(f"  label=0   {tn:7d}  {fp:7d}\n  label=1   {fn:7d}  {tp:7d}")
    if args.out:
        Path(args.out).write_text(json.dumps({"judge": judge.identity, **stats.to_json()}, indent=2) + "\n",
                                  encoding="utf-8")
        print(f"wrote {args.out}")
    return 0
