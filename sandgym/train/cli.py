"""``sandgym train`` and ``sandgym sft``."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path
from typing import Any

from sandgym.configs import to_toml
from sandgym.errors import ConfigError
from sandgym.train.config import load_config


def add_commands(sub: Any, *, on_eval: Any = None) -> None:
    """``train`` and ``sft``; ``on_eval`` is the training loop's periodic evaluation hook (``sandgym.experiments``
    registers these commands with it)."""
    p = sub.add_parser("train", help="train a LoRA policy with GRPO-family RL from a TOML config")
    _common(p)
    p.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its latest checkpoint")
    p.add_argument("--ray-address", metavar="ADDRESS", help="train on the Ray cluster at ADDRESS (sets "
                   'distributed.backend="ray"; "auto" joins the local cluster)')
    p.set_defaults(func=functools.partial(_train, on_eval=on_eval))
    s = sub.add_parser("sft", help="warm-start the LoRA adapter on demonstrations (oracle, JSONL transcripts or "
                                   "imported feedback)")
    _common(s)
    s.set_defaults(func=_sft)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", nargs="?", help="TOML config (see examples/quickstart.toml); defaults apply without one")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set optim.lr=1e-4 (repeatable)")
    p.add_argument("--print-config", action="store_true", help="print the resolved config and exit")


def _load(args: argparse.Namespace, extra: list[str] | None = None) -> Any:
    return load_config(args.config, [*args.overrides, *(extra or [])])


def _train(args: argparse.Namespace, *, on_eval: Any = None) -> int:
    extra = []
    if args.resume:
        if not Path(args.resume).is_dir():
            raise ConfigError(f"--resume {args.resume!r}: no such run directory; pass the out_dir of a run")
        if args.config is None and not (Path(args.resume) / "config.toml").is_file():
            raise ConfigError(f"--resume {args.resume!r} has no config.toml, so it is not a run directory; pass "
                              "the out_dir of a run (or the config as well)")
        extra.append(f'out_dir="{args.resume}"')
        if args.config is None:
            args.config = f"{args.resume}/config.toml"
    if args.ray_address:
        extra += ['distributed.backend="ray"', f"distributed.address={json.dumps(args.ray_address)}"]
    config = _load(args, extra)
    if args.print_config:
        print(to_toml(config), end="")
        return 0
    out = Path(config.out_dir)
    print(f"sandgym train: writing to {out} (checkpoints in {out / 'checkpoints'}, metrics in "
          f"{out / 'metrics.jsonl'}{', TensorBoard in ' + str(out / 'tb') if config.logging.tensorboard else ''})",
          file=sys.stderr, flush=True)
    from sandgym.train.loop import run

    result = run(config, resume=bool(args.resume), on_eval=on_eval)
    done = result.steps - result.resumed_from
    since = f", resumed from step {result.resumed_from}" if result.resumed_from else ""
    print(f"trained {done} step{'s' if done != 1 else ''} (now at step {result.steps}{since})")
    print(f"run directory: {result.run_dir}")
    print(f"metrics:       {result.metrics_path}")
    print(f"checkpoint:    {result.last_checkpoint}")
    return 0


def _sft(args: argparse.Namespace) -> int:
    config = _load(args)
    if args.print_config:
        print(to_toml(config), end="")
        return 0

    from sandgym.train.sft import run_sft

    print(f"sandgym sft: writing to {Path(config.out_dir) / 'sft'} (the adapter in "
          f"{Path(config.out_dir) / 'sft' / 'adapter'})", file=sys.stderr, flush=True)
    result = run_sft(config, Path(config.out_dir) / "sft")
    print(f"SFT on {result.demonstrations} demonstrations, loss per epoch: {[round(x, 4) for x in result.losses]}")
    if result.by_outcome:
        print(f"feedback records trained on: {dict(result.by_outcome)}; skipped: {dict(result.skipped) or 'none'}")
    print(f"adapter: {result.adapter_dir}")
    return 0
