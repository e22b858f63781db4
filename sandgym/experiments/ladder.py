"""The repository recipe's ladder: meet the model where it is, rung by rung, and report per rung.

Stages after the tasks (``sandgym.experiments.repo_recipe``), each found done by a rerun with the same ``--out``:

1. ``rungs/``: one task file per rung (``rungs/<kind>.jsonl``) and, per rung, its held-out tasks with one train
   task and its answer in front of each prompt (``rungs/<kind>-oneshot.jsonl``: the one-shot base model);
2. ``probe/base``: the base model on a sample of each rung's *train* tasks (the held-out split is never looked at to
   decide anything);
3. ``train.toml`` and ``run/train/sft``: an SFT warm start on oracle demonstrations of every rung (a
   demonstration needs no foothold: it is what gives one);
4. ``probe/sft``: the warm start on the same train tasks; ``run/train``: GRPO on the rungs where the base model or
   the warm start solved any of them (RL reinforces successes, so it goes where there are some), else the lowest;
   ``probe/rl``: the RL policy on the other rungs' train tasks, and where it now solves any, GRPO goes on from its
   adapter on those rungs too (``run/train/climb``): up the ladder as the policy improves;
5. ``run/eval/<rung>/<policy>``: base, one-shot base, SFT and SFT + RL on the held-out tasks of the rungs RL trained
   on (every rung with ``--score-all``, the default of ``--size gpu``), paired over the same tasks and sampling seeds;
   a rung where no probe solved a task is reported out of reach from its probes;
6. ``run/REPORT.md`` / ``.html`` and ``run/summary.json``: per rung, completion and the paired gains, which rungs
   are out of reach and what would change that, stage times and peak memory.
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
from sandgym.train.config import TrainConfig, load_config


@dataclass(frozen=True)
class Size:
    """The budgets of a recipe run (``--size``)."""

    rungs: tuple[str, ...]
    """The rungs made and scored by default (``--rungs`` overrides)."""
    probe_tasks: int
    """Train tasks per rung the base model and the warm start are probed on (one sample each)."""
    sft_episodes: int
    sft_epochs: int
    rl_steps: int
    tasks_per_step: int
    group_size: int
    rl_lr: float
    samples: int
    """Samples per held-out task (cpu: 1, on every held-out task: the variance is between tasks)."""
    score_all: bool
    """Score every rung's held-out tasks, not only the rungs RL trained on (cpu: off: a rung out of reach costs up to
    45 minutes of evaluation here to confirm 0.000 four times)."""

    def toml(self) -> dict[str, object]:
        return {"sft_episodes": self.sft_episodes, "sft_epochs": self.sft_epochs, "rl_steps": self.rl_steps,
                "tasks_per_step": self.tasks_per_step, "group_size": self.group_size, "rl_lr": self.rl_lr}


SIZES: dict[str, Size] = {
    "cpu": Size(("complete", "fix", "find"), probe_tasks=8, sft_episodes=64, sft_epochs=3, rl_steps=6,
                tasks_per_step=4, group_size=4, rl_lr=1e-4, samples=1, score_all=False),
    "gpu": Size(LADDER, probe_tasks=32, sft_episodes=256, sft_epochs=3, rl_steps=40, tasks_per_step=8,
                group_size=8, rl_lr=5e-5, samples=4, score_all=True),
}
"""``cpu`` (the default): the embedded 135M model on a 2-core CPU within an hour, the two lower rungs; ``gpu``: a
bigger model on an accelerator, every rung up to the tool-using kinds (untested here: no GPU run of it is recorded)."""
POLICIES = (("base", "base"), ("oneshot", "base, one-shot"), ("sft", "SFT"), ("sft_rl", "SFT + RL"))
PROBE_SAMPLES = 1


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


def probe(files: Mapping[str, Path], spec: str, out: Path, size: Size) -> dict[str, dict[str, Any]]:
    """Policy ``spec`` on ``size.probe_tasks`` train tasks of each rung; ``out/probe.json``."""
    path = out / "probe.json"
    if path.is_file():
        found: dict[str, dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
        if set(found) == set(files):
            return found
    result = {}
    for rung, file in files.items():
        cfg = eval_config(f"{file}:train", rung, out / rung, PROBE_SAMPLES, size.probe_tasks)
        rows = evaluate(spec, "policy", cfg, out / rung)
        result[rung] = {"tasks": len({r.task_id for r in rows}), "episodes": len(rows),
                        "solved": sum(r.success for r in rows), "completion": completion(rows, PROBE_SAMPLES)}
        print(f"[recipe] probe {out.name} on {rung}: solved {result[rung]['solved']} of {len(rows)} train episodes",
              file=sys.stderr, flush=True)
    path.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


def footholds(*probes: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], str]:
    """The rungs RL trains on (where a probed policy solved any train task; else the lowest) and why."""
    rungs = [r for r in LADDER if r in probes[0]]
    held = [r for r in rungs if any(p[r]["solved"] > 0 for p in probes)]
    if held:
        return held, f"RL on {', '.join(held)}: the base model or the warm start solved some of their probed train tasks"
    return rungs[:1], f"no rung gave the base model or the warm start a foothold; RL on the lowest, {rungs[0]}"


def peak_memory_mb() -> float:
    """The largest resident set of this process or any child it waited for (MB)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round(max(own, kids) / 1024, 1)


