"""``make demo``: the whole loop on a fresh machine, with attribution, for one track.

Tracks (``--track``): ``test_and_fix_by_example`` (``examples/test_and_fix_by_example.toml``: multi-turn coding
where each code block is run against the visible tests, on the ``by_example`` family, whose constants only the
failing visible tests show, so the agent must read the failure and fix; the default and what ``make demo`` runs, at
its quick size (:data:`QUICK`), 25 minutes idle, ~3 more for the venv), ``long_context``
(``examples/long_context_lengths.toml``: multi-turn ``<tool_call>`` JSON, grep and read_file over documents of 1K-8K tokens in workspace files, then submit; completion
per length; at its quick size ~23 minutes), ``single_turn`` (``examples/quickstart.toml``: one code block,
submitted at once; ~12 minutes), ``test_and_fix`` (``examples/test_and_fix.toml``: the test-and-fix loop on
strings/lists/numbers; ~1.5 hours, and on the embedded model RL has not learned recovery there:
docs/BENCHMARKS.md), ``json_tools`` (``examples/json_tools.toml``: only ``<tool_call>`` JSON actions, the full tool
schema in the prompt; ~1 h 40 min), and ``all`` (each of them in ``OUT/<track>``). ``--full`` runs a track's config
and evaluation at full size instead of its quick size.

1. convert the embedded model once (cached);
2. SFT warm start on oracle demonstrations -> the SFT-only adapter;
3. RL from that adapter -> the SFT+RL adapter;
4. evaluate base, SFT-only and SFT+RL on the same held-out tasks and seeds (trained families and unseen ones);
5. write ``REPORT.md`` and ``REPORT.html`` (+ one eval report per policy) and print the headline table, the
   behaviour table (first-attempt pass, recovery, verify-before-submit, ...) and where everything is.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sandgym.agents.models import ensure_embedded_model, is_embedded
from sandgym.configs import to_dict, to_toml
from sandgym.errors import ConfigError, SandgymError
from sandgym.evaluate.aggregate import aggregate, subject_of, with_pooled
from sandgym.evaluate.config import EvalConfig
from sandgym.evaluate.episodes import EpisodeRow, read_prompts, read_rows
from sandgym.evaluate.manifest import build_manifest
from sandgym.evaluate.metrics import format_interval, format_p
from sandgym.evaluate.policies import describe_policy, load_policy
from sandgym.evaluate.report import write_reports
from sandgym.evaluate.report_browser import PolicyEpisodes, episodes_section
from sandgym.evaluate.report_training import training_section
from sandgym.evaluate.report_writer import Bullets, Report, Section, Table, Text, bar_figure
from sandgym.evaluate.run import evaluate_policy, load_suites, load_tasks
from sandgym.experiments.demo_all import POLICIES, TEST_BEHAVIOURS, can_run_tests, tracks_report
from sandgym.experiments.periodic_eval import load_curve
from sandgym.experiments.periodic_eval import train_with_eval as train
from sandgym.experiments.relabel_stage import relabel_warm_start
from sandgym.tasks.registry import parse_suite_spec
from sandgym.train.checkpoint import latest_checkpoint
from sandgym.train.config import TrainConfig, load_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QUICKSTART = EXAMPLES / "quickstart.toml"
TRACKS: dict[str, Path] = {
    "test_and_fix": EXAMPLES / "test_and_fix.toml",
    "test_and_fix_by_example": EXAMPLES / "test_and_fix_by_example.toml",
    "json_tools": EXAMPLES / "json_tools.toml",
    "long_context": EXAMPLES / "long_context_lengths.toml",
    "single_turn": QUICKSTART,
}
"""The demo's tracks (``make demo`` runs :data:`DEFAULT_TRACK` at its quick size: :data:`QUICK`)."""
DEFAULT_TRACK = "test_and_fix_by_example"
"""What ``make demo`` runs: multi-turn test-and-fix where only the failing tests show the exact output, within 30
minutes (QUICK)."""
EVAL_SIZE: dict[str, tuple[int, int]] = {"test_and_fix": (16, 2), "test_and_fix_by_example": (40, 2),
                                         "json_tools": (12, 2), "long_context": (15, 2), "single_turn": (16, 4)}
"""(held-out tasks per suite, samples per task) of each track's evaluation; ``--n-tasks``/``--samples`` override."""


