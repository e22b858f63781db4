"""``sandgym serve``: a sandgym env over OpenEnv's HTTP/WebSocket protocol (heavy imports in the handler).

Importing this module also registers the ``harbor`` format of ``sandgym tasks import`` (``sandgym.interop``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import sandgym.interop  # noqa: F401  (registers the harbor import format)
from sandgym.errors import ConfigError


def add_commands(subparsers: Any) -> None:
    p = subparsers.add_parser("serve", help="serve an env (built-in or plugin) as an OpenEnv environment server")
    p.add_argument("env_id", nargs="?", default=None, help="env id, e.g. sandgym/Coding-v0 (or --env)")
    p.add_argument("--env", dest="env_opt", default=None, help="env id (same as the positional argument)")
    p.add_argument("--tasks", default=None, help="suite spec or task file for the env's `tasks` kwarg")
    p.add_argument("--env-kwargs", default=None, help="JSON object of extra env keyword arguments")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-sessions", type=int, default=4, help="concurrent WebSocket sessions (one env each)")
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    from sandgym.interop.openenv import serve

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
    serve(env_id, env_kwargs=kwargs, host=args.host, port=args.port, max_sessions=args.max_sessions)
    return 0
