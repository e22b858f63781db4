"""``sandgym eval [CONFIG] [--set KEY=VALUE] [--FLAG VALUE ...]``, ``sandgym eval compare DIR DIR ...`` and
``sandgym eval reproduce METRICS.json``.

Configured like ``sandgym train``: an optional TOML file (:class:`~sandgym.evaluate.config.EvalConfig`, with the
``[rollout]`` table of a training config), then the flags, then ``--set`` (each later one wins). The flags are
derived from the config's fields (``--samples`` sets ``samples``, ``--max-new-tokens`` sets
``rollout.max_new_tokens``), so a new config key is a new flag; ``--suite`` (repeatable) and ``--seeds S`` (seeds
0..S-1) keep their historical spelling.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping
from typing import Any, get_args, get_origin

from sandgym.configs import Flag, config_flags, flag_overrides, flag_value, to_toml
from sandgym.errors import ConfigError
from sandgym.evaluate import distributed
from sandgym.evaluate import run as local
from sandgym.evaluate.compare import compare_table
from sandgym.evaluate.config import EvalConfig, load_eval_config
from sandgym.evaluate.policies import check_out_dir, check_policy, trained_rollout
from sandgym.evaluate.report import headline_rows
from sandgym.evaluate.reproduce import reproduce
from sandgym.evaluate.run import load_tasks

FLAGS: tuple[Flag, ...] = tuple(config_flags(EvalConfig, sections=("rollout",), skip=("metadata",)))
"""Every flag of ``sandgym eval`` but --set/--print-config: one per field of EvalConfig and of its [rollout]."""

_ALIASES = {"suites": ("--suite", "--suites")}
_HELP = {
    "suites": "suite spec or task file (repeatable, or comma-separated); config key suites",
    "seeds": "S seeds 0..S-1, or a comma-separated list of seeds (default 1: seed 0); config key seeds",
}


def _dest(flag: Flag) -> str:
    return "flag:" + flag.key


def _help(flag: Flag) -> str:
    field = flag.key.rsplit(".", 1)[-1]
    if field in _HELP:
        return _HELP[field]
    default = flag.default
    if isinstance(default, (tuple, list)):
        default = ",".join(map(str, default))
    shown = f"default: {default}; " if default not in ("", None, {}) else ""
    text = f"{flag.help} ({shown}config key {flag.key})".lstrip().replace("``", "")
    return text.replace("%", "%%")


def _add_flag(p: argparse.ArgumentParser, flag: Flag) -> None:
    field = flag.key.rsplit(".", 1)[-1]
    options = _ALIASES.get(field, (flag.option,))
    kw: dict[str, Any] = {"dest": _dest(flag), "default": argparse.SUPPRESS, "help": _help(flag)}
    if field == "suites":
        kw.update(action="append", metavar="SUITE")
    elif get_origin(flag.type) is not None and "Literal" in str(get_origin(flag.type)):
        kw.update(choices=get_args(flag.type))
    else:
        kw.update(metavar=field.upper())
    p.add_argument(*options, **kw)


class _AnyName(Mapping[str, Any]):
    """The subcommands, as a mapping that contains every name (a name that is no subcommand is the config)."""

    def __init__(self, parsers: dict[str, Any]) -> None:
        self._parsers = parsers

    def __getitem__(self, name: str) -> Any:
        return self._parsers[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._parsers)

    def __len__(self) -> int:
        return len(self._parsers)

    def __contains__(self, name: object) -> bool:
        return True


class _ConfigOrCommand(argparse._SubParsersAction):  # type: ignore[type-arg]
    """The first positional of ``sandgym eval``: a subcommand (``compare``), else the TOML config; the arguments
    after the config are parsed as ``eval``'s own (argparse gives a subcommand action everything after it)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.choices = _AnyName(self._name_parser_map)  # type: ignore[assignment]  # argparse checks the choice before calling the action

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        first, *rest = values
        if first in self._name_parser_map:
            super().__call__(parser, namespace, values, option_string)
            return
        if getattr(namespace, "config", None) is not None:
            parser.error(f"one CONFIG only: got {namespace.config!r} and {first!r}")
        namespace.config = first
        _, extras = parser.parse_known_args(rest, namespace)
        if extras:
            parser.error(f"unrecognized arguments: {' '.join(extras)}")


