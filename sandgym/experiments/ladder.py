"""The repository recipe's ladder: score the base model on each rung, train where it has a foothold, report per rung.

Stages after the tasks (``sandgym.experiments.repo_recipe``), each found done by a rerun with the same ``--out``:

1. ``rungs/``: one task file per rung (``rungs/<kind>.jsonl``) and, per rung, its held-out tasks with one train
   task and its answer in front of each prompt (``rungs/<kind>-oneshot.jsonl``: the one-shot base model);
2. ``probe/``: the base model on a sample of each rung's *train* tasks; a rung where it solves any has a foothold
   (the held-out split is never looked at to decide);
3. ``train.toml`` and ``run/train``: an SFT warm start on oracle demonstrations of the trained rungs, then GRPO;
4. ``run/eval/<rung>/<policy>``: base, one-shot base, SFT and SFT + RL on each trained rung's held-out tasks, paired
   over the same tasks and sampling seeds;
5. ``run/REPORT.md`` / ``.html`` and ``run/summary.json``: per rung, completion and the paired gains, which rungs are
   out of reach and what would change that, stage times and peak memory.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sandgym.agents.models import ensure_embedded_model, is_embedded
from sandgym.errors import ConfigError
from sandgym.evaluate.aggregate import paired_gain, summarize
from sandgym.evaluate.config import EvalConfig
from sandgym.evaluate.episodes import EpisodeRow
from sandgym.evaluate.metrics import format_interval, format_p
from sandgym.evaluate.report_writer import Bullets, Report, Section, Table, Text
from sandgym.experiments.demo import check_same_config, evaluate
from sandgym.experiments.periodic_eval import train_with_eval
from sandgym.private.recipe import TRAIN_NAME, ladder_toml, rung_rollout
from sandgym.private.rungs import LADDER
from sandgym.rollout.spec import RolloutSpec
from sandgym.tasks.definitions import definition_source
from sandgym.tasks.load import load_jsonl, save_jsonl
from sandgym.tasks.task import Task
from sandgym.train.checkpoint import latest_checkpoint
from sandgym.train.config import load_config


@dataclass(frozen=True)
class Size:
    """The budgets of a recipe run (``--size``)."""

    rungs: tuple[str, ...]
    """The rungs made and scored by default (``--rungs`` overrides)."""
    probe_tasks: int
    """Train tasks per rung the base model is probed on (2 samples each)."""
    sft_episodes: int
    sft_epochs: int
    rl_steps: int
    tasks_per_step: int
    group_size: int
    rl_lr: float
    samples: int
    """Samples per held-out task."""

    def toml(self) -> dict[str, object]:
        return {"sft_episodes": self.sft_episodes, "sft_epochs": self.sft_epochs, "rl_steps": self.rl_steps,
                "tasks_per_step": self.tasks_per_step, "group_size": self.group_size, "rl_lr": self.rl_lr}


SIZES: dict[str, Size] = {
    "cpu": Size(("complete", "fix", "find"), probe_tasks=8, sft_episodes=64, sft_epochs=3, rl_steps=6, tasks_per_step=4,
                group_size=4, rl_lr=1e-4, samples=2),
    "gpu": Size(LADDER, probe_tasks=32, sft_episodes=256, sft_epochs=3, rl_steps=40, tasks_per_step=8,
                group_size=8, rl_lr=5e-5, samples=4),
}
"""``cpu`` (the default): the embedded 135M model on a 2-core CPU within an hour, the two lower rungs; ``gpu``: a
bigger model on an accelerator, every rung up to the tool-using kinds (untested here: no GPU run of it is recorded)."""
POLICIES = (("base", "base"), ("oneshot", "base, one-shot"), ("sft", "SFT"), ("sft_rl", "SFT + RL"))
PROBE_SAMPLES = 2


def split_rungs(tasks_path: Path, out: Path, rungs: tuple[str, ...]) -> dict[str, Path]:
    """``out/<rung>.jsonl`` for each rung with both train and held-out tasks, and its one-shot held-out file."""
    tasks = load_jsonl(tasks_path)
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    for rung in rungs:
        mine = [t for t in tasks if t.metadata.get("kind") == rung]
        train = [t for t in mine if t.split == "train"]
        heldout = [t for t in mine if t.split == "heldout"]
        if not train or not heldout:
            print(f"[recipe] rung {rung}: {len(train)} train / {len(heldout)} held-out tasks; it needs both (raise "
                  "--max-tasks or --heldout-fraction): not trained or scored", file=sys.stderr, flush=True)
            continue
        files[rung] = save_jsonl(mine, out / f"{rung}.jsonl")
        example = one_shot_example(train)
        save_jsonl([with_example(t, example) for t in heldout], out / f"{rung}-oneshot.jsonl")
    if not files:
        raise ConfigError(f"{tasks_path} has no rung with both train and held-out tasks among {list(rungs)}; raise "
                          "--max-tasks, change --heldout-fraction or pick other --rungs")
    return files


def answer(task: Task) -> str:
    """The oracle's reply to a rung task: its reference definition (``find``: the name) in a code block."""
    assert task.reference is not None
    if task.metadata.get("answer_block"):
        return f"```python\n{task.reference.answer}\n```"
    entry = str(task.metadata["entry_file"])
    code = definition_source(task.reference.files[entry], str(task.metadata["definition"]), docstring=False)
    return f"```python\n{code}```"


