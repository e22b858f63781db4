"""``sandgym tasks``: list, show, validate and import task suites (heavy imports stay inside handlers)."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import Any

from sandgym.sandbox import make_sandbox
from sandgym.tasks.importers import import_file, verify_references
from sandgym.tasks.importers.reasoning_gym import dataset_config, write_entries
from sandgym.tasks.load import load_path, save_jsonl, validate_path
from sandgym.tasks.registry import list_suites, load_suite


def add_commands(subparsers: Any) -> Any:
    """Register ``sandgym tasks ...`` on the top-level sub-parsers; returns the ``tasks`` sub-parsers (where
    :mod:`sandgym.cli` adds ``from-repo``, which lives in ``sandgym.private``, above tasks)."""
    tasks = subparsers.add_parser("tasks", help="list, show, validate and import task suites")
    sub = tasks.add_subparsers(dest="tasks_command", metavar="ACTION")
    tasks.set_defaults(func=lambda args: (tasks.print_help(), 0)[1])

    p = sub.add_parser("list", help="built-in and plugin suites with one-line descriptions")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", help="counts by family and split, and one example prompt")
    p.add_argument("suite", help="suite spec (e.g. coding:train, long_context/needle@4) or a path")
    p.add_argument("--n", type=int, default=None, help="number of tasks to generate (default: 4 per family/split)")
    p.add_argument("--seed", type=int, default=0, help="seed of a generated suite's tasks (default 0)")
    p.add_argument("--difficulty", type=int, default=None, help="1 (very easy) .. 4; default mixes levels")
    p.add_argument("--chars", type=int, default=1500, help="characters of the example prompt to print")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("validate", help="report every problem (file, line, field, fix); exit 1 if any")
    p.add_argument("path", help="a .jsonl file, a task folder or a directory of task folders")
    p.add_argument("--check-references", action="store_true",
                   help="also run every reference through its verifier in the sandbox; fail on a verifier that "
                        "cannot run (missing library, syntax error) or a reference that does not pass")
    p.add_argument("--backend", default="local", help="sandbox backend for --check-references (default: local)")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("import", help="convert HumanEval-/MBPP-style JSONL, reasoning-gym entries or Harbor task "
                                      "directories into tasks")
    p.add_argument("file", help="input JSONL (humaneval, mbpp, reasoning_gym) or directory (harbor: one task or a "
                                "parent of many)")
    p.add_argument("--format", required=True, dest="fmt", metavar="{humaneval,mbpp,reasoning_gym,harbor}",
                   help="humaneval | mbpp | reasoning_gym | harbor (harbor is registered by sandgym.interop)")
    p.add_argument("-o", "--out", required=True, help="output .jsonl")
    p.add_argument("--split", default="heldout", choices=["train", "heldout"],
                   help="the split the imported tasks belong to (default: heldout)")
    p.add_argument("--visible", type=int, default=0, metavar="N",
                   help="also ship each record's first N asserts as visible tests (test_visible.py: what run_tests "
                        "and the test-and-fix code action run); humaneval and mbpp; default 0")
    p.add_argument("--check-references", "--verify", dest="verify", action="store_true",
                   help="run every imported reference through its verifier in the sandbox; write nothing and exit 1 "
                        "if any does not pass")
    p.add_argument("--backend", default="local", help="sandbox backend for --verify (default: local)")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("reasoning-gym", help="append entries of a reasoning-gym dataset (the installed package; "
                                             "nothing downloaded) to a JSONL file for `import --format "
                                             "reasoning_gym`")
    p.add_argument("dataset", help="a reasoning-gym dataset name, e.g. needle_haystack")
    p.add_argument("--size", type=int, default=30, help="how many entries (default 30)")
    p.add_argument("--seed", type=int, default=0, help="the dataset's seed (default 0)")
    p.add_argument("--set", dest="config", action="append", default=[], metavar="KEY=VALUE",
                   help="a dataset config field, e.g. --set min_num_statements=520 (repeatable)")
    p.add_argument("--placement", choices=["inline", "file"], default=None,
                   help="where the import puts a long question's document (default: inline up to 1,500 tokens, "
                        "else the workspace file document.txt)")
    p.add_argument("-o", "--out", required=True, help="the JSONL file (appended to)")
    p.set_defaults(func=cmd_reasoning_gym)
    return sub


def cmd_list(args: argparse.Namespace) -> int:
    suites = list_suites()
    width = max(len(name) for name in suites)
    for name, desc in suites.items():
        print(f"{name:<{width}}  {desc}")
    print("\nSpecs: <domain>[/<family>][:train|:heldout][@N], or a .jsonl file / task folder.")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    tasks = load_suite(args.suite, n=args.n, seed=args.seed, difficulty=args.difficulty)
    if not tasks:
        print(f"{args.suite}: no tasks")
        return 0
    counts = Counter((t.domain, t.family, t.split) for t in tasks)
    print(f"{args.suite}: {len(tasks)} tasks")
    print(f"{'domain/family':<28} {'split':<8} {'n':>4}  unseen")
    unseen = {(t.domain, t.family) for t in tasks if t.unseen}
    for (domain, family, split), n in sorted(counts.items()):
        mark = "yes" if (domain, family) in unseen else ""
        print(f"{domain + '/' + family:<28} {split:<8} {n:>4}  {mark}")
    example = tasks[0]
    prompt = example.prompt if len(example.prompt) <= args.chars else example.prompt[: args.chars] + " [...]"
    print(f"\nExample {example.id} (difficulty {example.difficulty}, verifier {example.verifier.kind}, "
          f"files: {', '.join(example.files) or 'none'}):\n{prompt}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    problems = validate_path(args.path)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} problem(s) in {args.path}", file=sys.stderr)
        return 1

    tasks = load_path(args.path)
    print(f"{args.path}: {len(tasks)} task(s), no problems")
    if not args.check_references:
        return 0

    results = verify_references(tasks, lambda **kw: make_sandbox(args.backend, **kw))
    failed = [r for r in results if not r.ok]
    for r in failed:
        print(f"{args.path}: task {r.task_id}: reference check failed: {r.message}")
    print(f"references: {len(results) - len(failed)} of {len(results)} pass their verifier")
    return 1 if failed else 0


def cmd_import(args: argparse.Namespace) -> int:
    tasks = import_file(args.fmt, args.file, split=args.split, visible=args.visible)
    print(f"imported {len(tasks)} {args.fmt} task(s) from {args.file}")
    if args.verify:
        results = verify_references(tasks, lambda **kw: make_sandbox(args.backend, **kw))
        failed = [r for r in results if not r.ok]
        for r in failed:
            print(f"reference FAILED {r.task_id}: {r.passed}/{r.expected} passed; {r.message}")
        print(f"references: {len(results) - len(failed)}/{len(results)} pass their own tests")
        if failed:
            print(f"not writing {args.out}: fix or drop the failing records first", file=sys.stderr)
            return 1
    save_jsonl(tasks, args.out)
    print(f"wrote {args.out}")
    return 0


def cmd_reasoning_gym(args: argparse.Namespace) -> int:
    path = write_entries(args.dataset, args.out, size=args.size, seed=args.seed, placement=args.placement,
                         **dataset_config(args.config))
    print(f"{args.size} {args.dataset} entries appended to {path}; import them with `sandgym tasks import "
          f"--format reasoning_gym {path} -o TASKS.jsonl`")
    return 0
