"""The sweep report: ``report.md``, a self-contained ``report.html`` (inline plots) and ``sweep_metrics.json``.

- learning curves per variant: training reward (``metrics.jsonl``) and held-out completion
  (``eval_curve.jsonl``), mean with a band of +-1 std across seeds (and the min/max envelope);
- final metrics per variant with 95% bootstrap intervals: training reward (mean of the last steps) resampled over
  seeds; held-out completion resampled hierarchically over seeds, then tasks within a seed;
- paired comparisons of every variant against the first one on the same seeds (training reward) and on the same
  (seed, task) pairs (held-out completion; by seed when per-task episodes are missing);
- the transfer view (trained vs unseen families) when the held-out sample has unseen families;
- every run, with its status, and the error of a failed one.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sandgym.evaluate.episodes import read_rows
from sandgym.evaluate.manifest import build_manifest
from sandgym.evaluate.metrics import Interval, bootstrap_ci, format_interval, format_p, paired_test
from sandgym.evaluate.policies import PolicyInfo
from sandgym.evaluate.report_writer import (
    PALETTE,
    Block,
    Bullets,
    Figure,
    Report,
    Section,
    Table,
    Text,
    bars,
    figure_png,
    format_number,
    legend,
    pyplot,
    series_legend,
)
from sandgym.evaluate.run import load_suites
from sandgym.experiments.periodic_eval import eval_config, load_curve
from sandgym.experiments.sweep_state import load_sweep
from sandgym.train.config import load_config

FINAL_STEPS = 3
"""Final training reward of a run: the mean reward of its last this many steps."""


def hierarchical_ci(per_seed: Mapping[Any, Mapping[str, Sequence[float]]], *, n_boot: int = 2000, seed: int = 0,
                    alpha: float = 0.05) -> Interval:
    """Mean over seeds of the per-seed mean over tasks; percentile bootstrap resampling seeds, then tasks.

    ``per_seed[s][task]`` are the episode values of ``task`` in the run with seed ``s``.
    """
    runs = [[np.asarray(v, float) for v in tasks.values() if len(v)] for tasks in per_seed.values()]
    runs = [r for r in runs if r]
    if not runs:
        return Interval(float("nan"), float("nan"), float("nan"))
    task_means = [np.array([t.mean() for t in r]) for r in runs]
    point = float(np.mean([m.mean() for m in task_means]))
    rng = np.random.default_rng(seed)
    boots = np.empty(n_boot)
    for b in range(n_boot):
        picked = rng.integers(0, len(runs), size=len(runs))
        boots[b] = np.mean([task_means[i][rng.integers(0, len(task_means[i]), size=len(task_means[i]))].mean()
                            for i in picked])
    low, high = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
    return Interval(point, float(low), float(high))


def _band(curves: Sequence[Mapping[int, float]]) -> dict[str, list[float]]:
    """Mean, std, min, max across runs at every step present in at least one run."""
    steps = sorted({s for c in curves for s in c})
    out: dict[str, list[float]] = {"step": [], "mean": [], "std": [], "min": [], "max": [], "n": []}
    for s in steps:
        v = np.array([c[s] for c in curves if s in c], float)
        out["step"].append(s)
        out["mean"].append(float(v.mean()))
        out["std"].append(float(v.std(ddof=1)) if len(v) > 1 else 0.0)
        out["min"].append(float(v.min()))
        out["max"].append(float(v.max()))
        out["n"].append(len(v))
    return out


def _run_data(run_dir: Path) -> dict[str, Any]:
    from sandgym.train.metrics import load_metrics  # torch

    metrics = load_metrics(run_dir)
    curve = load_curve(run_dir)
    reward = {int(m["step"]): float(m["rollout/reward_mean"]) for m in metrics if "rollout/reward_mean" in m}
    completion = {int(r["step"]): float(r["completion"]["value"]) for r in curve if r.get("completion")}
    data: dict[str, Any] = {"reward_curve": reward, "completion_curve": completion, "steps": max(reward, default=0)}
    if reward:
        last = [reward[s] for s in sorted(reward)[-FINAL_STEPS:]]
        data["final_reward"] = float(np.mean(last))
    if curve:
        final = curve[-1]
        data["final_step"] = final["step"]
        data["final_completion"] = (final.get("completion") or {}).get("value")
        data["trained"] = (final.get("trained") or {}).get("value")
        data["unseen"] = (final.get("unseen") or {}).get("value")
        for key, step in (("per_task", final["step"]), ("per_task_start", 0)):
            here = run_dir / "eval" / f"step-{step:06d}"  # one folder per rollout with [domains.mix.rollout]
            files = sorted(here.glob("episodes.jsonl")) or sorted(here.glob("*/episodes.jsonl"))
            if files and (key == "per_task" or final["step"] > 0):
                tasks: dict[str, list[float]] = defaultdict(list)
                for r in (r for f in files for r in read_rows(f)):
                    if not r.infra_failure:
                        tasks[r.task_id].append(float(r.success))
                        if r.unseen:
                            data.setdefault("unseen_tasks", set()).add(r.task_id)
                data[key] = dict(tasks)
    return data


def gain_over_start(seeds: Mapping[int, dict[str, Any]]) -> dict[str, Any] | None:
    """Held-out completion at the end minus at step 0 (before training) of the same runs, paired by
    (seed, task): what training added on top of the starting point (the base model or the SFT warm start)."""
    both = [s for s, d in seeds.items() if "per_task" in d and "per_task_start" in d]
    if not both:
        return None
    return paired({f"{s}/{t}": v for s in both for t, v in seeds[s]["per_task"].items()},
                  {f"{s}/{t}": v for s in both for t, v in seeds[s]["per_task_start"].items()})


def paired(cand: Mapping[str, Sequence[float]], base: Mapping[str, Sequence[float]]) -> dict[str, Any] | None:
    """:func:`paired_test` of candidate minus baseline over their shared keys (None when none are shared)."""
    if not set(cand) & set(base):
        return None
    return paired_test(cand, base).to_json()


def compare_variants(variants: Mapping[str, Mapping[int, dict[str, Any]]]) -> dict[str, Any]:
    """Every variant against the first one: paired over seeds (training reward) and (seed, task) pairs
    (held-out completion; over seeds when per-task episodes are missing on either side)."""
    names = list(variants)
    if len(names) < 2:
        return {}
    ref = names[0]
    out: dict[str, Any] = {}
    for name in names[1:]:
        a, b = variants[name], variants[ref]
        cmp: dict[str, Any] = {"baseline": ref}
        cmp["reward"] = paired({str(s): [d["final_reward"]] for s, d in a.items() if "final_reward" in d},
                               {str(s): [d["final_reward"]] for s, d in b.items() if "final_reward" in d})
        shared = set(a) & set(b)
        if shared and all("per_task" in a[s] and "per_task" in b[s] for s in shared):
            cmp["completion"] = paired({f"{s}/{t}": v for s in shared for t, v in a[s]["per_task"].items()},
                                       {f"{s}/{t}": v for s in shared for t, v in b[s]["per_task"].items()})
            cmp["completion_paired_by"] = "seed/task"
        else:
            cmp["completion"] = paired(
                {str(s): [d["final_completion"]] for s, d in a.items() if d.get("final_completion") is not None},
                {str(s): [d["final_completion"]] for s, d in b.items() if d.get("final_completion") is not None})
            cmp["completion_paired_by"] = "seed"
        out[name] = cmp
    return out


def sweep_metrics(out: Path) -> dict[str, Any]:
    """Everything the report shows, computed from ``sweep.json`` and the run directories."""
    sweep = load_sweep(out)
    runs = sweep["runs"]
    variants: dict[str, dict[int, dict[str, Any]]] = {}
    for r in runs:
        variants.setdefault(r["variant"], {})
        if r["status"] in ("done", "skipped") and Path(r["out_dir"]).exists():
            data = _run_data(Path(r["out_dir"]))
            r["summary"] = {k: v for k, v in data.items()
                            if not k.endswith("_curve") and not k.startswith("per_task") and k != "unseen_tasks"}
            variants[r["variant"]][r["seed"]] = data
    per_variant: dict[str, Any] = {}
    for name, seeds in variants.items():
        v: dict[str, Any] = {"seeds": sorted(seeds), "runs": sum(1 for r in runs if r["variant"] == name),
                             "failed": sum(1 for r in runs if r["variant"] == name and r["status"] == "failed")}
        v["reward_curve"] = _band([d["reward_curve"] for d in seeds.values() if d["reward_curve"]])
        v["completion_curve"] = _band([d["completion_curve"] for d in seeds.values() if d["completion_curve"]])
        fr = [[d["final_reward"]] for d in seeds.values() if "final_reward" in d]
        v["final_reward"] = bootstrap_ci(fr).to_json() if fr else None
        if all("per_task" in d for d in seeds.values()) and seeds:
            v["final_completion"] = hierarchical_ci({s: d["per_task"] for s, d in seeds.items()}).to_json()
        else:
            fc = [[d["final_completion"]] for d in seeds.values() if d.get("final_completion") is not None]
            v["final_completion"] = bootstrap_ci(fc).to_json() if fc else None
        starts = {s: d["per_task_start"] for s, d in seeds.items() if "per_task_start" in d}
        v["start_completion"] = hierarchical_ci(starts).to_json() if starts and len(starts) == len(seeds) else None
        v["gain_over_start"] = gain_over_start(seeds)
        for split in ("trained", "unseen"):
            vals = [d[split] for d in seeds.values() if d.get(split) is not None]
            v[split] = float(np.mean(vals)) if vals else None
            for key, out_key in (("per_task_start", "start"), ("per_task", "final")):
                split_ci = _split_ci(seeds, key, unseen=split == "unseen")
                v[f"{split}_{out_key}"] = split_ci.to_json() if split_ci is not None else None
        per_variant[name] = v
    return {"sweep": sweep, "variants": per_variant, "comparisons": compare_variants(variants)}


def _split_ci(seeds: Mapping[int, dict[str, Any]], key: str, *, unseen: bool) -> Interval | None:
    """Hierarchical interval of held-out completion on the trained (or unseen) families' tasks of every seed."""
    per_seed = {}
    for s, d in seeds.items():
        if key not in d:
            return None
        names = d.get("unseen_tasks", set())
        per_seed[s] = {t: v for t, v in d[key].items() if (t in names) == unseen}
    if not per_seed or not any(per_seed.values()):
        return None
    return hierarchical_ci(per_seed)