def one_shot_example(train: list[Task]) -> Task | None:
    """The train task shown to the one-shot base model: the shortest whole one (no part of the body shown)."""
    whole = [t for t in train if not t.metadata.get("variant")
             and (t.metadata.get("definition") or t.metadata.get("answer_block"))]
    return min(whole, key=lambda t: (len(t.prompt) + len(answer(t)), t.id)) if whole else None


def with_example(task: Task, example: Task | None) -> Task:
    """``task`` with ``example`` and its answer in front of its prompt (the same id: paired with the plain one)."""
    if example is None:  # a tool-using rung: the example would be a whole episode, not one answer
        return task
    return replace(task, prompt=f"An example task from the same project, with its answer.\n\n{example.prompt}\n\n"
                                f"Answer:\n{answer(example)}\n\nNow your task.\n\n{task.prompt}")


def eval_config(suite: str, rung: str, out: Path, samples: int, n_tasks: int | None = None) -> EvalConfig:
    """The evaluation of one rung's tasks with the rung's own rollout (sampling at 0.7)."""
    rollout = RolloutSpec(**{**rung_rollout(rung), "temperature": 0.7})  # type: ignore[arg-type]
    return EvalConfig(policy="", suites=(suite,), out=str(out), samples=samples, seeds=(0,), n_tasks=n_tasks,
                      rollout=rollout)


def completion(rows: list[EpisodeRow], samples: int) -> dict[str, Any]:
    return dict(summarize(rows, samples)["completion"])


def probe(files: Mapping[str, Path], model: str, out: Path, size: Size) -> dict[str, dict[str, Any]]:
    """The base model on ``size.probe_tasks`` train tasks of each rung; ``out/probe.json``."""
    path = out / "probe.json"
    if path.is_file():
        found: dict[str, dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
        if set(found) == set(files):
            return found
    result = {}
    for rung, file in files.items():
        cfg = eval_config(f"{file}:train", rung, out / rung, PROBE_SAMPLES, size.probe_tasks)
        rows = evaluate(model, "base", cfg, out / rung)
        result[rung] = {"tasks": len({r.task_id for r in rows}), "episodes": len(rows),
                        "solved": sum(r.success for r in rows), "completion": completion(rows, PROBE_SAMPLES)}
        print(f"[recipe] probe {rung}: base solved {result[rung]['solved']} of {len(rows)} train episodes",
              file=sys.stderr, flush=True)
    path.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


def footholds(found: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], str]:
    """The rungs to train (where the base model solved any probed train task; else the lowest) and why."""
    held = [r for r in LADDER if r in found and found[r]["solved"] > 0]
    if held:
        return held, f"trained on {', '.join(held)}: the base model solved some of their probed train tasks"
    low = next(r for r in LADDER if r in found)
    return [low], f"no rung gave the base model a foothold; trained on the lowest, {low}"


