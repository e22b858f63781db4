"""``sandgym envs``, ``sandgym run`` and ``sandgym rewards check``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["add_commands"]


def add_commands(sub: Any) -> None:
    p = sub.add_parser("envs", help="list environment ids with one-line descriptions (built-in and plugins)")
    p.set_defaults(func=_cmd_envs)

    p = sub.add_parser("run", help="run a scripted agent (oracle/noop/random) on an env; JSONL + summary table")
    p.add_argument("--env", default="sandgym/Coding-v0", help="env id (see `sandgym envs`)")
    p.add_argument("--tasks", default=None, help="suite spec or path (default: the env's own tasks)")
    p.add_argument("--agent", default="oracle", choices=["oracle", "noop", "random"])
    p.add_argument("--episodes", type=int, default=8, help="episodes to run (tasks are cycled)")
    p.add_argument("--workers", type=int, default=2, help="worker threads, each with its own env")
    p.add_argument("--out", default="results.jsonl", help="JSONL output, one line per episode")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--env-kwargs", default="{}", help='JSON of extra gymnasium.make kwargs, e.g. \'{"max_turns": 4}\'')
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("rewards", help="reward functions: `sandgym rewards check` recomputes the golden cases")
    rsub = p.add_subparsers(dest="rewards_command", metavar="SUBCOMMAND")
    c = rsub.add_parser("check", help="fail (exit 1) when a versioned reward's output changed")
    c.add_argument("--golden", default=None, help="directory of golden JSON cases (default: the built-in ones)")
    c.set_defaults(func=_cmd_rewards_check)
    lst = rsub.add_parser("list", help="list registered rewards and the default weights")
    lst.set_defaults(func=_cmd_rewards_list)
    p.set_defaults(func=lambda args: (p.print_help(), 0)[1])


def _cmd_envs(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import sandgym  # noqa: F401
    from sandgym.envs.registration import BUILTIN_ENVS, describe, plugin_env_ids

    ids = list(BUILTIN_ENVS) + [i for i in plugin_env_ids() if i in gym.registry]
    width = max(len(i) for i in ids)
    for env_id in ids:
        origin = "" if env_id in BUILTIN_ENVS else "  [plugin]"
        print(f"{env_id:<{width}}  {describe(env_id)}{origin}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from sandgym.envs.runner import RunConfig, run
    from sandgym.errors import ConfigError

    try:
        env_kwargs = json.loads(args.env_kwargs)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--env-kwargs {args.env_kwargs!r} is not JSON ({exc.msg}); pass e.g. '{{\"max_turns\": 4}}'") from exc
    config = RunConfig(env=args.env, tasks=args.tasks, agent=args.agent, episodes=args.episodes,
                       workers=args.workers, out=args.out, seed=args.seed, env_kwargs=env_kwargs,
                       progress=not args.no_progress)
    summary = run(config)
    table = Table(title=f"{config.agent} on {config.env}: {len(summary.results)} episodes, "
                        f"{summary.episodes_per_s:.2f} episodes/s")
    for col in ("family", "episodes", "success rate", "mean reward", "infra failures"):
        table.add_column(col, justify="left" if col == "family" else "right")
    for fam, s in summary.per_family.items():
        table.add_row(fam, str(s.episodes), f"{s.success_rate:.0%}", f"{s.mean_reward:.3f}", str(s.infra_failures))
    console = Console()
    console.print(table)
    if summary.out:
        console.print(f"results: {summary.out}")
    return 0


def _cmd_rewards_check(args: argparse.Namespace) -> int:
    from pathlib import Path

    from sandgym.envs.rewards import GOLDEN_DIR, check_golden

    directory = Path(args.golden) if args.golden else GOLDEN_DIR
    problems = check_golden(directory)
    if problems:
        for line in problems:
            print(f"FAIL {line}", file=sys.stderr)
        return 1
    n = len(list(directory.glob("*.json")))
    print(f"ok: every reward matches its golden values ({n} cases in {directory})")
    return 0


def _cmd_rewards_list(args: argparse.Namespace) -> int:
    from sandgym.envs.rewards import REWARDS, RewardConfig

    weights = RewardConfig().weights
    for name, fn in sorted(REWARDS.items()):
        doc = (fn.__doc__ or "").strip().splitlines()[0]
        print(f"{name:<16} weight={weights.get(name, 0.0):<5} {doc}")
    return 0