def _cmp(c: Mapping[str, Any] | None) -> str:
    return "n/a" if not c else (f"{format_interval(c['diff'], signed=True)} ({format_p(c['p_value'])}, "
                                f"n={c['n_pairs']})")


def headline(m: dict[str, Any]) -> str:
    """The main result in one sentence: each variant's final held-out completion (or final training reward when
    nothing was evaluated), and every variant against the first one."""
    variants = m["variants"]
    key, what = (("final_completion", "Final held-out completion")
                 if any(v["final_completion"] for v in variants.values()) else ("final_reward", "Final training reward"))
    parts = [f"{name} {format_interval(v[key])} ({len(v['seeds'])} seed{'' if len(v['seeds']) == 1 else 's'})"
             for name, v in variants.items()]
    text = f"{what}: " + "; ".join(parts) + "."
    cmp_key = "completion" if key == "final_completion" else "reward"
    for name, c in m["comparisons"].items():
        if c.get(cmp_key):
            text += f" {name} minus {c['baseline']}: {_cmp(c[cmp_key])}."
    return text


def build_report(m: dict[str, Any], *, with_plots: bool = True) -> Report:
    """The sweep report of :func:`sweep_metrics`' result: the final metrics first, then setup, comparisons,
    learning curves, transfer, and every run."""
    sweep, variants = m["sweep"], m["variants"]
    runs = sweep["runs"]
    failed = [r for r in runs if r["status"] == "failed"]
    figs = plots(m) if with_plots else {}

    def fig(key: str) -> tuple[Block, ...]:
        return (figs[key],) if key in figs else ()

    top: list[Block] = []
    if failed:
        top.append(Text(f"{len(failed)} run(s) FAILED (see the Runs table); their variants' numbers cover fewer "
                        "seeds.", warning=True))
    top += [
        Text(headline(m)),
        Table(("variant", "seeds", "failed", "final training reward", "held-out completion at step 0",
               "final held-out completion", "gain over step 0"),
              tuple((name, str(len(v["seeds"])), str(v["failed"]), format_interval(v["final_reward"]),
                     format_interval(v.get("start_completion")), format_interval(v["final_completion"]),
                     _cmp(v["gain_over_start"])) for name, v in variants.items())),
        Text(f"95% bootstrap intervals. Training reward: mean of the last {FINAL_STEPS} steps, resampled over seeds. "
             "Held-out completion: periodic evaluation at step 0 (the starting point: the base model, or the "
             "SFT warm start when `init = \"sft\"`) and at the last step, resampled over seeds then tasks. Gain "
             "over step 0: final minus step-0 completion of the same runs, paired by seed/task (what training "
             "added to the starting point)."),
        *fig("finals"),
    ]
    sections = [
        Section("Final metrics per variant", tuple(top)),
        Section("Setup", (Bullets((
            f"config: {sweep.get('config') or '(defaults)'}; seeds: {', '.join(map(str, sweep['seeds']))}",
            "varied: " + (", ".join(f"`{v}`" for v in sweep["vary"]) or "nothing"),
            "overrides: " + (", ".join(f"`{o}`" for o in sweep["overrides"]) or "none"),
            f"{len(runs)} runs: {sum(r['status'] != 'failed' for r in runs)} finished, {len(failed)} failed; wall "
            f"time of the last invocation {sweep.get('wall_s', 0):.0f} s")),)),
    ]
    if m["comparisons"]:
        sections.append(Section("Paired comparisons", (
            Text("Variant minus the first variant on the same seeds (training reward) and the same seed/task pairs "
                 "(held-out completion); 95% bootstrap interval of the mean paired difference and a sign-flip "
                 "permutation p-value."),
            Table(("variant", "vs", "training reward diff", "held-out completion diff", "completion paired by"),
                  tuple((name, c["baseline"], _cmp(c["reward"]), _cmp(c["completion"]), c["completion_paired_by"])
                        for name, c in m["comparisons"].items())))))
    else:
        sections.append(Section("Paired comparisons", (Text("Only one variant: nothing to compare."),)))
    sections.append(Section("Learning curves", (Text("Mean +- std across seeds."),)))
    for key, title in (("reward_curve", "training reward"), ("completion_curve", "held-out completion")):
        steps = sorted({s for v in variants.values() for s in v[key]["step"]})
        if not steps:
            sections.append(Section(title, (Text(f"No {title} recorded."),), level=3))
            continue
        if len(steps) > 12:
            steps = sorted({steps[round(i * (len(steps) - 1) / 11)] for i in range(12)})
        rows = []
        for s in steps:
            cells = []
            for v in variants.values():
                c = v[key]
                cells.append(f"{c['mean'][c['step'].index(s)]:.3f} +- {c['std'][c['step'].index(s)]:.3f}"
                             if s in c["step"] else "")
            rows.append((str(s), *cells))
        sections.append(Section(title, (*fig(key), Table(("step", *variants), tuple(rows))), level=3))
    if any(v["unseen"] is not None for v in variants.values()):
        rows = []
        for name, v in variants.items():
            gap = v["trained"] - v["unseen"] if v["trained"] is not None and v["unseen"] is not None else None
            rows.append((name, format_interval(v.get("trained_start")), format_interval(v.get("trained_final")),
                         format_interval(v.get("unseen_start")), format_interval(v.get("unseen_final")),
                         format_number(gap)))
        sections.append(Section("Transfer", (
            Text("Held-out completion on the families trained on and on families never trained on, at step 0 and "
                 "at the last step; 95% intervals resampled over seeds, then tasks."),
            Table(("variant", "trained, step 0", "trained, final", "unseen, step 0", "unseen, final", "gap (final)"),
                  tuple(rows)))))
    run_rows = []
    for r in runs:
        s = r.get("summary", {})
        run_rows.append((f"{r['variant']}/seed-{r['seed']}", r["status"].upper() if r["status"] == "failed"
                         else r["status"], str(s.get("steps", "")), format_number(s.get("final_reward")),
                         format_number(s.get("final_completion")), f"{r.get('wall_s', 0):.1f}",
                         (r.get("error") or "").replace("\n", " ")[:300]))
    sections.append(Section("Runs", (Table(("run", "status", "steps", "final reward", "final completion",
                                            "wall s", "error"), tuple(run_rows), wrap=(6,)),)))
    return Report(f"sandgym sweep: {sweep.get('config') or '(defaults)'}", tuple(sections))


