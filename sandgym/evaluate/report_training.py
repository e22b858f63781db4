"""A report's training section: training reward and success rate per step (the rows of a run's ``metrics.jsonl``)
and, when the run evaluated during training, held-out completion per step (``eval_curve.jsonl``); a table in
both outputs and an inline plot in the HTML.

The caller reads the files (this layer does not import the trainer) and passes their rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sandgym.evaluate.report_writer import (
    PALETTE,
    Block,
    Figure,
    Section,
    Table,
    Text,
    figure_png,
    format_interval,
    format_number,
    legend,
    pyplot,
)

REWARD, SUCCESS = "rollout/reward_mean", "rollout/success_rate"
MAX_TABLE_ROWS = 20
"""A longer run's table shows this many steps, evenly spread, the first and the last among them."""


def _steps(rows: Sequence[Mapping[str, Any]]) -> list[int]:
    return [int(r["step"]) for r in rows if "step" in r]


def _completion(curve: Sequence[Mapping[str, Any]]) -> dict[int, Mapping[str, Any]]:
    return {int(r["step"]): r["completion"] for r in curve if r.get("completion")}


def shown_steps(steps: Sequence[int], most: int = MAX_TABLE_ROWS) -> list[int]:
    """At most ``most`` of ``steps``, evenly spread, the first and the last kept.

    >>> shown_steps(list(range(1, 101)), 5)
    [1, 26, 51, 75, 100]
    """
    steps = sorted(set(steps))
    if len(steps) <= most:
        return steps
    return sorted({steps[round(i * (len(steps) - 1) / (most - 1))] for i in range(most)})


def training_table(rows: Sequence[Mapping[str, Any]], curve: Sequence[Mapping[str, Any]] = ()) -> Table:
    """Step, training reward, training success rate (and held-out completion, when there is a curve)."""
    by_step = {int(r["step"]): r for r in rows if "step" in r}
    held = _completion(curve)
    steps = shown_steps([*by_step, *held])
    header = ("step", "training reward", "training success", *(("held-out completion",) if held else ()))
    return Table(header, tuple(
        (str(s), format_number(by_step.get(s, {}).get(REWARD)), format_number(by_step.get(s, {}).get(SUCCESS)),
         *((format_interval(held.get(s)),) if held else ())) for s in steps))


def training_figure(rows: Sequence[Mapping[str, Any]], curve: Sequence[Mapping[str, Any]] = ()) -> Figure | None:
    """Training reward and success rate per step, and held-out completion (95% CI) where the run evaluated; None
    without matplotlib or rows."""
    plt = pyplot()
    if plt is None or not rows:
        return None
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    steps = _steps(rows)
    marker = "o" if len(steps) < 30 else None
    reward = [r.get(REWARD) for r in rows if "step" in r]
    ax.plot(steps, reward, marker=marker, color=PALETTE[0], label="training reward")
    ax.plot(steps, [r.get(SUCCESS) for r in rows if "step" in r], marker=marker, ls="--", color=PALETTE[1],
            label="training success rate")
    held = _completion(curve)
    if held:
        xs = sorted(held)
        v = [held[s]["value"] for s in xs]
        err = [[held[s]["value"] - held[s]["low"] for s in xs], [held[s]["high"] - held[s]["value"] for s in xs]]
        ax.errorbar(xs, v, yerr=err, marker="s", capsize=3, color=PALETTE[2], label="held-out completion (95% CI)")
    low = min([0.0, *(x for x in reward if x is not None)])
    ax.set_ylim(low - 0.05, 1.05)
    ax.set_xlabel("RL step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title("training curve: reward and success rate of each step's rollouts")
    legend(ax)
    return Figure("training curve", figure_png(fig))


def training_section(rows: Sequence[Mapping[str, Any]], curve: Sequence[Mapping[str, Any]] = (), *,
                     source: str = "metrics.jsonl", with_plots: bool = True) -> Section:
    """The "Training" section: a sentence (first and last step), the curve and the table; a line saying where the
    metrics were looked for when there are none."""
    if not rows:
        return Section("Training", (Text(f"No training metrics at hand ({source} not found)."),))
    first, last = rows[0], rows[-1]
    text = (f"{len(rows)} RL steps ({source}). Training reward {format_number(first.get(REWARD))} at step "
            f"{first.get('step')} -> {format_number(last.get(REWARD))} at step {last.get('step')}; success rate "
            f"{format_number(first.get(SUCCESS))} -> {format_number(last.get(SUCCESS))}. These are the training "
            "tasks' rollouts at each step (sampled, few per step), not the held-out evaluation.")
    fig = training_figure(rows, curve) if with_plots else None
    blocks: tuple[Block, ...] = (Text(text), *((fig,) if fig else ()), training_table(rows, curve))
    return Section("Training", blocks)


__all__ = ["shown_steps", "training_figure", "training_section", "training_table"]
