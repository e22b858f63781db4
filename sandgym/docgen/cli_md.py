"""``docs/CLI.md``: every ``sandgym`` command and subcommand, from the argument parsers themselves (synopsis,
help, each argument with its default), grouped by job with a short introduction and examples per group."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass

from sandgym.cli import build_parser
from sandgym.docgen.markdown import blocks, code, md, paragraphs, table

COMMAND = "python -m sandgym.docgen"
WIDTH = 100


@dataclass(frozen=True)
class Group:
    """Top-level commands documented together, with an introduction and example blocks (Markdown, doc-test
    markers included)."""

    title: str
    intro: str
    commands: tuple[str, ...]
    examples: str = ""


GROUPS: tuple[Group, ...] = (
    Group("Environments, tasks and rewards",
          "See what there is to train on, check it, and bring your own tasks: `envs` lists the environments, `tasks` "
          "lists, shows, validates, imports and exports task suites (and synthesises them from a repository of "
          "yours), `run` plays a scripted agent, `rewards` checks the versioned rewards and audits them for hacks, "
          "`sandbox check` probes the isolation.",
          ("envs", "tasks", "run", "rewards", "sandbox"),
          """<!-- doc-test: run -->
```bash
sandgym envs
sandgym tasks list
sandgym tasks show coding/strings:train --n 2 --chars 300
sandgym run --env sandgym/Coding-v0 --tasks coding/strings:train --agent oracle --episodes 2 --out runs/run/oracle.jsonl
```
"""),
    Group("Training",
          "`train` runs RL (GRPO family) on a LoRA adapter from a training config, `sft` only the supervised warm "
          "start, `sweep` one config over seeds and variations with a report, `demo` the whole loop for one "
          "track (SFT, RL, then base / SFT / SFT + RL on held-out tasks), and `recipe repo` a ladder of task forms "
          "made from a repository of yours, trained where the model has a foothold (docs/PRIVATE_DATA.md). The config's keys: docs/CONFIG.md.",
          ("train", "sft", "sweep", "demo", "recipe"),
          """<!-- doc-test: run -->
```bash
sandgym train examples/quickstart.toml --set optim.steps=2 --print-config
```

<!-- doc-test: illustrative (trains the 135M model: minutes to hours on a CPU) -->
```bash
sandgym train examples/quickstart.toml --set optim.steps=10
sandgym train --resume runs/quickstart
sandgym sweep examples/quickstart.toml --seeds 3 --vary algorithm.name=grpo,rloo --out runs/sweep
sandgym demo --track single_turn --out runs/demo_single_turn
sandgym recipe repo path/to/your/repo --out runs/my_repo_recipe
```
"""),
    Group("Evaluation",
          "`eval` scores a policy (a base model, an adapter, a run directory, a served model or a scripted agent) on "
          "held-out suites with intervals, `eval compare` puts finished evaluations side by side, and `transfer` "
          "scores a demo run's policies on a public benchmark that training never saw.",
          ("eval", "transfer"),
          """<!-- doc-test: run -->
```bash
sandgym eval --policy oracle --suite coding/strings:heldout --n-tasks 2 --samples 1 --out runs/eval/oracle
sandgym eval compare runs/eval/oracle
```

<!-- doc-test: illustrative (needs a finished demo run: 25 minutes and more) -->
```bash
sandgym transfer runs/demo --n-tasks 48
```
"""),
    Group("Your own data: feedback and judges",
          "Train on what users did with a model's output: `feedback import` turns an adoption log into "
          "trajectories and preference pairs, `feedback train` imports, trains (reward-weighted SFT) and "
          "evaluates in one command, `feedback simulate` runs the loop with hidden tests as the user. `judge "
          "calibrate` measures a model-based judge against labels. docs/PRIVATE_DATA.md has the formats.",
          ("feedback", "judge"),
          """<!-- doc-test: illustrative (needs an adoption log and trains a model) -->
```bash
sandgym feedback import logs.jsonl --out runs/feedback/imported.jsonl
sandgym feedback train logs.jsonl --config examples/quickstart.toml --out runs/feedback
```
"""),
    Group("Serving",
          "`serve` exposes an environment over OpenEnv's protocol; `mcp` serves an environment's tools as an MCP "
          "server over stdio, for agent harnesses that speak MCP; `serve-model` serves a model with vLLM's "
          "OpenAI-compatible API, for rollouts on a server (`[model] inference`). docs/INTEROP.md and "
          "docs/SCALING.md have the details.",
          ("serve", "mcp", "serve-model"),
          """<!-- doc-test: illustrative (starts a server that runs until stopped) -->