def warm_start(out: Path, files: Mapping[str, Path], model: str, size: Size, overrides: list[str],
               timings: dict[str, float]) -> TrainConfig:
    """``train.toml`` (every rung; kept when present) and the SFT warm start on its demonstrations."""
    from sandgym.train.sft import run_sft

    run_dir = out / "run" / "train"
    toml = out / TRAIN_NAME
    if not toml.is_file():
        toml.write_text(ladder_toml({r: f"{f.as_posix()}:train" for r, f in files.items()}, model,
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
    return config


def reinforce(config: TrainConfig, rungs: list[str], timings: dict[str, float], *, start: Path | None = None,
              stage: str = "rl") -> str:
    """GRPO on ``rungs`` (their entries of the config's mix) from the adapter in ``start`` (default: the warm start)
    into ``config.out_dir``; returns the run directory."""
    run_dir = Path(config.out_dir)
    mix = tuple(d for d in config.domains.mix if d.name in rungs) or config.domains.mix
    rl = replace(config, init="base", domains=replace(config.domains, mix=mix),
                 model=replace(config.model, adapter=str(start or run_dir / "sft" / "adapter")))
    t = time.perf_counter()
    done = latest_checkpoint(run_dir)
    if done is None or not done.name.endswith(f"{config.optim.steps:06d}"):
        train_with_eval(rl, resume=done is not None)
        timings[stage] = time.perf_counter() - t
    return str(run_dir)


def climb(config: TrainConfig, files: Mapping[str, Path], rl_rungs: list[str], run_dir: str, out: Path, size: Size,
          timings: dict[str, float]) -> tuple[str, dict[str, Any]]:
    """Up the ladder as the policy improves: the RL policy probed on the rungs RL did not train on; where it now
    solves a probed train task, GRPO goes on from its adapter on those rungs too (``run/train/climb``). Returns the
    final run directory and what was probed and climbed."""
    above = {r: f for r, f in files.items() if r not in rl_rungs}
    if not above:
        return run_dir, {"probe": {}, "rungs": []}
    t = time.perf_counter()
    lifted = probe(above, run_dir, out / "probe" / "rl", size)
    timings.setdefault("probe_rl", time.perf_counter() - t)
    climbed = [r for r in above if lifted[r]["solved"] > 0]
    if not climbed:
        return run_dir, {"probe": lifted, "rungs": []}
    start = latest_checkpoint(Path(run_dir))
    print(f"[recipe] climb: the RL policy solved probed train tasks of {', '.join(climbed)}; GRPO goes on there",
          file=sys.stderr, flush=True)
    final = reinforce(replace(config, out_dir=str(Path(run_dir) / "climb")), [*rl_rungs, *climbed], timings,
                      start=start, stage="climb")
    return final, {"probe": lifted, "rungs": climbed}


def score(out: Path, rung: str, file: Path, specs: Mapping[str, str], samples: int) -> dict[str, list[EpisodeRow]]:
    """Each policy on the rung's held-out tasks (the one-shot base on their one-shot copies)."""
    rows = {}
    for name, _ in POLICIES:
        suite = file.with_name(f"{rung}-oneshot.jsonl") if name == "oneshot" else file
        rows[name] = evaluate(specs[name], name, eval_config(f"{suite}:heldout", rung, out / rung, samples), out / rung)
    return rows


def name_guess(task: Task) -> bool:
    """A ``find`` task answered without a model: the first failing test's name less its ``test_`` prefix."""
    tests = task.metadata.get("hidden_tests") or []
    guess = str(tests[0]).rsplit("::", 1)[-1].split("[", 1)[0].removeprefix("test_") if tests else ""
    return bool(guess) and str(task.verifier.answer).rsplit(".", 1)[-1] == guess


def name_baseline(file: Path, rows: list[EpisodeRow]) -> dict[str, Any]:
    """How many held-out ``find`` tasks the test-name guess answers, and how many of the others ``rows`` solved."""
    tasks = [t for t in load_jsonl(file) if t.split == "heldout"]
    guessed = {t.id for t in tasks if name_guess(t)}
    beyond = {r.task_id for r in rows if r.success and r.task_id not in guessed}
    return {"tasks": len(tasks), "guessed": len(guessed), "solved_beyond": len(beyond)}


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


def _probes(summary: Mapping[str, Any], rung: str) -> str:
    lifted = (summary.get("climb") or {}).get("probe", {})
    who = (("base", summary["probe"]["base"]), ("warm start", summary["probe"]["sft"]),
           *((("RL policy", lifted),) if rung in lifted else ()))
    return "; ".join(f"{w} solved {p[rung]['solved']} of {p[rung]['episodes']}" for w, p in who)


def _guess(m: Mapping[str, Any]) -> str:
    b = m.get("test_name_baseline")
    return "" if b is None else (f"; a guess from the failing test's name alone, no model: "
                                 f"{b['guessed'] / max(1, b['tasks']):.3f} (adapter {m['completion']['sft_rl']['value']:.3f})")


def _trained(summary: Mapping[str, Any], rung: str) -> str:
    if rung in summary["rl_rungs"]:
        return "RL trained on it"
    return "RL climbed to it" if rung in (summary.get("climb") or {}).get("rungs", ()) else "no RL on this rung"


OUT_OF_REACH = ("Out of reach for this model at this size: what would change that is a bigger model (--model), a GPU "
                "(--size gpu: more demonstrations and RL steps), or more demonstrations of it (--set sft.episodes=N)")


def ladder_report(summary: Mapping[str, Any]) -> Report:
    """Per rung: the probes, each policy's held-out completion with the paired gains, and what is out of reach."""
    sections = []
    lines = []
    for rung, m in summary["rungs"].items():
        g = m["gains"]
        solved = any(m["completion"][n]["value"] > 0 for n in ("sft", "sft_rl"))
        lines.append(f"`{rung}` ({m['tasks']} held-out tasks x {m['samples']}; "  # the recipe's adapter: SFT + RL
                     f"{_trained(summary, rung)}): the adapter (SFT + RL) "
                     f"over base {_gain(g['sft_rl_vs_base'])}: {verdict(g['sft_rl_vs_base'])}; over the one-shot "
                     f"base {_gain(g['sft_rl_vs_oneshot'])}: {verdict(g['sft_rl_vs_oneshot'])}; RL over SFT "
                     f"{_gain(g['rl_vs_sft'])}: {verdict(g['rl_vs_sft'])}" + _guess(m) + ("" if solved else f". {OUT_OF_REACH}"))
        rows = []
        for name, label in POLICIES:
            rows.append((label, format_interval(m["completion"][name]),
                         _gain(g.get(f"{name}_vs_base")) if name != "base" else "-",
                         _gain(g.get(f"{name}_vs_oneshot")) if name in ("sft", "sft_rl") else "-"))
        rows.append(("RL over SFT (paired)", _gain(g["rl_vs_sft"]), "", ""))
        notes = [Text(f"{m['tasks']} held-out tasks x {m['samples']} samples, sampling at 0.7; 95% bootstrap "
                      "intervals over tasks; gains paired over the same tasks and seeds (sign-flip test). Probed "
                      f"train tasks: {_probes(summary, rung)}.")]
        if (b := m.get("test_name_baseline")) is not None:
            guess, adapter = b["guessed"] / max(1, b["tasks"]), m["completion"]["sft_rl"]["value"]
            notes.append(Text(
                f"A guess without a model, the failing test's name less its `test_` prefix, names {b['guessed']} of "
                f"{b['tasks']} held-out definitions ({guess:.3f}); SFT + RL {adapter:.3f}, {b['solved_beyond']} of its "
                "successes beyond the guess. " + (
                    "The guess does at least as well as the adapter: what the adapter learned at this rung is the "
                    "answer's form and reading the test's name, not a search of the code." if guess >= adapter else
                    "The adapter does better than the guess: more than the test's name was read.")))
        sections.append(Section(f"Rung `{rung}`", (
            Table(("policy", "held-out completion", "vs base (paired)", "vs one-shot base (paired)"), tuple(rows)),
            *notes)))
    climbed = summary.get("climb") or {"probe": {}, "rungs": []}
    if climbed["probe"]:
        probed = ", ".join(f"`{r}` {p['solved']} of {p['episodes']}" for r, p in climbed["probe"].items())
        lines.append(f"Up the ladder: the RL policy solved {probed} probed train tasks of the rungs RL did not train "
                     "on; " + (f"GRPO went on from its adapter on {', '.join(climbed['rungs'])} too (the adapter "
                               "scored is that run's)" if climbed["rungs"] else "no rung was climbed"))
    for rung in summary.get("unscored", ()):
        lines.append(f"`{rung}` (held-out tasks not scored; no RL on this rung): no probe solved a train task "
                     f"({_probes(summary, rung)}), so its held-out tasks were not scored (`--score-all` scores "
                     f"them). {OUT_OF_REACH}")
    timings = summary["timings"]
    return Report("sandgym recipe repo: the ladder", (
        Section("Headline", (Text(summary["why"]), Bullets(tuple(lines)))),
        *sections,
        Section("Stage times and memory", (Text(", ".join(f"{k} {v:.0f} s" for k, v in timings.items())
                                                + f"; peak memory {summary['peak_memory_mb']:.0f} MB (largest "
                                                "resident set of the recipe or a child process)."),)),
    ), html_name="REPORT.html")


def run_ladder(out: Path, tasks_path: Path, rungs: tuple[str, ...], model: str, size: Size,
               overrides: list[str], tasks_s: float | None = None) -> dict[str, Any]:
    """Stages 1-6 of the module docstring (``tasks_s``: how long making the tasks took, when this run made them);
    returns the summary written to ``out/run/summary.json``."""
    stamp = out / "run" / "timings.json"
    timings: dict[str, float] = json.loads(stamp.read_text()) if stamp.is_file() else {}
    if tasks_s is not None:
        timings["tasks"] = tasks_s

    def timed(stage: str, t: float) -> None:
        timings.setdefault(stage, time.perf_counter() - t)
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(json.dumps(timings, indent=2), encoding="utf-8")

    files = split_rungs(tasks_path, out / "rungs", rungs)
    t = time.perf_counter()
    if is_embedded(model):
        ensure_embedded_model()
    base = probe(files, model, out / "probe" / "base", size)
    timed("probe_base", t)
    config = warm_start(out, files, model, size, overrides, timings)
    timed("sft", t)
    t = time.perf_counter()
    sft = str(Path(config.out_dir) / "sft" / "adapter")
    warm = probe(files, sft, out / "probe" / "sft", size)
    timed("probe_sft", t)
    rl_rungs, why = footholds(base, warm)
    print(f"[recipe] {why}", file=sys.stderr, flush=True)
    run_dir = reinforce(config, rl_rungs, timings)
    timed("rl", t)
    run_dir, climbed = climb(config, files, rl_rungs, run_dir, out, size, timings)
    trained = [r for r in files if r in rl_rungs or r in climbed["rungs"]]
    specs = {"base": model, "oneshot": model, "sft": sft, "sft_rl": run_dir}
    metrics = {}
    for rung, file in files.items():
        if not size.score_all and rung not in trained:
            continue
        t = time.perf_counter()
        rows = score(out / "run" / "eval", rung, file, specs, size.samples)
        metrics[rung] = rung_metrics(rows, size.samples)
        if rung == "find":
            metrics[rung]["test_name_baseline"] = name_baseline(file, rows["sft_rl"])
        timed(f"eval_{rung}", t)
    path = out / "run" / "summary.json"
    earlier = json.loads(path.read_text(encoding="utf-8")).get("peak_memory_mb", 0.0) if path.is_file() else 0.0
    summary = {"probe": {"base": base, "sft": warm}, "rl_rungs": rl_rungs, "why": why, "climb": climbed,
               "rl_run": run_dir, "rungs": metrics,
               "unscored": [r for r in files if r not in metrics], "timings": timings,
               "peak_memory_mb": max(peak_memory_mb(), earlier)}  # a resumed run keeps its earlier sittings' peak
    path.write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    ladder_report(summary).write(out / "run", stem="REPORT")
    return summary