def markdown(m: dict[str, Any]) -> str:
    return build_report(m, with_plots=False).markdown()


def plots(m: dict[str, Any]) -> dict[str, Figure]:
    """The two learning curves with bands, and the final metrics with intervals; variant i has colour
    ``PALETTE[i]`` in every plot."""
    plt = pyplot()
    if plt is None:
        return {}
    from matplotlib.ticker import MaxNLocator

    colours = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(m["variants"])}
    out: dict[str, Figure] = {}
    for key, title in (("reward_curve", "training reward"), ("completion_curve", "held-out completion")):
        if not any(v[key]["step"] for v in m["variants"].values()):
            continue
        fig, ax = plt.subplots(figsize=(8, 3.6))
        for name, v in m["variants"].items():
            c = v[key]
            if not c["step"]:
                continue
            mean, std = np.array(c["mean"]), np.array(c["std"])
            ax.plot(c["step"], mean, marker="o" if len(c["step"]) < 15 else None, color=colours[name], label=name)
            ax.fill_between(c["step"], mean - std, mean + std, color=colours[name], alpha=0.2, linewidth=0)
            ax.fill_between(c["step"], c["min"], c["max"], color=colours[name], alpha=0.07, linewidth=0)
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel(title)
        ax.set_title(f"{title}: mean, +-1 std and min/max across seeds")
        legend(ax)
        out[key] = Figure(f"{title} per step", figure_png(fig))
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for ax, key, title in ((axes[0], "final_reward", "final training reward"),
                           (axes[1], "final_completion", "final held-out completion")):
        bars(ax, [title], [(name, [v[key]]) for name, v in m["variants"].items()], show_legend=False)
        ax.set_title(f"{title} (95% CI)")
    fig.tight_layout()
    series_legend(fig, list(m["variants"]))
    out["finals"] = Figure("final metrics per variant", figure_png(fig))
    return out


