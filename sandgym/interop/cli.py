"""``sandgym serve``: a sandgym env over OpenEnv's HTTP/WebSocket protocol; ``sandgym serve-model``: a model over
vLLM's OpenAI-compatible API (heavy imports in the handlers).

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

    m = subparsers.add_parser("serve-model", help="serve a model with vLLM's OpenAI-compatible API (completions on "
                              "token ids with log-probs, LoRA adapters hot-loaded by name)")
    m.add_argument("--model", default="smollm2-135m", help="embedded name, local checkpoint or cached hub id")
    m.add_argument("--served-model-name", default=None, help="the name requests use for the base model (default: --model)")
    m.add_argument("--host", default="127.0.0.1")
    m.add_argument("--port", type=int, default=8000)
    m.add_argument("--max-loras", type=int, default=4, help="LoRA adapters loaded at once")
    m.set_defaults(func=cmd_serve_model)


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


def cmd_serve_model(args: argparse.Namespace) -> int:
    from sandgym.interop.model_server import serve

    if args.max_loras < 1:
        raise ConfigError(f"--max-loras {args.max_loras}: serve at least 1 adapter slot, e.g. --max-loras 4")
    serve(args.model, host=args.host, port=args.port, max_loras=args.max_loras, served_name=args.served_model_name)
    return 0