@dataclass(frozen=True)
class Size:
    """How big a track's demo run is: config overrides, held-out tasks per suite, samples per task, and a cap on the
    unseen coding family's tasks (None: as many as each trained suite's)."""

    overrides: tuple[str, ...] = ()
    n_tasks: int = 16
    samples: int = 4
    unseen_tasks: int | None = None


QUICK: dict[str, Size] = {
    "long_context": Size(("optim.steps=4",), 10, 1),
    "test_and_fix_by_example": Size(("optim.steps=6", "optim.lr=1.5e-4"), 40, 2, unseen_tasks=16),
}
"""A track's quick size: what the demo runs unless ``--full``. long_context in 23-26 minutes on the idle 2-core CPU
(SFT 10 min, 4 GRPO steps, 40 held-out episodes per policy); test_and_fix_by_example in fewer, larger steps
(6 at 1.5x the learning rate instead of 10) and 16 unseen parsing tasks instead of 40 (docs/BENCHMARKS.md).
Explicit ``--set``/``--n-tasks``/``--samples`` win over it."""

UNSEEN_CODING = "coding/parsing:heldout"
"""The unseen family added to a coding track's evaluation (a domain suite's heldout split has its own)."""
BEHAVIOURS = ("first_attempt_pass", "recovery", "verify_before_submit", "submitted_failing", "submitted",
              "valid_call_rate", "turns", "evidence_found", "repeated_calls")
"""Behaviour metrics shown per policy (``sandgym.evaluate.behaviour``) when the track's episodes have them."""
WHERE_PRESENT = ("evidence_found", "repeated_calls")
"""Shown only when some policy's episodes have them (evidence: tasks that declare it; repeats: tool calls)."""


def eval_config(train: TrainConfig, out: Path, *, n_tasks: int, samples: int, seeds: int,
                unseen_tasks: int | None = None) -> EvalConfig:
    """Held-out tasks of the trained families plus unseen families (a coding track's capped at ``unseen_tasks``),
    with the training rollout settings."""
    specs = [parse_suite_spec(d.suite) for d in train.domains.mix]
    heldout = sorted({str(replace(p, split="heldout", n=None)) for p in specs})  # options (lengths) kept
    # a suite file's (from-repo's tasks.jsonl) families are its tasks' own, all trained: no family list for it
    families = tuple(sorted({p.name.split("/", 1)[1] for p in specs if "/" in p.name and not Path(p.name).exists()}))
    difficulty = max((d.difficulty for d in train.domains.mix if d.difficulty), default=None)  # the hardest trained
    coding = any(p.name.split("/")[0] == "coding" for p in specs)
    unseen = UNSEEN_CODING + (f"@{unseen_tasks}" if unseen_tasks else "")
    suites = (*heldout, *([unseen] if coding and families else []))
    return EvalConfig(
        policy="", suites=suites, out=str(out), samples=samples, seeds=tuple(range(seeds)), n_tasks=n_tasks,
        difficulty=difficulty, trained_families=families, rollout=replace(train.rollout, temperature=0.7),
    )


def evaluate(spec: str, name: str, cfg: EvalConfig, out: Path) -> list[EpisodeRow]:
    policy, info = load_policy(spec)
    rows = evaluate_policy(policy, info, replace(cfg, policy=spec), out / name, tasks=load_tasks(cfg))
    return rows


