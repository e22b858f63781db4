"""``sandgym feedback simulate``: the feedback flywheel, with the tasks' hidden tests playing the user.

Round 0 measures held-out adoption of the starting policy. Each round r = 1..R then:

1. the current policy makes one suggestion for each of ``prompts`` fresh train-split prompts of the configured
   domains (the ``[rollout]`` environment at ``eval.temperature``, the deployment temperature);
2. a simulated user judges each through the task's hidden tests (the sandbox grading evaluation uses), by
   :func:`user_verdict`: *accepted* when every hidden test passes; *edited* when it fails but is code to work
   from, a python block that parses or passes at least one hidden test (the user fixes it: ``edited_output`` is
   the task's reference solution as a python block, the answer format of the oracle's demonstrations); *rejected*
   otherwise (prose, or code cut off or broken so that it does not parse). Episodes the sandbox failed are left
   out of the log;
3. the log is written as a real JSONL adoption log (``round-r/feedback_log.jsonl``), imported with
   ``sandgym feedback import``'s code and trained on with reward-weighted SFT (``sandgym.train.feedback_sft``),
   continuing from the previous round's adapter;
4. held-out adoption, the share of held-out episodes the user would accept (the evaluation's completion), is measured
   on the same held-out tasks and sampling seeds every round, with task-clustered bootstrap 95% intervals and a
   paired gain over round 0.

``OUT/rounds.json`` holds every round; ``OUT/ROUNDS.md`` the table.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import sandgym.pysyntax as pysyntax
from sandgym.agents.env_pool import EnvPool
from sandgym.agents.scripted import fenced
from sandgym.agents.trajectory import Trajectory
from sandgym.configs import to_dict
from sandgym.envs.outcome import EpisodeOutcome
from sandgym.envs.parsing import extract_code_blocks
from sandgym.errors import ConfigError
from sandgym.evaluate.aggregate import by_task, summarize
from sandgym.evaluate.episodes import EpisodeRow
from sandgym.evaluate.metrics import format_interval, format_p, paired_test
from sandgym.evaluate.policies import PolicyInfo, check_out_dir
from sandgym.evaluate.run import evaluate_policy, load_tasks
from sandgym.experiments.feedback_loop import heldout_eval_config
from sandgym.private.feedback import OUTCOMES, RewardMapping, import_feedback
from sandgym.tasks.registry import load_suite
from sandgym.tasks.task import Task
from sandgym.train import components
from sandgym.train.config import TrainConfig

USER_RULE = ("accepted: every hidden test passes; edited: it fails, but holds a python block that parses or passes "
             "at least one hidden test (edited_output = the task's reference solution as a ```python block); "
             "rejected: otherwise (prose, or code that does not parse)")


def parses(code: str) -> bool:
    """The code is valid Python (parsed, never run)."""
    try:
        pysyntax.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def user_verdict(outcome: EpisodeOutcome | None, suggestion: str) -> str:
    """The simulated user's verdict on one graded suggestion (see :data:`USER_RULE`).

    >>> from sandgym.envs.outcome import Grade
    >>> def verdict(passed, text="no code"):
    ...     return user_verdict(EpisodeOutcome(grade=Grade(tests_passed=passed, tests_expected=6)), text)
    >>> verdict(6), verdict(2), verdict(0, "```python\\ndef f(): return 1\\n```"), verdict(0, "```python\\ndef f(:")
    ('accepted', 'edited', 'edited', 'rejected')
    """
    if outcome is not None and outcome.success:
        return "accepted"
    if outcome is not None and outcome.grade.tests_passed > 0:
        return "edited"
    return "edited" if any(parses(code) for code in extract_code_blocks(suggestion)) else "rejected"


def reference_reply(task: Task) -> str | None:
    """The task's reference solution as the reply the environment accepts (one python block), if it has one file."""
    entry = str(task.metadata.get("entry_file", "solution.py"))
    files = task.reference.files if task.reference is not None else {}
    return fenced(files[entry]) if set(files) == {entry} else None


