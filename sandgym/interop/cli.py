"""``sandgym serve``: a sandgym env over OpenEnv's HTTP/WebSocket protocol; ``sandgym mcp``: a sandgym env's tools
as an MCP server over stdio; ``sandgym serve-model``: a model over vLLM's OpenAI-compatible API (heavy imports in the
handlers).

Importing this module also registers the ``harbor`` format of ``sandgym tasks import`` (``sandgym.interop``);
:func:`add_tasks_export` adds ``sandgym tasks export --format harbor``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import sandgym.interop  # noqa: F401  (registers the harbor import format)
from sandgym.errors import ConfigError
from sandgym.interop.harbor_export import export_harbor
from sandgym.tasks.registry import DEFAULT_TASK_SEED, load_suite


def add_commands(subparsers: Any) -> None:
    p = subparsers.add_parser("serve", help="serve an env (built-in or plugin) as an OpenEnv environment server")
    p.add_argument("env_id", nargs="?", default=None, help="env id, e.g. sandgym/Coding-v0 (or --env)")
    p.add_argument("--env", dest="env_opt", default=None, help="env id (same as the positional argument)")
    p.add_argument("--tasks", default=None, help="suite spec or task file for the env's `tasks` kwarg")
    p.add_argument("--env-kwargs", default=None, help="JSON object of extra env keyword arguments")
    p.add_argument("--task-seed", type=int, default=DEFAULT_TASK_SEED,
                   help=f"seed that picks a generated suite's tasks (default {DEFAULT_TASK_SEED}, as `sandgym eval "
                   "--task-seed`, so an evaluation through this server draws its tasks); --env-kwargs' suite_seed "
                   "wins")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default: 8000)")
    p.add_argument("--max-sessions", type=int, default=4, help="concurrent WebSocket sessions (one env each)")
    p.add_argument("--no-warm", dest="warm", action="store_false",
                   help="a new env and sandbox per session (default: sessions reuse the envs of ended ones)")
    p.set_defaults(func=cmd_serve)

    c = subparsers.add_parser("mcp", help="serve an env's tools (plus reset; submit returns the reward) as an MCP "
                              "server over stdio: one env and sandbox per session")
    c.add_argument("env_id", nargs="?", default=None, help="env id, e.g. sandgym/Coding-v0 (or --env)")
    c.add_argument("--env", dest="env_opt", default=None, help="env id (same as the positional argument)")
    c.add_argument("--tasks", default=None, help="suite spec or task file for the env's `tasks` kwarg")
    c.add_argument("--env-kwargs", default=None, help="JSON object of extra env keyword arguments")
    c.add_argument("--task-seed", type=int, default=DEFAULT_TASK_SEED,
                   help=f"seed that picks a generated suite's tasks (default {DEFAULT_TASK_SEED}, as `sandgym eval "
                   "--task-seed`); --env-kwargs' suite_seed wins")
    c.set_defaults(func=cmd_mcp)

    m = subparsers.add_parser("serve-model", help="serve a model with vLLM's OpenAI-compatible API (completions on "
                              "token ids with log-probs, LoRA adapters hot-loaded by name)")
    m.add_argument("--model", default="smollm2-135m", help="embedded name, local checkpoint or cached hub id")
    m.add_argument("--served-model-name", default=None, help="the name requests use for the base model (default: --model)")
    m.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine)")
    m.add_argument("--port", type=int, default=8000, help="port to listen on (default: 8000)")
    m.add_argument("--max-loras", type=int, default=4, help="LoRA adapters loaded at once")
    m.set_defaults(func=cmd_serve_model)


def add_tasks_export(sub: Any) -> None:
    """Register ``export`` on the ``sandgym tasks`` sub-parsers (called from :mod:`sandgym.cli`)."""
    p = sub.add_parser("export", help="write a suite or task file as Harbor task directories")
    p.add_argument("suite", help="suite spec (coding:heldout@8), a .jsonl file or a task folder (e.g. from-repo output)")
    p.add_argument("--format", default="harbor", choices=["harbor"], help="output format (harbor)")
    p.add_argument("-o", "--out", required=True, help="directory to write one task directory per task into")
    p.add_argument("--n", type=int, default=None, help="tasks to take from a generated suite")
    p.add_argument("--seed", type=int, default=0, help="seed of a generated suite's tasks (default 0)")
    p.set_defaults(func=cmd_tasks_export)


def cmd_tasks_export(args: argparse.Namespace) -> int:
    written, skipped = export_harbor(load_suite(args.suite, n=args.n, seed=args.seed), args.out)
    for task_id, why in skipped.items():
        print(f"skipped {task_id}: {why}", file=sys.stderr)
    print(f"wrote {len(written)} Harbor task director{'y' if len(written) == 1 else 'ies'} to {args.out}"
          + (f" ({len(skipped)} skipped)" if skipped else ""))
    return 0 if written else 1


def _env_args(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """(env id, env kwargs) of ``serve`` and ``mcp``: the id, ``--env-kwargs`` and ``--tasks``."""
    env_id = args.env_opt or args.env_id or "sandgym/Coding-v0"
    kwargs: dict[str, Any] = {}
    if args.env_kwargs:
        try:
            kwargs = json.loads(args.env_kwargs)
        except ValueError as exc:
            raise ConfigError(f"--env-kwargs is not JSON: {exc}") from exc
        if not isinstance(kwargs, dict):
            raise ConfigError("--env-kwargs must be a JSON object, e.g. '{\"max_turns\": 4}'")
    if args.tasks:
        kwargs["tasks"] = args.tasks
    return env_id, kwargs


def cmd_serve(args: argparse.Namespace) -> int:
    from sandgym.interop.openenv import serve

    env_id, kwargs = _env_args(args)
    serve(env_id, env_kwargs=kwargs, host=args.host, port=args.port, max_sessions=args.max_sessions,
          warm=args.warm, task_seed=args.task_seed)
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from sandgym.interop.mcp_server import serve

    env_id, kwargs = _env_args(args)
    serve(env_id, env_kwargs=kwargs, task_seed=args.task_seed)
    return 0


def cmd_serve_model(args: argparse.Namespace) -> int:
    from sandgym.interop.model_server import serve

    if args.max_loras < 1:
        raise ConfigError(f"--max-loras {args.max_loras}: serve at least 1 adapter slot, e.g. --max-loras 4")
    serve(args.model, host=args.host, port=args.port, max_loras=args.max_loras, served_name=args.served_model_name)
    return 0