def report(out: Path, cfg: EvalConfig, rows: dict[str, list[EpisodeRow]], timings: dict[str, float],
           specs: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """Per-policy reports (each against the right baseline) and the attribution table."""
    pairs = {"base": None, "sft": "base", "sft_rl": "base"}
    labels = dict(POLICIES)
    metrics = {}
    suites = load_suites(cfg)
    for name, base in pairs.items():
        m = aggregate(rows[name], samples=cfg.samples, baseline=rows[base] if base else None,
                      trained_families=cfg.trained_families)
        manifest = build_manifest(cfg, suites, describe_policy(specs[name]), describe_policy(specs[base]) if base else None)
        m.update(schema="sandgym.eval/v1", policy={"spec": specs[name]},
                 baseline_policy={"spec": specs[base]} if base else None, config=to_dict(cfg),
                 manifest=manifest.to_json(), versions=manifest.versions())
        (out / name / "metrics.json").write_text(json.dumps(m, indent=2, default=str), encoding="utf-8")
        write_reports(out / name, m, [PolicyEpisodes(labels[n], tuple(rows[n]), read_prompts(out / n))
                                      for n in (name, base) if n])
        metrics[name] = m
    rl_vs_sft = aggregate(rows["sft_rl"], samples=cfg.samples, baseline=rows["sft"],
                          trained_families=cfg.trained_families)["baseline"]
    metrics["rl_vs_sft"] = rl_vs_sft

    attribution = demo_report(cfg, metrics, timings, episodes=rows)
    attribution.write(out, stem="REPORT")
    (out / "summary.json").write_text(json.dumps({"timings": timings, "metrics": metrics}, indent=2, default=str),
                                      encoding="utf-8")
    table, verdict = attribution_table(cfg, metrics)
    behaviours, lengths = behaviour_table(cfg, metrics), length_table(metrics)
    text = table.markdown() + "\n\n" + verdict
    if lengths is not None:
        text += "\n\n" + lengths.markdown()
    if behaviours is not None:
        text += "\n\n" + behaviours.markdown()
    return text, metrics


def attribution_table(cfg: EvalConfig, metrics: dict[str, Any]) -> tuple[Table, str]:
    """Base / SFT / SFT+RL side by side, and the verdict on RL's own gain over SFT."""

    def gain(g: dict[str, Any] | None) -> str:
        return "n/a" if not g else f"{format_interval(g['diff'], signed=True)} {format_p(g['p_value'])}"

    rows = []
    for name, label in POLICIES:
        m = metrics[name]
        b = m.get("baseline") or {}
        rows.append((label, format_interval(m["transfer"]["trained"].get("completion")),
                     format_interval(m["transfer"]["unseen"].get("completion")),
                     gain(b.get("gain_trained")) if b else "-", format_interval(m["overall"]["pass_at_k"].get("1")),
                     format_interval(m["overall"]["pass_hat_k"].get(str(cfg.samples)))))
    table = Table(("policy", "held-out, trained families", "unseen families", "gain vs base (trained)", "pass@1",
                   f"pass^{cfg.samples}"), tuple(rows))
    rl = metrics["rl_vs_sft"].get("gain_trained")
    verdict = f"RL over SFT on held-out trained families: {gain(rl)}. " + rl_verdict(rl)
    lengths = with_pooled(metrics["rl_vs_sft"], "gain_by_length")
    if lengths:
        verdict += f" Per {subject_of(metrics['base'])}, RL over SFT: " + "; ".join(f"{b} {gain(g)}" for b, g in lengths.items()) + "."
    shifted = [f"{name.replace('_', ' ')} {gain(g)}" for name, g in
               (metrics["rl_vs_sft"].get("behaviour_gain") or {}).items()
               if name in ("recovery", "verify_before_submit") and runs_tests(cfg.rollout)
               and metrics["sft"].get("behaviour", {}).get(name)]
    if shifted:
        verdict += " Behaviour, RL over SFT: " + "; ".join(shifted) + "."
    return table, verdict


def rl_verdict(gain: dict[str, Any] | None) -> str:
    """Whether RL's paired gain over SFT is established: the bootstrap interval above zero *and* the paired test
    under 0.05 (with few tasks the interval can clear zero while the test does not; that is called suggestive)."""
    if not gain or gain["diff"]["low"] <= 0:
        return "The interval includes zero: on this budget RL's own gain over SFT is not established."
    p = gain.get("p_value")
    if p is not None and p >= 0.05:
        return (f"The interval excludes zero but the paired test does not ({format_p(p)}): suggestive, not "
                "established on this many tasks.")
    return "The interval excludes zero and the paired test agrees: RL added a measurable gain."


def behaviour_table(cfg: EvalConfig, metrics: dict[str, Any]) -> Table | None:
    """Per policy, what it does (first-attempt pass, recovery, verify-before-submit, submitted, valid calls, turns),
    and RL's paired change over SFT; None for a single-turn track (one block, submitted: nothing to show)."""
    if cfg.rollout.max_turns <= 1:
        return None
    def traps(name: str) -> str:
        return format_interval((metrics[name].get("traps") or {}).get("trap_failure_rate"))

    present = {b for name, _ in POLICIES for b in metrics[name].get("behaviour", {})}
    shown = tuple(b for b in BEHAVIOURS if (runs_tests(cfg.rollout) or b not in TEST_BEHAVIOURS)
                  and (b in present or b not in WHERE_PRESENT))
    rows = [(label, *(format_interval(metrics[name].get("behaviour", {}).get(b)) for b in shown), traps(name))
            for name, label in POLICIES]
    gains = metrics["rl_vs_sft"].get("behaviour_gain") or {}
    rows.append(("RL over SFT (paired)", *(format_interval(gains[b]["diff"], signed=True) if b in gains else "n/a"
                                           for b in shown), ""))
    return Table(("policy", *(b.replace("_", " ") for b in shown), "trap failures"), tuple(rows))


def runs_tests(rollout: Any) -> bool:
    """Whether the agent can run the visible tests: a code action that runs them, or the run_tests tool (an empty
    tool list offers every built-in tool)."""
    return can_run_tests(rollout.code_action, rollout.tools)


LENGTH_TASKS = {"document length": "long-context tasks",
                "repository size": "bug reports (the tokens of the whole workspace the agent searches)"}


def length_table(metrics: dict[str, Any]) -> Table | None:
    """Per document length: each policy's completion and RL's paired change over SFT; None without documents."""
    if not metrics["base"].get("by_length"):
        return None
    lengths = list(with_pooled(metrics["base"], "by_length"))  # each length, then the pooled "4K+" columns
    gains = with_pooled(metrics["rl_vs_sft"], "gain_by_length")
    rows = [(label, *(format_interval(with_pooled(metrics[name], "by_length").get(b, {}).get("completion"))
                      for b in lengths)) for name, label in POLICIES]
    rows.append(("RL over SFT (paired)", *(f"{format_interval(gains[b]['diff'], signed=True)} "
                                           f"{format_p(gains[b]['p_value'])}" if b in gains else "n/a"
                                           for b in lengths)))
    return Table(("policy", *lengths), tuple(rows))


def demo_report(cfg: EvalConfig, metrics: dict[str, Any], timings: dict[str, float], *, under: str = "",
                episodes: Mapping[str, Sequence[EpisodeRow]] | None = None) -> Report:
    """The attribution report (the verdict first), the training curve of ``train/`` beside the evaluation directory
    ``cfg.out``, and a browser of every policy's ``episodes`` (by default, those in ``cfg.out/<policy>``); ``under``
    is the path from the report to the per-policy report directories."""
    table, verdict = attribution_table(cfg, metrics)
    run_dir = Path(cfg.out).parent / "train"
    if episodes is None:
        episodes = {name: read_rows(Path(cfg.out) / name / "episodes.jsonl") for name, _ in POLICIES}
    browser = episodes_section([PolicyEpisodes(label, tuple(episodes.get(name, ())), read_prompts(Path(cfg.out) / name))
                                for name, label in POLICIES])
    behaviours, lengths = behaviour_table(cfg, metrics), length_table(metrics)
    subject = subject_of(metrics["base"])
    fig = bar_figure("held-out completion by policy (95% CI)", ["trained families", "unseen families"],
                     [(label, [metrics[name]["transfer"][g].get("completion") for g in ("trained", "unseen")])
                      for name, label in POLICIES])
    return Report("sandgym demo report", (
        Section("Headline", (
            Text(verdict), table,
            Text(f"Held-out tasks: {', '.join(cfg.suites)}; {cfg.n_tasks} tasks per suite, {cfg.samples} samples x "
                 f"{len(cfg.seeds)} seeds; 95% bootstrap intervals over tasks; gains paired over the same tasks and "
                 "seeds."),
            *((fig,) if fig else ()))),
        *((Section(f"By {subject}", (lengths, Text(
            f"Completion on the held-out {LENGTH_TASKS.get(subject, 'tasks')} per {subject} (trained and unseen "
            "families together), 95% intervals over tasks; RL over SFT paired over the same tasks and seeds. A "
            "column such as 4K+ pools that size and every larger one (the tasks a claim about >= 4K tokens is "
            "tested on).")))
           ,) if lengths is not None else ()),
        *((Section("Behaviour", (behaviours, Text(
            ("first attempt pass: the first visible-test run passed; recovery: of the episodes whose first run "
             "failed, the share that ended solved; verify before submit: submitted code the visible tests had run "
             "on; " if runs_tests(cfg.rollout) else "")
            + "submitted: submitted before the turns ran out; valid call rate: turns whose reply was a parseable "
            "action (a schema-valid tool call, or an accepted code block); turns: per episode; intervals over "
            "tasks, gains paired.")))
           ,) if behaviours is not None else ()),
        training_section(_training_metrics(run_dir), load_curve(run_dir), source="train/metrics.jsonl"),
        browser,
        Section("Stage timings", (Text(", ".join(f"{k} {v:.0f} s" for k, v in timings.items()) or "none recorded"),)),
        Section("Per-policy reports", (Bullets(tuple(
            f"{label}: [{under}{name}/report.html]({under}{name}/report.html)" for name, label in POLICIES)),)),
    ), html_name="REPORT.html")


def check_same_config(out: Path, config: TrainConfig) -> None:
    """A re-run resumes the finished stages of ``out``; refuse when they were made with another config."""
    stamp = out / "demo_config.toml"
    text = to_toml(config)
    if stamp.is_file() and stamp.read_text(encoding="utf-8") != text:
        raise ConfigError(f"{out} holds a demo run of a different config ({stamp}); remove {out} or pass --out NEW_DIR")
    stamp.write_text(text, encoding="utf-8")


def track_size(track: str, *, full: bool) -> Size:
    """The size a track runs at: its :data:`QUICK` size unless ``full`` (or it has none: :data:`EVAL_SIZE`)."""
    size = Size((), *EVAL_SIZE.get(track, (16, 4)))
    return size if full else QUICK.get(track, size)


TRACK_HELP: dict[str, str] = {
    "test_and_fix_by_example": "multi-turn test-and-fix; the constants show only in failing tests (~25 min)",
    "long_context": "<tool_call> grep/read_file over 1K-8K-token documents, then submit (~23 min)",
    "single_turn": "one code block, submitted at once (examples/quickstart.toml; ~12 min)",
    "test_and_fix": "multi-turn test-and-fix on strings/lists/numbers (~1.5 h)",
    "json_tools": "<tool_call> JSON actions only, the full tool schema in the prompt (~1 h 40 min)",
    "all": "every track above, each in OUT/<track>, then one report of them all",
}
"""One line per ``--track`` for ``sandgym demo --help`` (times: the default size, the idle 2-core CPU)."""

DESCRIPTION = ("The whole loop for one track: SFT warm start, RL, then base / SFT / SFT + RL on the same held-out\n"
               "tasks, with a report (OUT/REPORT.md, OUT/REPORT.html). A rerun with the same --out resumes.")


def track_lines() -> str:
    """The ``--track`` choices, one line each, the default marked (``sandgym demo --help``)."""
    width = max(map(len, TRACK_HELP))
    order = [DEFAULT_TRACK, *(t for t in TRACK_HELP if t != DEFAULT_TRACK)]
    return "tracks (--track; times of a default-size run on an idle 2-core CPU):\n" + "\n".join(
        f"  {name:<{width}}  {'(default) ' if name == DEFAULT_TRACK else ''}{TRACK_HELP[name]}" for name in order)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The demo's arguments (``sandgym demo`` and ``python -m sandgym.demo``)."""
    ap.add_argument("--track", choices=list(TRACK_HELP), default=DEFAULT_TRACK, metavar="TRACK",
                    help=f"which track to run (default: {DEFAULT_TRACK}; the tracks are listed below)")
    ap.add_argument("--full", action="store_true",
                    help="run the track's config and evaluation at full size, not its quick (demo) size")
    ap.add_argument("--config", default=None, help="a training config instead of the track's")
    ap.add_argument("--out", default="runs/demo", help="output directory (default: runs/demo)")
    ap.add_argument("--n-tasks", type=int, default=None, help="held-out tasks per suite (default: the track's)")
    ap.add_argument("--samples", type=int, default=None, help="samples per task (default: the track's)")
    ap.add_argument("--seeds", type=int, default=1, help="sampling seeds 0..S-1 of the evaluation (default: 1)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a training-config key, e.g. --set optim.steps=2 (repeatable)")
    ap.add_argument("--relabel", action="store_true",
                    help="after the oracle warm start, train it further on its own train-task episodes relabelled "
                         "by the oracle (sft.relabel), before RL; the SFT policy evaluated is that adapter")


def build_parser(prog: str = "python -m sandgym.demo") -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog, description=DESCRIPTION, epilog=track_lines(),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    return ap


def main(argv: list[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """The demo for the parsed arguments of :func:`add_arguments`."""
    if args.track == "all":
        if args.config:
            raise ConfigError("--track all runs each track's own config; drop --config (or pick one --track)")
        common = [*(["--n-tasks", str(args.n_tasks)] if args.n_tasks else []),
                  *(["--samples", str(args.samples)] if args.samples else []),
                  "--seeds", str(args.seeds), *(x for o in args.overrides for x in ("--set", o)),
                  *(["--full"] if args.full else [])]
        codes = [main([*common, "--track", t, "--out", str(Path(args.out) / t)]) for t in TRACKS]
        report_all, table = tracks_report(Path(args.out), list(TRACKS))
        report_all.write(Path(args.out), stem="REPORT")
        print("\n" + table + "\n")
        print(f"report:      {Path(args.out) / 'REPORT.md'} ({Path(args.out) / 'REPORT.html'}); per track: "
              f"{Path(args.out)}/<track>/REPORT.md")
        return max(codes)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"sandgym demo: track {args.track if not args.config else args.config}, writing to {out} (training in "
          f"{out / 'train'}, evaluation in {out / 'eval'}, report {out / 'REPORT.md'})", file=sys.stderr)
    timings: dict[str, float] = {}

    size = track_size(args.track, full=args.full or bool(args.config))
    config = load_config(args.config or str(TRACKS[args.track]),
                         [*size.overrides, *args.overrides, f'out_dir="{out / "train"}"'])
    check_same_config(out, config)
    t = time.perf_counter()

    if is_embedded(config.model.name):
        model_dir = ensure_embedded_model()
        print(f"[demo] model ready in {time.perf_counter() - t:.0f} s ({model_dir})", file=sys.stderr)
    timings["model"] = time.perf_counter() - t
    t = time.perf_counter()
    from sandgym.train.sft import run_sft

    sft_dir = out / "train" / "sft"
    if not (sft_dir / "adapter" / "adapter_config.json").is_file():
        run_sft(config, sft_dir)
    sft_adapter = sft_dir / "adapter"
    timings["sft"] = time.perf_counter() - t
    if getattr(args, "relabel", False):
        t = time.perf_counter()
        sft_adapter = relabel_warm_start(config, sft_adapter, out / "train" / "relabel")
        timings["sft_relabel"] = time.perf_counter() - t

    t = time.perf_counter()

    rl_config = replace(config, init="base", model=replace(config.model, adapter=str(sft_adapter)))
    done = latest_checkpoint(out / "train")
    if done is None or not done.name.endswith(f"{config.optim.steps:06d}"):
        train(rl_config, resume=done is not None)
    timings["rl"] = time.perf_counter() - t

    cfg = eval_config(config, out / "eval", n_tasks=args.n_tasks or size.n_tasks,
                      samples=args.samples or size.samples, seeds=args.seeds, unseen_tasks=size.unseen_tasks)
    specs = {"base": config.model.name, "sft": str(sft_adapter), "sft_rl": str(out / "train")}
    rows = {}
    for name, spec in specs.items():
        t = time.perf_counter()
        rows[name] = evaluate(spec, name, cfg, out / "eval")
        timings[f"eval_{name}"] = time.perf_counter() - t
    text, metrics = report(out / "eval", cfg, rows, timings, specs)
    demo_report(cfg, metrics, timings, under="eval/").write(out, stem="REPORT")
    print("\n" + text + "\n")
    print(f"report:      {out / 'REPORT.md'} ({out / 'REPORT.html'})")
    print(f"eval detail: {out / 'eval'}/<base|sft|sft_rl>/report.html")
    print(f"training:    {out / 'train'} (metrics.jsonl, checkpoints/, tb/)")
    return 0


def console_main() -> int:
    """``python -m sandgym.demo`` (``make demo``): :func:`main`, with a sandgym error as one line and exit 2."""

    try:
        return main()
    except SandgymError as exc:
        print(f"sandgym demo: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(console_main())


def _training_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The run's per-step metrics; imported here because sandgym.train.metrics pulls in torch, and the CLI's
    config errors must come before torch is imported."""
    from sandgym.train.metrics import load_metrics

    return load_metrics(run_dir)