def log_record(t: Trajectory, task: Task, round_no: int) -> dict[str, Any]:
    """One adoption-log line (the format ``sandgym feedback import`` reads) for a graded suggestion."""
    verdict = user_verdict(t.outcome, t.completion_text)
    fix = reference_reply(task) if verdict == "edited" else None
    if verdict == "edited" and fix is None:
        verdict = "rejected"  # a user with no correct version to write keeps nothing
    grade = t.outcome.grade if t.outcome is not None else None
    record: dict[str, Any] = {
        "id": f"r{round_no}-{task.id}", "prompt": task.prompt, "output": t.completion_text, "outcome": verdict,
        "metadata": {"task_id": task.id, "domain": task.domain, "round": round_no,
                     "entry_file": str(task.metadata.get("entry_file", "solution.py")),
                     "tests_passed": grade.tests_passed if grade else 0,
                     "tests_expected": grade.tests_expected if grade else 0}}
    if fix is not None:
        record["edited_output"] = fix
    return record


@dataclass(frozen=True)
class FlywheelConfig:
    train: TrainConfig
    """Model (and starting ``model.adapter``), ``[rollout]`` (single-turn: ``max_turns = 1``,
    ``code_action = "submit"``), ``[[domains.mix]]`` (where prompts come from: their train splits), ``[sft]``
    (epochs, lr, micro_batch of each round's training) and ``[eval]`` (held-out ``n_tasks`` per suite, ``samples``,
    ``task_seed``, ``temperature``, also the suggestions' temperature)."""
    out: str
    rounds: int = 3
    prompts: int = 48
    """Train-split prompts per round (fresh each round), spread over the domains."""
    mapping: RewardMapping = RewardMapping()

    def __post_init__(self) -> None:
        if self.rounds < 1 or self.prompts < 1:
            raise ConfigError(f"rounds={self.rounds}, prompts={self.prompts}: both must be >= 1 (--rounds, --prompts)")
        r = self.train.rollout
        if r.max_turns != 1 or r.code_action != "submit":
            raise ConfigError(f"rollout.max_turns={r.max_turns}, rollout.code_action={r.code_action!r}: the flywheel "
                              "simulates one suggestion per prompt; use --set rollout.max_turns=1 --set "
                              "rollout.code_action='\"submit\"' (as in examples/quickstart.toml)")
        check_out_dir(self.out)


