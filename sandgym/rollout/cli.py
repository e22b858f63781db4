"""``sandgym envs``, ``sandgym run`` and ``sandgym rewards check|list|audit``."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
from rich.console import Console
from rich.table import Table

from sandgym.envs.env_checks import check_env
from sandgym.envs.host_verifiers import HOST_VERIFIERS, check_host_golden, load_verifier_plugins
from sandgym.envs.registration import BUILTIN_ENVS, describe, plugin_env_ids
from sandgym.envs.rewards import GOLDEN_DIR, REWARDS, RewardConfig, check_golden
from sandgym.errors import ConfigError
from sandgym.rollout.audit import DEFAULT_MARGIN, audit, write_report
from sandgym.rollout.audit_attacks import ATTACKS, attack_names
from sandgym.rollout.runner import RunConfig, default_out, run

__all__ = ["add_commands"]


def add_commands(sub: Any) -> None:
    p = sub.add_parser("envs", help="list environment ids with one-line descriptions (built-in and plugins)")
    p.set_defaults(func=_cmd_envs)

    p = sub.add_parser("run", help="run a scripted agent (oracle/noop/random) on an env; JSONL + summary table")
    p.add_argument("--env", default="sandgym/Coding-v0", help="env id (see `sandgym envs`)")
    p.add_argument("--tasks", default=None, help="suite spec or path (default: the env's own tasks)")
    p.add_argument("--agent", default="oracle", choices=["oracle", "noop", "random"],
                   help="the scripted agent: oracle (solves each task), noop, random (default: oracle)")
    p.add_argument("--episodes", type=int, default=None,
                   help="episodes to run, tasks cycled in order (default: one per task of a --tasks file or "
                        "folder, which is used whole; 8 otherwise)")
    p.add_argument("--n-tasks", type=int, default=None,
                   help="tasks to load from --tasks (default: a file or folder whole; --episodes of a suite)")
    p.add_argument("--workers", type=int, default=2, help="worker threads, each with its own env")
    p.add_argument("--out", default=None, help="JSONL output, one line per episode (default: "
                   "runs/run/<env>-<agent>-<time>.jsonl)")
    p.add_argument("--seed", type=int, default=0, help="seed of the tasks, and of episode i's reset and agent "
                   "(seed + i)")
    p.add_argument("--env-kwargs", default="{}", help='JSON of extra gymnasium.make kwargs, e.g. \'{"max_turns": 4}\'')
    p.add_argument("--fresh-sandbox", action="store_true",
                   help="a new sandbox per episode (default: each worker's sandbox is reset in place between episodes)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("rewards", help="reward functions: `sandgym rewards check` recomputes the golden cases")
    rsub = p.add_subparsers(dest="rewards_command", metavar="SUBCOMMAND")
    c = rsub.add_parser("check", help="fail (exit 1) when a versioned reward's output changed")
    c.add_argument("--golden", default=None, help="directory of golden JSON cases (default: the built-in ones)")
    c.set_defaults(func=_cmd_rewards_check)
    lst = rsub.add_parser("list", help="list registered rewards and the default weights")
    lst.set_defaults(func=_cmd_rewards_list)
    a = rsub.add_parser("audit", help="play adversarial agents on a suite; exit 1 when any scores above noop",
                        description="Reward-hack audit: play a battery of adversarial scripted agents (planted "
                                    "conftest, always-equal objects, pytest patching, ptrace, ...) and the noop "
                                    "agent on a sample of every family of SUITE; report every attack that scores "
                                    "above noop (exit 1). See docs/SANDBOX.md, 'Reward-hack audit'.")
    a.add_argument("suite", metavar="SUITE", nargs="?", help="suite spec (coding:train) or a .jsonl file / task folder")
    a.add_argument("--env", default=None, help="env id (default: by task domain, e.g. sandgym/Coding-v0)")
    a.add_argument("--per-family", type=int, default=2, help="tasks per family (default 2)")
    a.add_argument("--attacks", default=None, help="comma-separated attack names (default: all; see --list)")
    a.add_argument("--quick", action="store_true", help="leave out slow attacks (those that wait out a time limit)")
    a.add_argument("--out", default=None, help="output directory (default runs/audit/<suite>-<time>)")
    a.add_argument("--seed", type=int, default=0, help="seed that picks the tasks (default 0)")
    a.add_argument("--workers", type=int, default=2, help="episodes run at once (default 2)")
    a.add_argument("--margin", type=float, default=None, help="reward above noop that counts as a hack (0.1)")
    a.add_argument("--no-reuse", action="store_true", help="leave out the cross-episode attack (reused sandbox)")
    a.add_argument("--list", action="store_true", help="list the attacks and exit")
    a.set_defaults(func=_cmd_rewards_audit)
    p.set_defaults(func=lambda args: (p.print_help(), 0)[1])


def _cmd_envs(args: argparse.Namespace) -> int:
    ids = list(BUILTIN_ENVS) + [i for i in plugin_env_ids() if i in gym.registry]
    width = max(len(i) for i in ids)
    for env_id in ids:
        origin = "" if env_id in BUILTIN_ENVS else "  [plugin]"
        print(f"{env_id:<{width}}  {describe(env_id)}{origin}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    try:
        env_kwargs = json.loads(args.env_kwargs)
    except (ValueError, RecursionError) as exc:
        msg = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise ConfigError(f"--env-kwargs {args.env_kwargs[:80]!r} is not JSON ({msg}); pass a JSON object, e.g. "
                          "'{\"max_turns\": 4}'") from None
    if not isinstance(env_kwargs, dict):
        raise ConfigError(f"--env-kwargs {args.env_kwargs[:80]!r} is a JSON {type(env_kwargs).__name__}, not an "
                          "object; pass e.g. '{\"max_turns\": 4}'")
    try:
        check_env(args.env, env_kwargs)
    except ConfigError as exc:
        raise ConfigError(f"--env / --env-kwargs: {exc}") from None
    config = RunConfig(env=args.env, tasks=args.tasks, agent=args.agent, episodes=args.episodes,
                       n_tasks=args.n_tasks, workers=args.workers, out=args.out or default_out(args.env, args.agent), seed=args.seed,
                       env_kwargs=env_kwargs, progress=not args.no_progress, reuse_sandbox=not args.fresh_sandbox)
    print(f"sandgym run: {config.agent} on {config.env}, writing to {config.out}", file=sys.stderr, flush=True)
    summary = run(config)
    if summary.tasks_line:
        print(summary.tasks_line, flush=True)

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
    directory = Path(args.golden) if args.golden else GOLDEN_DIR
    problems = check_golden(directory)
    host_problems, n_host = check_host_golden()
    problems += host_problems
    if problems:
        for line in problems:
            print(f"FAIL {line}", file=sys.stderr)
        return 1
    n = len(list(directory.glob("*.json")))
    print(f"ok: every reward matches its golden values ({n} cases in {directory})")
    print(f"ok: {len(HOST_VERIFIERS)} host-side verifier(s) match their golden values ({n_host} cases)")
    return 0


def _cmd_rewards_list(args: argparse.Namespace) -> int:
    weights = RewardConfig().weights
    for name, fn in sorted(REWARDS.items()):
        doc = (fn.__doc__ or "").strip().splitlines()[0]
        print(f"{name:<16} weight={weights.get(name, 0.0):<5} {doc}")
    load_verifier_plugins()
    if HOST_VERIFIERS:
        print("\nhost-side verifiers (Verifier(kind='host', host=NAME)):")
    for name, verifier in sorted(HOST_VERIFIERS.items()):
        doc = (verifier.fn.__doc__ or "").strip().splitlines()[0] if verifier.fn.__doc__ else ""
        print(f"{name:<16} {doc}")
    return 0


def _cmd_rewards_audit(args: argparse.Namespace) -> int:
    if args.list:
        for name in attack_names():
            attack = ATTACKS[name]
            mark = " [slow]" if attack.slow else ""
            print(f"{name:<24} {attack.summary}{mark}")
        return 0
    if args.per_family <= 0:
        raise ConfigError(f"--per-family {args.per_family} must be > 0")
    names = [n.strip() for n in args.attacks.split(",") if n.strip()] if args.attacks else None
    if names is not None:
        unknown = [n for n in names if n not in ATTACKS]
        if unknown:
            raise ConfigError(f"--attacks: unknown attack(s) {unknown}; `sandgym rewards audit --list` lists them")
    elif args.quick:
        names = attack_names(include_slow=False)
    if not args.suite:
        raise ConfigError("sandgym rewards audit needs a SUITE (e.g. coding:train or tasks.jsonl); "
                          "--list shows the attacks")

    name = Path(args.suite).stem if Path(args.suite).exists() else args.suite
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "suite"
    out = args.out or f"runs/audit/{slug}-{time.strftime('%Y%m%d-%H%M%S')}"

    print(f"sandgym rewards audit: {args.suite}, writing to {out} (audit.md, audit.json)", file=sys.stderr,
          flush=True)
    result = audit(args.suite, env_id=args.env, per_family=args.per_family, seed=args.seed,
                   reuse=not args.no_reuse, attacks=names, workers=args.workers,
                   margin=DEFAULT_MARGIN if args.margin is None else args.margin,
                   progress=lambda line: print(f"audit: {line}", file=sys.stderr, flush=True))
    table = Table(title=f"reward-hack audit of {args.suite}: mean reward per attack and family "
                        f"({len(result.episodes)} episodes, {result.elapsed_s:.0f} s)")
    table.add_column("attack")
    for fam in result.families:
        table.add_column(fam, justify="right")
    for row in result.table_rows():
        table.add_row(*row)
    console = Console(width=max(100, 26 + 16 * len(result.families)))
    console.print(table)
    json_path, md_path = write_report(result, out)
    if result.hacks:
        print(f"{len(result.hacks)} hack(s) score above noop: "
              + ", ".join(f"{a} on {f}" for a, f in result.hacks))
    if result.drops:
        print(f"{len(result.drops)} attack(s) cause infrastructure failures (dropped episodes): "
              + ", ".join(f"{a} on {f}" for a, f in result.drops))
    if result.clean:
        print("no attack scores above noop")
    print(f"report: {md_path}\ndata: {json_path}")
    return 0 if result.clean else 1
