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

import html
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sandgym.evaluate.episodes import read_rows
from sandgym.evaluate.metrics import Interval, bootstrap_ci, format_p, paired_test
from sandgym.experiments.periodic_eval import load_curve
from sandgym.experiments.sweep_state import load_sweep

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
    from sandgym.train.loop import load_metrics  # torch

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
            episodes = run_dir / "eval" / f"step-{step:06d}" / "episodes.jsonl"
            if episodes.exists() and (key == "per_task" or final["step"] > 0):
                tasks: dict[str, list[float]] = defaultdict(list)
                for r in read_rows(episodes):
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


def _ci(d: Mapping[str, float] | None) -> str:
    if not d or d.get("value") is None or d["value"] != d["value"]:
        return "n/a"
    return f"{d['value']:.3f} [{d['low']:.3f}, {d['high']:.3f}]"


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _cmp(c: Mapping[str, Any] | None) -> str:
    return "n/a" if not c else f"{_ci(c['diff'])} ({format_p(c['p_value'])}, n={c['n_pairs']})"


def markdown(m: dict[str, Any]) -> str:
    sweep, variants = m["sweep"], m["variants"]
    runs = sweep["runs"]
    failed = [r for r in runs if r["status"] == "failed"]
    lines = [f"# sandgym sweep: {sweep.get('config') or '(defaults)'}", "",
             f"Seeds {sweep['seeds']}; varied: {sweep['vary'] or 'nothing'}; overrides: {sweep['overrides'] or 'none'}. "
             f"{len(runs)} runs: {sum(r['status'] != 'failed' for r in runs)} finished, {len(failed)} failed. "
             f"Wall time of the last invocation {sweep.get('wall_s', 0):.0f} s.", ""]
    if failed:
        lines += [f"**{len(failed)} run(s) FAILED** (see the Runs table); their variants' numbers cover fewer seeds.", ""]
    lines += ["## Final metrics per variant", "",
              f"95% bootstrap intervals. Training reward: mean of the last {FINAL_STEPS} steps, resampled over seeds. "
              "Held-out completion: periodic evaluation at step 0 (the starting point: the base model, or the "
              "SFT warm start when `init = \"sft\"`) and at the last step, resampled over seeds then tasks. Gain "
              "over step 0: final minus step-0 completion of the same runs, paired by seed/task (what training "
              "added to the starting point).", "",
              "| variant | seeds | failed | final training reward | held-out completion at step 0 | "
              "final held-out completion | gain over step 0 |",
              "|---|---|---|---|---|---|---|"]
    for name, v in variants.items():
        lines.append(f"| {name} | {len(v['seeds'])} | {v['failed']} | {_ci(v['final_reward'])} | "
                     f"{_ci(v.get('start_completion'))} | {_ci(v['final_completion'])} | "
                     f"{_cmp(v['gain_over_start'])} |")
    lines += ["", "## Paired comparisons", ""]
    if m["comparisons"]:
        lines += ["Variant minus the first variant on the same seeds (training reward) and the same seed/task pairs "
                  "(held-out completion); 95% bootstrap interval of the mean paired difference and a sign-flip "
                  "permutation p-value.", "",
                  "| variant | vs | training reward diff | held-out completion diff | completion paired by |",
                  "|---|---|---|---|---|"]
        for name, c in m["comparisons"].items():
            lines.append(f"| {name} | {c['baseline']} | {_cmp(c['reward'])} | {_cmp(c['completion'])} | "
                         f"{c['completion_paired_by']} |")
    else:
        lines.append("Only one variant: nothing to compare.")
    lines += ["", "## Learning curves", "", "Mean +- std across seeds (see report.html for the plots).", ""]
    for key, title in (("reward_curve", "training reward"), ("completion_curve", "held-out completion")):
        steps = sorted({s for v in variants.values() for s in v[key]["step"]})
        if not steps:
            lines += [f"No {title} recorded.", ""]
            continue
        if len(steps) > 12:
            steps = sorted({steps[round(i * (len(steps) - 1) / 11)] for i in range(12)})
        lines += [f"### {title}", "", "| step | " + " | ".join(variants) + " |", "|---" * (len(variants) + 1) + "|"]
        for s in steps:
            cells = []
            for v in variants.values():
                c = v[key]
                cells.append(f"{c['mean'][c['step'].index(s)]:.3f} +- {c['std'][c['step'].index(s)]:.3f}"
                             if s in c["step"] else "")
            lines.append(f"| {s} | " + " | ".join(cells) + " |")
        lines.append("")
    if any(v["unseen"] is not None for v in variants.values()):
        lines += ["## Transfer", "", "Held-out completion on the families trained on and on families never trained on, "
                  "at step 0 and at the last step; 95% intervals resampled over seeds, then tasks.", "",
                  "| variant | trained, step 0 | trained, final | unseen, step 0 | unseen, final | gap (final) |",
                  "|---|---|---|---|---|---|"]
        for name, v in variants.items():
            gap = v["trained"] - v["unseen"] if v["trained"] is not None and v["unseen"] is not None else None
            lines.append(f"| {name} | {_ci(v.get('trained_start'))} | {_ci(v.get('trained_final'))} | "
                         f"{_ci(v.get('unseen_start'))} | {_ci(v.get('unseen_final'))} | {_f(gap)} |")
        lines.append("")
    lines += ["## Runs", "", "| run | status | steps | final reward | final completion | wall s | error |",
              "|---|---|---|---|---|---|---|"]
    for r in runs:
        s = r.get("summary", {})
        err = (r.get("error") or "").replace("|", "\\|").replace("\n", " ")[:300]
        lines.append(f"| {r['variant']}/seed-{r['seed']} | {r['status'].upper() if r['status'] == 'failed' else r['status']} "
                     f"| {s.get('steps', '')} | {_f(s.get('final_reward'))} | {_f(s.get('final_completion'))} | "
                     f"{r.get('wall_s', 0):.1f} | {err} |")
    lines.append("")
    return "\n".join(lines)


