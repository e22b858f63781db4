"""``sandgym eval`` and ``sandgym eval compare``."""

from __future__ import annotations

import argparse
from typing import Any


def add_commands(sub: Any) -> None:
    p = sub.add_parser(
        "eval",
        help="score a policy on held-out suites (or: eval compare DIR DIR ...)",
        description="Evaluate POLICY on suites: completion, pass@k/pass^k, transfer, failure modes, with 95%% CIs. "
        "`sandgym eval compare DIR1 DIR2 ...` puts finished evaluations side by side.",
    )
    p.add_argument("compare", nargs="*", help=argparse.SUPPRESS)
    p.add_argument("--policy", help="smollm2-135m, a model dir/hub id, an adapter dir, a run dir, "
                   "openai:URL#MODEL, or oracle/noop/random")
    p.add_argument("--suite", action="append", default=[], help="suite spec or task file (repeatable)")
    p.add_argument("--samples", type=int, default=4, help="K samples per task (default 4)")
    p.add_argument("--seeds", type=int, default=1, help="number of seeds (0..S-1)")
    p.add_argument("--n-tasks", type=int, default=None,
                   help="tasks per suite (default: 16 from a generated suite; a JSONL file or task folder whole)")
    p.add_argument("--difficulty", type=int, default=None)
    p.add_argument("--baseline", help="a second POLICY compared on the same tasks and seeds")
    p.add_argument("--out", default="runs/eval", help="output directory (resumes if it holds episodes)")
    p.add_argument("--max-new-tokens", type=int, default=160)
    p.add_argument("--max-turns", type=int, default=3)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--code-action", default="submit", choices=["python", "submit", "none"])
    p.add_argument("--tools", default="", help="comma-separated tool names offered (default: all)")
    p.add_argument("--env", default="", help="registered env id to evaluate in (default: sandgym's tool env; "
                   "it gets --max-turns, --sandbox, --code-action and --tools)")
    p.add_argument("--sandbox", default="local", choices=["local", "e2b", "auto"],
                   help="sandbox backend (default local; auto = E2B when E2B_API_KEY is set)")
    p.add_argument("--trained-families", default="", help="comma-separated families the policy trained on")
    p.add_argument("--ray-workers", type=int, default=0, help="roll out on N Ray workers (default 0: this process)")
    p.add_argument("--ray-address", default="", help="Ray cluster to join with --ray-workers (default: start one)")
    p.set_defaults(func=_eval)


def _eval(args: argparse.Namespace) -> int:
    if args.compare:
        if args.compare[0] != "compare" or len(args.compare) < 2:
            from sandgym.errors import ConfigError

            raise ConfigError(f"unexpected arguments {args.compare}; use `sandgym eval compare DIR1 DIR2 ...`")
        from sandgym.evaluate.compare import compare_table

        print(compare_table(args.compare[1:]))
        return 0
    from sandgym.errors import ConfigError
    from sandgym.evaluate.config import EvalConfig, parse_suites

    if not args.policy:
        raise ConfigError("--policy is required (e.g. --policy smollm2-135m or --policy runs/quickstart)")
    config = EvalConfig(
        policy=args.policy,
        suites=parse_suites(args.suite),
        out=args.out,
        samples=args.samples,
        seeds=tuple(range(args.seeds)),
        n_tasks=args.n_tasks,
        difficulty=args.difficulty,
        baseline=args.baseline,
        max_new_tokens=args.max_new_tokens,
        max_turns=args.max_turns,
        temperature=args.temperature,
        code_action=args.code_action,
        tools=tuple(t for t in args.tools.split(",") if t),
        trained_families=tuple(f for f in args.trained_families.split(",") if f),
        sandbox=args.sandbox,
        env=args.env,
        ray_workers=args.ray_workers,
        ray_address=args.ray_address,
    )
    from sandgym.evaluate.policies import check_out_dir, check_policy

    check_out_dir(config.out)  # bad input is reported before torch and transformers load
    check_policy(config.policy)
    if config.baseline:
        check_policy(config.baseline)
    from sandgym.evaluate.report import headline_rows
    from sandgym.evaluate.run import load_tasks

    load_tasks(config, report=lambda line: print(line, flush=True))  # how many tasks of how many, before the run
    if config.ray_workers > 0:
        from sandgym.evaluate.distributed import run
    else:
        from sandgym.evaluate.run import run

    result = run(config)
    print("| metric | candidate | baseline | gain |")
    for row in headline_rows(result.metrics):
        print("| " + " | ".join(row) + " |")
    print(f"report: {result.report_md}  ({result.report_html})")
    print(f"metrics: {result.out_dir / 'metrics.json'}")
    return 0