def round_prompts(config: FlywheelConfig, round_no: int) -> list[Task]:
    """``prompts`` train-split tasks for round ``round_no``, drawn round-robin over the domains with a per-round seed."""
    per_domain = [load_suite(d.suite, n=-(-config.prompts // len(config.train.domains.mix)),
                             seed=config.train.seed + 7919 * round_no, difficulty=d.difficulty)
                  for d in config.train.domains.mix]
    mixed = [t for group in zip(*per_domain, strict=False) for t in group]
    return mixed[: config.prompts]


def adoption(rows: Sequence[EpisodeRow], base: Sequence[EpisodeRow], previous: Sequence[EpisodeRow],
             samples: int) -> dict[str, Any]:
    """Held-out adoption with its interval, and the paired gains over round 0 (``base``) and the round before
    (``previous``), on the same tasks and sampling seeds."""
    s = summarize(rows, samples)

    def gain(other: Sequence[EpisodeRow]) -> dict[str, object]:
        ok = by_task([r for r in rows if not r.infra_failure], lambda r: float(r.success))
        return paired_test(ok, by_task([r for r in other if not r.infra_failure], lambda r: float(r.success))).to_json()

    return {"adoption": s.get("completion"), "tasks": s.get("tasks", 0), "episodes": s.get("episodes", 0),
            "infra_failures": sum(r.infra_failure for r in rows), "gain_vs_round0": gain(base),
            "gain_vs_previous": gain(previous)}


def run(config: FlywheelConfig, report: Callable[[str], None] = print, *, policy: Any = None) -> list[dict[str, Any]]:
    """Run the rounds; returns them (also in ``OUT/rounds.json`` and ``OUT/ROUNDS.md``, rewritten after each).

    ``policy``: a trainable policy to start from instead of the one ``config.train.model`` builds."""
    from sandgym.agents.rollout import rollout  # torch
    from sandgym.train.sft import run_sft

    out = Path(config.out)
    train = config.train
    heldout = load_tasks(heldout_eval_config(train, out, policy="live"), report=lambda x: report(f"held-out {x}"))
    policy = policy or components.build_policy(train, adapter=train.model.adapter, trainable=True)

    def measure(r: int) -> list[EpisodeRow]:
        cfg = heldout_eval_config(train, out / f"round-{r}" / "heldout", policy=f"round-{r}")
        info = PolicyInfo(spec=f"round-{r}", kind="live", model=train.model.name)
        return evaluate_policy(policy, info, cfg, Path(cfg.out), tasks=heldout)

    t0 = time.perf_counter()
    base = measure(0)
    rounds = [{"round": 0, **adoption(base, base, base, train.eval.samples), "wall_s": time.perf_counter() - t0}]
    previous = base
    _write(out, config, rounds, report)
    spec = replace(train.rollout, temperature=train.eval.temperature)
    for r in range(1, config.rounds + 1):
        t0 = time.perf_counter()
        rdir = out / f"round-{r}"
        rdir.mkdir(parents=True, exist_ok=True)
        tasks = round_prompts(config, r)
        with EnvPool(spec.env_factory()) as pool:
            trajs = rollout(policy, pool, tasks, group_size=1, config=spec.rollout_config(train.seed + r))
        by_id = {t.id: t for t in tasks}
        records = [log_record(t, by_id[t.task_id], r) for t in trajs if not t.infra_failure]
        counts = Counter(rec["outcome"] for rec in records)
        log = rdir / "feedback_log.jsonl"
        log.write_text("".join(json.dumps(rec, ensure_ascii=False) + "\n" for rec in records), encoding="utf-8")
        imported = import_feedback(log, rdir / "imported.jsonl", mapping=config.mapping)
        report(f"round {r}: {len(records)} suggestions {dict(counts)} ({len(trajs) - len(records)} sandbox failures) "
               f"-> {log}")
        row: dict[str, Any] = {"round": r, "suggestions": {o: counts.get(o, 0) for o in OUTCOMES},
                               "sandbox_failures": len(trajs) - len(records), "log": str(log),
                               "pairs": len(imported.pairs)}
        if counts["accepted"] + counts["edited"]:
            sft_cfg = replace(train, seed=train.seed + r, sft=replace(train.sft, source=str(rdir / "imported.jsonl")))
            sft = run_sft(sft_cfg, rdir / "sft", policy=policy)
            row["sft"] = {"records": sft.demonstrations, "by_outcome": dict(sft.by_outcome),
                          "losses": list(sft.losses), "adapter": str(sft.adapter_dir)}
            report(f"round {r}: SFT on {sft.demonstrations} records, loss {[round(x, 4) for x in sft.losses]} -> "
                   f"{sft.adapter_dir}")
        else:
            report(f"round {r}: nothing accepted or edited; no training this round")
        rows = measure(r)
        row.update(adoption(rows, base, previous, train.eval.samples), wall_s=time.perf_counter() - t0)
        previous = rows
        rounds.append(row)
        _write(out, config, rounds, report)
    return rounds


def _write(out: Path, config: FlywheelConfig, rounds: list[dict[str, Any]], report: Callable[[str], None]) -> None:
    last = rounds[-1]
    gain = last["gain_vs_round0"]
    report(f"round {last['round']}: held-out adoption {format_interval(last['adoption'])}, gain vs round 0 "
           f"{format_interval(gain['diff'], signed=True)} {format_p(gain['p_value'])} ({last['wall_s']:.0f}s)")
    doc = {"user_rule": USER_RULE, "rounds_planned": config.rounds, "prompts": config.prompts,
           "mapping": config.mapping.to_json(), "config": to_dict(config.train), "rounds": rounds}
    out.mkdir(parents=True, exist_ok=True)
    (out / "rounds.json").write_text(json.dumps(doc, indent=2, default=str), encoding="utf-8")
    (out / "ROUNDS.md").write_text(rounds_table(rounds), encoding="utf-8")


def rounds_table(rounds: Sequence[dict[str, Any]]) -> str:
    """The markdown table of ``rounds.json``'s rounds."""
    lines = ["| round | suggestions acc/edit/rej | SFT records | SFT loss (first -> last epoch) | held-out adoption "
             "[95% CI] | gain vs round 0 [95% CI] | p | gain vs previous round [95% CI] | p |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rounds:
        s = r.get("suggestions")
        sug = "/".join(str(s[o]) for o in OUTCOMES) if s else "-"
        sft = r.get("sft")
        loss = f"{sft['losses'][0]:.3f} -> {sft['losses'][-1]:.3f}" if sft else "-"
        gains = [r["gain_vs_round0"], r["gain_vs_previous"]]
        lines.append(f"| {r['round']} | {sug} | {sft['records'] if sft else '-'} | {loss} | "
                     f"{format_interval(r['adoption'])} | "
                     + " | ".join(f"{format_interval(g['diff'], signed=True)} | {format_p(g['p_value'])}" for g in gains)
                     + " |")
    return "\n".join(lines) + "\n"