def sweep_manifest(sweep: Mapping[str, Any]) -> dict[str, Any] | None:
    """The manifest (``sandgym.evaluate.manifest``) of the sweep's held-out evaluation, from its first run's config:
    the base model, the evaluation's suites, rollout and seeds; ``extra`` holds the sweep (config, seeds, varied
    keys) and the training suites. None before any run has written its config."""
    for r in sweep.get("runs", []):
        path = Path(r["out_dir"]) / "config.toml"
        if path.is_file():
            config = load_config(path)
            evaluation = eval_config(config, Path(r["out_dir"]) / "eval")
            policy = PolicyInfo(config.model.name, "base", config.model.name)
            extra = {"sweep": {k: sweep.get(k) for k in ("config", "seeds", "vary")},
                     "training_suites": [d.suite for d in config.domains.mix]}
            return build_manifest(evaluation, load_suites(evaluation), policy, extra=extra).to_json()
    return None


def write_sweep_report(out: str | Path) -> dict[str, Any]:
    """Write ``report.md``, ``report.html`` and ``sweep_metrics.json`` into the sweep directory ``out``."""
    out = Path(out)
    m = sweep_metrics(out)
    build_report(m).write(out)
    slim = {"variants": m["variants"], "comparisons": m["comparisons"], "runs": m["sweep"]["runs"],
            "manifest": sweep_manifest(m["sweep"])}
    (out / "sweep_metrics.json").write_text(json.dumps(slim, indent=2, default=str), encoding="utf-8")
    return m


__all__ = ["build_report", "compare_variants", "hierarchical_ci", "paired", "sweep_manifest", "sweep_metrics",
           "write_sweep_report"]