def add_commands(sub: Any) -> None:
    p = sub.add_parser(
        "eval",
        help="score a policy on held-out suites (TOML config and/or flags; eval compare DIR DIR ...; eval "
        "reproduce METRICS.json)",
        description="Evaluate POLICY on suites: completion, pass@k/pass^k, transfer, failure modes, with 95% CIs. "
        "Configured like `sandgym train`: an optional TOML CONFIG (keys: the flags' config keys, rollout settings "
        "in a [rollout] table as in a training config), then the flags, then --set (each later one wins). "
        "`sandgym eval compare DIR1 DIR2 ...` puts finished evaluations side by side.",
    )
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set rollout.temperature=0.5 (repeatable)")
    p.add_argument("--print-config", action="store_true", help="print the resolved config (TOML) and exit")
    for flag in FLAGS:
        _add_flag(p, flag)
    p.set_defaults(func=_eval, config=None)
    commands = p.add_subparsers(dest="eval_command", action=_ConfigOrCommand,
                                metavar="CONFIG | compare | reproduce",
                                title="config or subcommand",
                                description="CONFIG: a TOML file (its keys: see --print-config); compare, "
                                "reproduce: see `sandgym eval compare --help`, `sandgym eval reproduce --help`")
    c = commands.add_parser("compare", help="put finished evaluations side by side (a markdown table)",
                            description="Put finished evaluations (directories with metrics.json) side by side.")
    c.add_argument("dirs", nargs="+", metavar="DIR", help="an evaluation's output directory")
    c.set_defaults(func=_compare)
    r = commands.add_parser(
        "reproduce", help="re-run a recorded evaluation and check each figure against its recorded interval",
        description="Re-run the evaluation recorded in METRICS.json (its config and manifest: policy, suites, task "
        "seed, rollout, samples, seeds) and report, per metric, whether the new value lies within the recorded 95% "
        "interval. Refused, naming the difference, when a suite's tasks hash, a reward version or an adapter "
        "changed. Exit status 1 when a metric falls outside its interval.")
    r.add_argument("metrics", metavar="METRICS.json", help="a metrics.json, or the evaluation directory holding it")
    r.add_argument("--out", default=None, help="directory of the re-run (default: reproduce, reproduce-2, ... "
                   "beside METRICS.json)")
    r.set_defaults(func=_reproduce)


def _compare(args: argparse.Namespace) -> int:
    print(compare_table(args.dirs))
    return 0


def _reproduce(args: argparse.Namespace) -> int:
    result = reproduce(args.metrics, out=args.out, note=lambda line: print(f"sandgym eval reproduce: {line}",
                                                                            file=sys.stderr, flush=True))
    print(result.table())
    print(f"{len(result.checks) - len(result.outside)} of {len(result.checks)} metrics within their recorded "
          f"intervals; details: {result.out_dir / 'reproduce.json'}")
    return 0 if result.ok else 1


def _seeds(raw: str) -> list[int]:
    if "," in raw:
        return flag_value(tuple[int, ...], raw, "--seeds")  # type: ignore[no-any-return]
    n = flag_value(int, raw, "--seeds")
    if n < 1:
        raise ConfigError(f"--seeds {raw}: use at least 1 seed (--seeds S runs seeds 0..S-1)")
    return list(range(n))


def flags_to_overrides(args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """The flags given in ``args`` as ``key=value`` overrides, with a label per override naming its flag."""
    values: dict[str, Any] = {}
    for flag in FLAGS:
        if not hasattr(args, _dest(flag)):
            continue
        raw = getattr(args, _dest(flag))
        if flag.key == "suites":
            values[flag.option] = [s for v in raw for s in flag_value(flag.type, v, "--suite")]
        elif flag.key == "seeds":
            values[flag.option] = _seeds(raw)
        else:
            values[flag.option] = flag_value(flag.type, raw, flag.option)
    return flag_overrides(FLAGS, values)


def load(args: argparse.Namespace) -> EvalConfig:
    """The config of an ``eval`` command line: CONFIG, then the flags, then ``--set``. When the policy is a
    training run (or an adapter inside one), the run's own rollout settings (:data:`TRAINED_ROLLOUT`: tools,
    budgets, code action, env) come first, under all three, so the policy is scored in the loop it learned."""
    overrides, labels = flags_to_overrides(args)
    config = load_eval_config(args.config, [*overrides, *args.overrides], labels)
    trained = trained_rollout(config.policy) if config.policy else None
    if trained is None:
        return config
    path, rollout = trained
    config = load_eval_config(args.config, [*overrides, *args.overrides], labels, rollout=rollout)
    taken = sorted(k for k, v in rollout.items() if getattr(config.rollout, k) == _as_field(v))
    if taken:
        print(f"sandgym eval: rollout settings from {path}: {', '.join(taken)} (a flag, --set or the config "
              "overrides any of them)", file=sys.stderr, flush=True)
    return config


def _as_field(value: Any) -> Any:
    """A TOML value as the config holds it (lists become tuples)."""
    return tuple(value) if isinstance(value, list) else value


def _eval(args: argparse.Namespace) -> int:
    config = load(args)
    if args.print_config:
        print(to_toml(config), end="")
        return 0
    if not config.policy:
        raise ConfigError("--policy is required (e.g. --policy smollm2-135m or --policy runs/quickstart, or "
                          "policy = \"...\" in the config)")

    check_out_dir(config.out)  # bad input is reported before torch and transformers load
    check_policy(config.policy)
    if config.baseline:
        check_policy(config.baseline)

    print(f"sandgym eval: {config.policy}{' vs ' + config.baseline if config.baseline else ''}, writing to "
          f"{config.out} (episodes.jsonl, report.md, metrics.json)", file=sys.stderr, flush=True)
    load_tasks(config, report=lambda line: print(line, flush=True))  # how many tasks of how many, before the run
    result = (distributed.run if config.ray_workers > 0 else local.run)(config)
    print("| metric | candidate | baseline | gain |\n|---|---|---|---|")
    for row in headline_rows(result.metrics):
        print("| " + " | ".join(row) + " |")
    print(f"report: {result.report_md}  ({result.report_html})")
    print(f"metrics: {result.out_dir / 'metrics.json'}")
    return 0
