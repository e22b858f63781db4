"""``sandgym feedback train``: import an adoption log -> reward-weighted SFT on it -> held-out evaluation.

One call chains what a team runs after each batch of logs: ``sandgym feedback import`` (scrubbed, scored
trajectories and preference pairs), ``sandgym sft`` with ``sft.source`` = the imported file (reward-weighted SFT,
:mod:`sandgym.train.feedback_sft`), and ``sandgym eval`` of the new adapter against the policy it started from on the
same held-out tasks and seeds. Everything lands under ``OUT``::

    OUT/imported.jsonl, OUT/imported.pairs.jsonl   the import
    OUT/sft/adapter/                               the trained adapter (pass it to `sandgym eval --policy`)
    OUT/eval/metrics.json, report.md               adoption (completion) with intervals, gain vs the start
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sandgym.errors import ConfigError
from sandgym.evaluate.config import EvalConfig
from sandgym.evaluate.metrics import format_interval, format_p
from sandgym.evaluate.policies import check_out_dir
from sandgym.evaluate.run import load_tasks
from sandgym.evaluate.run import run as run_eval
from sandgym.experiments.periodic_eval import eval_suites
from sandgym.private.feedback import RewardMapping, import_feedback
from sandgym.train.config import TrainConfig


@dataclass(frozen=True)
class FeedbackTrainConfig:
    """One import -> train -> evaluate pass."""

    logs: str
    """The adoption log (JSONL of prompt, output, outcome, ...; see ``sandgym.private.feedback``)."""
    train: TrainConfig
    """Model, ``[rollout]`` (its system prompt is the SFT prompt's), ``[sft]`` (epochs, lr, micro_batch) and
    ``[eval]`` (held-out tasks per suite, samples, temperature); ``sft.source`` is set to the import."""
    out: str
    mapping: RewardMapping = RewardMapping()
    skip_bad: bool = False
    eval_suites: tuple[str, ...] = ()
    """Held-out suites (empty: ``eval.suites``, else each training suite's ``:heldout`` split)."""
    evaluate: bool = True
    baseline: bool = True
    """Evaluate the starting policy too (same tasks and seeds) for a paired gain."""

    def __post_init__(self) -> None:
        if not Path(self.logs).is_file():
            raise ConfigError(f"feedback log {self.logs!r} does not exist; pass the JSONL adoption log (one record "
                              "per line: prompt, output, outcome)")
        check_out_dir(self.out)


@dataclass(frozen=True)
class FeedbackTrainResult:
    imported: Path
    adapter: Path
    eval_dir: Path | None
    metrics: dict[str, Any]


def heldout_eval_config(train: TrainConfig, out: Path, *, policy: str, baseline: str | None = None,
                        suites: Sequence[str] = ()) -> EvalConfig:
    """The held-out evaluation of a feedback run: ``[eval]``'s tasks, samples and temperature in the training
    ``[rollout]`` (the environment the suggestions were made in)."""
    e = train.eval
    return EvalConfig(policy=policy, baseline=baseline, suites=tuple(suites) or eval_suites(train), out=str(out),
                      samples=e.samples, seeds=(0,), n_tasks=e.n_tasks, task_seed=e.task_seed,
                      difficulty=train.domains.mix[0].difficulty,
                      rollout=replace(train.rollout, temperature=e.temperature))


def run(config: FeedbackTrainConfig, report: Callable[[str], None] = print) -> FeedbackTrainResult:
    """Import, train, evaluate; ``report`` gets one line per stage saying what it did and where its output is."""
    from sandgym.train.sft import run_sft  # torch

    out = Path(config.out)
    base_policy = config.train.model.adapter or config.train.model.name
    cfg = heldout_eval_config(config.train, out / "eval", policy="pending", suites=config.eval_suites)
    if config.evaluate:
        load_tasks(cfg, report=lambda line: report(f"[0/3] held-out {line}"))  # a bad suite fails before training
    out.mkdir(parents=True, exist_ok=True)
    imported = out / "imported.jsonl"
    result = import_feedback(config.logs, imported, mapping=config.mapping, skip_bad=config.skip_bad)
    counts = {o: sum(t.metadata["outcome"] == o for t in result.trajectories) for o in ("accepted", "edited",
                                                                                          "rejected")}
    report(f"[1/3] imported {len(result.trajectories)} record(s) {counts}, {len(result.pairs)} pair(s), "
           f"{len(result.bad)} malformed skipped -> {imported}")
    train = replace(config.train, out_dir=str(out), sft=replace(config.train.sft, source=str(imported)))
    sft = run_sft(train, out / "sft")
    report(f"[2/3] reward-weighted SFT on {sft.demonstrations} record(s) {dict(sft.by_outcome)} (skipped "
           f"{dict(sft.skipped) or 'none'}), loss per epoch {[round(x, 4) for x in sft.losses]} -> {sft.adapter_dir}")
    if not config.evaluate:
        return FeedbackTrainResult(imported, sft.adapter_dir, None, {})
    cfg = replace(cfg, policy=str(sft.adapter_dir), baseline=base_policy if config.baseline else None)
    ev = run_eval(cfg)
    overall = ev.metrics["overall"]
    line = f"[3/3] held-out adoption {format_interval(overall.get('completion'))} on {overall.get('tasks', 0)} tasks"
    gain = ev.metrics.get("baseline", {}).get("gain_overall")
    if gain:
        line += (f"; start ({base_policy}) {gain['baseline']:.3f}, gain {format_interval(gain['diff'], signed=True)} "
                 f"{format_p(gain['p_value'])}")
    report(f"{line} -> {ev.report_md}")
    (out / "feedback_train.json").write_text(json.dumps({
        "logs": config.logs, "imported": str(imported), "import_counts": counts, "adapter": str(sft.adapter_dir),
        "sft": {"records": sft.demonstrations, "by_outcome": dict(sft.by_outcome), "skipped": dict(sft.skipped),
                "losses": list(sft.losses)},
        "eval": str(ev.out_dir), "adoption": overall.get("completion"), "gain": gain}, indent=2), encoding="utf-8")
    return FeedbackTrainResult(imported, sft.adapter_dir, ev.out_dir, ev.metrics)