def peak_memory_mb() -> float:
    """The largest resident set of this process or any child it waited for (MB)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round(max(own, kids) / 1024, 1)


def train_rungs(out: Path, trained: list[str], files: Mapping[str, Path], model: str, size: Size,
                overrides: list[str], timings: dict[str, float]) -> tuple[str, str]:
    """SFT then GRPO on the trained rungs' train splits; returns the SFT adapter and the run directory."""
    from sandgym.train.sft import run_sft

    run_dir = out / "run" / "train"
    toml = out / TRAIN_NAME
    if not toml.is_file():
        toml.write_text(ladder_toml({r: f"{files[r].as_posix()}:train" for r in trained}, model,
                                    run_dir.as_posix(), size.toml()), encoding="utf-8")
    config = load_config(str(toml), [*overrides, f'out_dir="{run_dir.as_posix()}"'])
    check_same_config(out / "run", config)
    if is_embedded(config.model.name):
        ensure_embedded_model()
    sft_dir = run_dir / "sft"
    t = time.perf_counter()
    if not (sft_dir / "adapter" / "adapter_config.json").is_file():
        run_sft(config, sft_dir)
        timings["sft"] = time.perf_counter() - t
    t = time.perf_counter()
    rl = replace(config, init="base", model=replace(config.model, adapter=str(sft_dir / "adapter")))
    done = latest_checkpoint(run_dir)
    if done is None or not done.name.endswith(f"{config.optim.steps:06d}"):
        train_with_eval(rl, resume=done is not None)
        timings["rl"] = time.perf_counter() - t
    return str(sft_dir / "adapter"), str(run_dir)


def score(out: Path, rung: str, file: Path, specs: Mapping[str, str], samples: int,
          timings: dict[str, float]) -> dict[str, list[EpisodeRow]]:
    """Each policy on the rung's held-out tasks (the one-shot base on their one-shot copies)."""
    rows = {}
    for name, _ in POLICIES:
        suite = file.with_name(f"{rung}-oneshot.jsonl") if name == "oneshot" else file
        cfg = eval_config(f"{suite}:heldout", rung, out / rung, samples)
        t = time.perf_counter()
        rows[name] = evaluate(specs[name], name, cfg, out / rung)
        timings[f"eval_{rung}_{name}"] = timings.get(f"eval_{rung}_{name}", 0.0) + time.perf_counter() - t
    return rows


def rung_metrics(rows: Mapping[str, list[EpisodeRow]], samples: int) -> dict[str, Any]:
    """Completion per policy and the paired gains the report shows."""
    pairs = {"sft_vs_base": ("sft", "base"), "sft_rl_vs_base": ("sft_rl", "base"),
             "sft_vs_oneshot": ("sft", "oneshot"), "sft_rl_vs_oneshot": ("sft_rl", "oneshot"),
             "oneshot_vs_base": ("oneshot", "base"), "rl_vs_sft": ("sft_rl", "sft")}
    return {"tasks": len({r.task_id for r in rows["base"]}), "samples": samples,
            "completion": {n: completion(rows[n], samples) for n, _ in POLICIES},
            "gains": {k: paired_gain(rows[a], rows[b]) for k, (a, b) in pairs.items()}}


def verdict(gain: Mapping[str, Any] | None) -> str:
    """established (interval above zero, p < 0.05), suggestive (interval above zero only), or not established."""
    if not gain or gain["diff"]["low"] <= 0:
        return "not established"
    return "established" if gain["p_value"] < 0.05 else "suggestive"


def _gain(g: Mapping[str, Any] | None) -> str:
    return "n/a" if not g else f"{format_interval(g['diff'], signed=True)} {format_p(g['p_value'])}"


OUT_OF_REACH = ("out of reach for this model at this size: what would change that is a bigger model (--model), a GPU "
                "(--size gpu: more demonstrations and RL steps), or more demonstrations of it (--set sft.episodes=N)")