def plots(m: dict[str, Any]) -> dict[str, str]:
    """Base64 PNGs: the two learning curves with bands, and final metrics with intervals."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}
    from sandgym.evaluate.report_writer import figure_png as _png

    out: dict[str, str] = {}
    for key, title in (("reward_curve", "training reward"), ("completion_curve", "held-out completion")):
        if not any(v[key]["step"] for v in m["variants"].values()):
            continue
        fig, ax = plt.subplots(figsize=(7, 3.5))
        for name, v in m["variants"].items():
            c = v[key]
            if not c["step"]:
                continue
            mean, std = np.array(c["mean"]), np.array(c["std"])
            (line,) = ax.plot(c["step"], mean, marker="o" if len(c["step"]) < 15 else None, label=name)
            ax.fill_between(c["step"], mean - std, mean + std, color=line.get_color(), alpha=0.25)
            ax.fill_between(c["step"], c["min"], c["max"], color=line.get_color(), alpha=0.08)
        ax.set_xlabel("step")
        ax.set_title(f"{title}: mean, +-1 std and min/max across seeds")
        ax.legend(fontsize=7)
        out[key] = _png(fig)
    names = list(m["variants"])
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax, key, title in ((axes[0], "final_reward", "final training reward"),
                           (axes[1], "final_completion", "final held-out completion")):
        vals = [m["variants"][n][key] for n in names]
        ok = [v is not None and v["value"] == v["value"] for v in vals]
        y = [v["value"] if o else 0.0 for v, o in zip(vals, ok, strict=True)]
        err = [[v["value"] - v["low"] if o else 0 for v, o in zip(vals, ok, strict=True)],
               [v["high"] - v["value"] if o else 0 for v, o in zip(vals, ok, strict=True)]]
        ax.bar(range(len(names)), y, yerr=err, capsize=3)
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=7)
        ax.set_title(f"{title} (95% CI)")
    out["finals"] = _png(fig)
    return out


def to_html(m: dict[str, Any], md: str) -> str:
    imgs = plots(m)
    body = [f"<h1>{html.escape(md.splitlines()[0].lstrip('# '))}</h1>"]
    for title, key in (("Training reward", "reward_curve"), ("Held-out completion", "completion_curve"),
                       ("Final metrics", "finals")):
        if key in imgs:
            body.append(f"<h2>{title}</h2><img alt='{key}' src='data:image/png;base64,{imgs[key]}'/>")
    body.append(f"<h2>Report</h2><pre>{html.escape(md)}</pre>")
    style = "body{font-family:sans-serif;max-width:1000px;margin:auto}pre{white-space:pre-wrap}"
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>sandgym sweep</title><style>{style}</style>"
            f"</head><body>{''.join(body)}</body></html>")


def write_sweep_report(out: str | Path) -> dict[str, Any]:
    """Write ``report.md``, ``report.html`` and ``sweep_metrics.json`` into the sweep directory ``out``."""
    out = Path(out)
    m = sweep_metrics(out)
    md = markdown(m)
    (out / "report.md").write_text(md, encoding="utf-8")
    (out / "report.html").write_text(to_html(m, md), encoding="utf-8")
    slim = {"variants": m["variants"], "comparisons": m["comparisons"], "runs": m["sweep"]["runs"]}
    (out / "sweep_metrics.json").write_text(json.dumps(slim, indent=2, default=str), encoding="utf-8")
    return m


__all__ = ["compare_variants", "hierarchical_ci", "paired", "sweep_metrics", "write_sweep_report"]