```bash
sandgym serve sandgym/Coding-v0 --port 8000
sandgym mcp sandgym/Coding-v0 --tasks coding/strings:train    # MCP over stdio: started by an MCP client
sandgym serve-model --model smollm2-135m --port 8011
```
"""),
)
"""The top-level commands by job; every command of the parser must be in exactly one group."""


def subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand of ``parser``, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action._name_parser_map.items():
                yield name, helps.get(name, ""), sub


def _option(action: argparse.Action) -> str:
    longs = [o for o in action.option_strings if o.startswith("--")]
    return longs[0] if longs else action.option_strings[0]


def _metavar(action: argparse.Action) -> str:
    if action.metavar is not None:
        return str(action.metavar)
    if action.choices is not None and not action.option_strings:
        return action.dest.upper()
    if action.choices is not None:
        return "{" + ",".join(map(str, action.choices)) + "}"
    return action.dest.upper()


def _usage_part(action: argparse.Action) -> str:
    if isinstance(action, argparse._SubParsersAction):
        return f"{action.metavar or 'COMMAND'} ..."
    if not action.option_strings:
        m = _metavar(action)
        return {"?": f"[{m}]", "*": f"[{m} ...]", "+": f"{m} [{m} ...]"}.get(str(action.nargs), m)
    flag = _option(action) if action.nargs == 0 else f"{_option(action)} {_metavar(action)}"
    return flag if action.required else f"[{flag}]"


def _shown(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions
            if not isinstance(a, (argparse._HelpAction, argparse._VersionAction)) and a.help != argparse.SUPPRESS]


def synopsis(prog: str, parser: argparse.ArgumentParser) -> str:
    """``usage: PROG POSITIONALS [OPTIONS]``, wrapped at :data:`WIDTH` columns."""
    actions = _shown(parser)
    parts = [_usage_part(a) for a in actions if not a.option_strings and not isinstance(a, argparse._SubParsersAction)]
    parts += [_usage_part(a) for a in actions if a.option_strings]
    parts += [_usage_part(a) for a in actions if isinstance(a, argparse._SubParsersAction)]
    lines, line = [], f"usage: {prog}"
    indent = " " * (len("usage: ") + len(prog) + 1)
    for part in parts:
        if len(line) + 1 + len(part) > WIDTH and line.strip() != f"usage: {prog}":
            lines.append(line)
            line = indent + part
        else:
            line += " " + part
    return "\n".join([*lines, line])


def _help(action: argparse.Action, prog: str) -> str:
    """The action's help with ``%(default)s`` and friends filled in, as argparse does."""
    text = action.help or ""
    params = {k: v for k, v in dict(vars(action), prog=prog).items() if v is not argparse.SUPPRESS}
    for name, value in list(params.items()):
        if hasattr(value, "__name__"):
            params[name] = value.__name__
    if params.get("choices") is not None:
        params["choices"] = ", ".join(map(str, params["choices"]))
    return text % params if "%" in text else text


def _group_description(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    for group in parser._action_groups:
        if action in group._group_actions and group.description:
            return group.description
    return ""


def _default(action: argparse.Action) -> str:
    value = action.default
    if value is None or value is argparse.SUPPRESS or value == [] or action.nargs == 0:
        return ""
    return code(str(value))


def arguments(prog: str, parser: argparse.ArgumentParser) -> list[str]:
    """The table of the parser's arguments: how to write each, its default and its help."""
    rows: list[tuple[str, ...]] = []
    for a in _shown(parser):
        if isinstance(a, argparse._SubParsersAction):
            names = ", ".join(code(n) for n, _, _ in subcommands(parser))
            rows.append((code(str(a.metavar or "COMMAND")), "", md(a.help or _group_description(parser, a)
                                                              or f"one of {names}")))
        elif not a.option_strings:
            rows.append((code(_metavar(a)), _default(a), md(_help(a, prog))))
        else:
            forms = [o if a.nargs == 0 else f"{o} {_metavar(a)}" for o in a.option_strings]
            rows.append((", ".join(code(f) for f in forms), _default(a), md(_help(a, prog))))
    return table(("argument", "default", "meaning"), rows) if rows else []


def command(prog: str, summary: str, parser: argparse.ArgumentParser, level: int) -> list[str]:
    """One command's section (and its subcommands', one heading level down)."""
    lines = [f"{'#' * level} `{prog}`", ""]
    if summary:
        lines += [md(summary[0].upper() + summary[1:]) + ("" if summary.endswith(".") else "."), ""]
    if parser.description and md(parser.description) != md(summary):
        lines += blocks(paragraphs(parser.description))
    lines += ["```text", synopsis(prog, parser), "```", ""]
    args = arguments(prog, parser)
    if args:
        lines += [*args, ""]
    if parser.epilog:
        lines += ["```text", parser.epilog.rstrip(), "```", ""]
    for name, help_line, sub in subcommands(parser):
        lines += command(f"{prog} {name}", help_line, sub, level + 1)
    return lines


INTRO = f"""# Command-line reference

<!-- Generated by `{COMMAND}` from the argument parsers (sandgym/cli.py and each package's cli module): edit
their help, then rerun it. tests/test_reference_docs.py fails when this file is stale. -->

Everything sandgym does from a shell is one command, `sandgym COMMAND ...`; `sandgym COMMAND --help` prints what
this page says about COMMAND. Commands that run for long print where they write as they start (on stderr) and show
their progress. Training and evaluation are configured by TOML files whose keys are in docs/CONFIG.md;
`--set KEY=VALUE` overrides one key and `--print-config` shows the result.
"""


def render() -> str:
    """The whole of docs/CLI.md."""
    parser = build_parser()
    commands = {name: (help_line, sub) for name, help_line, sub in subcommands(parser)}
    grouped = [c for g in GROUPS for c in g.commands]
    missing = [c for c in commands if c not in grouped]
    unknown = [c for c in grouped if c not in commands]
    twice = sorted({c for c in grouped if grouped.count(c) > 1})
    if missing or unknown or twice:
        raise ValueError(f"sandgym.docgen.cli_md.GROUPS: commands in no group {missing}, unknown {unknown}, in two "
                         f"groups {twice}; put each `sandgym` command in one group, then run `{COMMAND}`")
    lines = [INTRO, "```text", synopsis("sandgym", parser), "```", "",
             *table(("command", "what it does"), [(code(f"sandgym {c}"), md(commands[c][0])) for c in grouped]), ""]
    for group in GROUPS:
        lines += [f"## {group.title}", "", group.intro, ""]
        if group.examples:
            lines += [group.examples.rstrip(), ""]
        for name in group.commands:
            help_line, sub = commands[name]
            lines += command(f"sandgym {name}", help_line, sub, 3)
    return "\n".join(lines).rstrip("\n") + "\n"