def ladder_report(summary: Mapping[str, Any]) -> Report:
    """Per rung: the probe, and for a trained rung each policy's held-out completion with the paired gains."""
    sections = []
    lines = []
    for rung, found in summary["probe"].items():
        m = summary["rungs"].get(rung)
        if m is None:
            lines.append(f"`{rung}`: base solved {found['solved']} of {found['episodes']} probed train episodes; "
                         + ("not trained: " + OUT_OF_REACH if not found["solved"] else "not trained"))
            continue
        g = m["gains"]
        best = max(("sft_vs_base", "sft_rl_vs_base"), key=lambda k: (g[k] or {}).get("diff", {}).get("value", -1))
        lines.append(f"`{rung}` ({m['tasks']} held-out tasks x {m['samples']}): trained over base "
                     f"{_gain(g[best])} ({'SFT' if best == 'sft_vs_base' else 'SFT + RL'}): {verdict(g[best])}; "
                     f"over the one-shot base {_gain(g[best.replace('base', 'oneshot')])}; RL over SFT "
                     f"{_gain(g['rl_vs_sft'])}: {verdict(g['rl_vs_sft'])}")
        rows = []
        for name, label in POLICIES:
            rows.append((label, format_interval(m["completion"][name]),
                         _gain(g.get(f"{name}_vs_base")) if name != "base" else "-",
                         _gain(g.get(f"{name}_vs_oneshot")) if name in ("sft", "sft_rl") else "-"))
        rows.append(("RL over SFT (paired)", _gain(g["rl_vs_sft"]), "", ""))
        sections.append(Section(f"Rung `{rung}`", (
            Table(("policy", "held-out completion", "vs base (paired)", "vs one-shot base (paired)"), tuple(rows)),
            Text(f"{m['tasks']} held-out tasks x {m['samples']} samples, sampling at 0.7; 95% bootstrap intervals "
                 "over tasks; gains paired over the same tasks and seeds (sign-flip test)."))))
    timings = summary["timings"]
    return Report("sandgym recipe repo: the ladder", (
        Section("Headline", (Text(summary["why"]), Bullets(tuple(lines)))),
        *sections,
        Section("Stage times and memory", (Text(", ".join(f"{k} {v:.0f} s" for k, v in timings.items())
                                                + f"; peak memory {summary['peak_memory_mb']:.0f} MB (largest "
                                                "resident set of the recipe or a child process)."),)),
    ), html_name="REPORT.html")


def run_ladder(out: Path, tasks_path: Path, rungs: tuple[str, ...], model: str, size: Size,
               overrides: list[str]) -> dict[str, Any]:
    """Stages 1-5 of the module docstring; returns the summary written to ``out/run/summary.json``."""
    stamp = out / "run" / "timings.json"
    timings: dict[str, float] = json.loads(stamp.read_text()) if stamp.is_file() else {}

    def save() -> None:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(json.dumps(timings, indent=2), encoding="utf-8")

    files = split_rungs(tasks_path, out / "rungs", rungs)
    t = time.perf_counter()
    if is_embedded(model):
        ensure_embedded_model()
    found = probe(files, model, out / "probe", size)
    timings.setdefault("probe", time.perf_counter() - t)
    save()
    trained, why = footholds(found)
    print(f"[recipe] {why}", file=sys.stderr, flush=True)
    sft, run_dir = train_rungs(out, trained, files, model, size, overrides, timings)
    save()
    specs = {"base": model, "oneshot": model, "sft": sft, "sft_rl": run_dir}
    metrics = {}
    for rung in trained:
        rows = score(out / "run" / "eval", rung, files[rung], specs, size.samples, timings)
        metrics[rung] = rung_metrics(rows, size.samples)
        save()
    summary = {"probe": found, "trained": trained, "why": why, "rungs": metrics, "timings": timings,
               "peak_memory_mb": peak_memory_mb()}
    (out / "run" / "summary.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    ladder_report(summary).write(out / "run", stem="REPORT")
    return summary
