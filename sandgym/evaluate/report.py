"""Readable reports of an evaluation: ``report.md`` and a self-contained ``report.html`` with inline plots."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sandgym.evaluate.aggregate import subject_of, with_pooled
from sandgym.evaluate.report_browser import PolicyEpisodes, episodes_at_hand, episodes_section
from sandgym.evaluate.report_writer import (
    PALETTE,
    Block,
    Bullets,
    Code,
    Figure,
    Report,
    Section,
    Series,
    Table,
    Text,
    bar_figure,
    figure_png,
    format_interval,
    format_number,
    format_p,
    legend,
    pyplot,
)
from sandgym.evaluate.signals import signals_section

SECTIONS = ("Headline", "By domain", "By family", "By document length", "Stability", "Transfer", "Failure modes",
            "Traps", "Behaviour", "Cost", "Episodes", "Versions")


def length_blocks(m: dict[str, Any], with_plots: bool) -> tuple[Block, ...]:
    """Completion per document length (candidate, baseline) as a table and a bar chart; a note when no task has a
    document."""
    cand = m.get("by_length") or {}
    if not cand:
        return (Text("No task in these suites has a document (long-context tasks report completion per length)."),)
    b_all = m.get("baseline") or {}
    gains, base = with_pooled(b_all, "gain_by_length"), with_pooled(b_all, "by_length")

    def gain(b: str) -> str:
        g = gains.get(b)
        return f"{format_interval(g['diff'], signed=True)} ({format_p(g['p_value'])})" if g else "n/a"

    # each length, then the pooled "4K+" rows (that length and every longer one)
    subject = subject_of(m)
    table = Table((subject, "completion", "tasks", "baseline", "paired gain"), tuple(
        (b, format_interval(s.get("completion")), str(s.get("tasks", 0)),
         format_interval(base.get(b, {}).get("completion")), gain(b))
        for b, s in with_pooled(m, "by_length").items()))
    series: list[Series] = [("candidate", [s.get("completion") for s in cand.values()])]
    if base:
        series.append(("baseline", [base.get(b, {}).get("completion") for b in cand]))
    fig = bar_figure(f"completion by {subject} (95% CI)", list(cand), series) if with_plots else None
    return (table, *((fig,) if fig else ()))


def behaviour_table(m: dict[str, Any]) -> Table:
    """Each behaviour metric (``sandgym.evaluate.behaviour``): candidate, baseline and the paired gain."""
    b = m.get("baseline") or {}
    base, gains = b.get("behaviour") or {}, b.get("behaviour_gain") or {}
    rows = []
    for name, v in (m.get("behaviour") or {}).items():
        g = gains.get(name)
        rows.append((name.replace("_", " "), format_interval(v), str(v.get("episodes", "")),
                     format_interval(base.get(name)),
                     f"{format_interval(g['diff'], signed=True)} ({format_p(g['p_value'])})" if g else "n/a"))
    return Table(("behaviour", "candidate", "episodes", "baseline", "gain"), tuple(rows))


def headline_rows(m: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(metric, candidate, baseline, gain) rows of the headline table."""
    b = m.get("baseline") or {}
    rows = []
    for label, key in (("completion (all)", "overall"), ("completion (trained families)", "trained"),
                       ("completion (unseen families)", "unseen")):
        cand = m["overall"] if key == "overall" else m["transfer"][key]
        base = (b.get("overall") if key == "overall" else b.get("transfer", {}).get(key)) or {}
        gain = b.get(f"gain_{key}")
        g = f"{format_interval(gain['diff'], signed=True)} ({format_p(gain['p_value'])})" if gain else "n/a"
        rows.append((label, format_interval(cand.get("completion")), format_interval(base.get("completion")), g))
    return rows


def headline_sentence(m: dict[str, Any]) -> str:
    """The main result in one sentence: completion, and the gain over the baseline when there is one."""
    ov = m["overall"]
    text = (f"Completion {format_interval(ov.get('completion'))} over {ov.get('episodes', 0)} episodes of "
            f"{ov.get('tasks', 0)} tasks")
    g = (m.get("baseline") or {}).get("gain_overall")
    if g:
        spec = (m.get("baseline_policy") or {}).get("spec", "the baseline")
        text += f"; {format_interval(g['diff'], signed=True)} over {spec} ({format_p(g['p_value'])})"
    return text + "."


def build_report(m: dict[str, Any], *, with_plots: bool = True, episodes: Sequence[PolicyEpisodes] = ()) -> Report:
    """The evaluation report of the metrics ``m`` (as written to ``metrics.json``), with a browser of ``episodes``
    (each policy's, the candidate first)."""
    pol = m.get("policy", {})
    b = m.get("baseline")
    figs = plots(m) if with_plots else {}
    ov = m["overall"]

    def fig(key: str) -> tuple[Block, ...]:
        return (figs[key],) if key in figs else ()

    headline: tuple[Block, ...] = (
        Text(headline_sentence(m)),
        Table(("metric", "candidate", "baseline", "gain"), tuple(headline_rows(m))),
        Text("95% bootstrap intervals over tasks; gains are paired over the same tasks and seeds. "
             f"Mean reward {format_interval(ov.get('reward'))}."),
        *fig("headline"),
    )
    by_domain = Table(("domain", "completion", "reward", "pass@1"), tuple(
        (d, format_interval(s.get("completion")), format_interval(s.get("reward")),
         format_interval(s.get("pass_at_k", {}).get("1"))) for d, s in m["by_domain"].items()))
    by_family = Table(("family", "unseen", "completion", "tasks"), tuple(
        (f, "yes" if s.get("unseen") else "", format_interval(s.get("completion")), str(s.get("tasks", 0)))
        for f, s in m["by_family"].items()))
    stability = Table(("k", "pass@k", "pass^k"), tuple(
        (k, format_interval(v), format_interval(ov["pass_hat_k"].get(k))) for k, v in ov.get("pass_at_k", {}).items()))
    seeds = m["stability"]["seeds"]
    tr = m["transfer"]
    gains = []
    for key in ("trained", "unseen"):
        g = (b or {}).get(f"gain_{key}")
        if g:
            gains.append(f"{key}: {g['baseline']:.3f} -> {g['candidate']:.3f}, gain "
                         f"{format_interval(g['diff'], signed=True)}, normalised gain "
                         f"{format_number(g.get('normalized_gain'))}, {format_p(g['p_value'])}")
    bfm = (b or {}).get("failure_modes", {})
    failures = Table(("mode", "candidate", "baseline"), tuple(
        (mode, f"{share:.3f}", format_number(bfm.get(mode))) for mode, share in m["failure_modes"].items()))
    t = m.get("traps")
    if t:
        bt = (b or {}).get("traps") or {}
        traps: Block = Text(
            f"Trap-test failure rate {format_interval(t['trap_failure_rate'])} (baseline "
            f"{format_interval(bt.get('trap_failure_rate'))}); main-test failure rate "
            f"{format_interval(t['main_failure_rate'])} (baseline {format_interval(bt.get('main_failure_rate'))}).")
    else:
        traps = Text("No task in these suites carries trap tests.")
    c = m["cost"]
    sections = (
        Section("Headline", headline),
        Section("By domain", (by_domain, *fig("domains"))),
        Section("By family", (by_family,)),
        Section(f"By {subject_of(m)}", length_blocks(m, with_plots)),
        Section("Stability", (stability, Text(
            f"Consistency (all K samples agree): {format_interval(ov.get('consistency'))}. Completion by seed: "
            + ", ".join(f"seed {k} {format_number(v)}" for k, v in seeds["completion_by_seed"].items())
            + f" (std {seeds['std']:.3f})."), *fig("passk"))),
        Section("Transfer", (Text(
            f"Trained families: {format_interval(tr['trained'].get('completion'))}; unseen families: "
            f"{format_interval(tr['unseen'].get('completion'))}; gap: {format_number(tr.get('gap'))}."),
            *((Bullets(tuple(gains)),) if gains else ()))),
        Section("Failure modes", (failures, *fig("failures"))),
        Section("Traps", (traps,)),
        signals_section(m),
        Section("Behaviour", (behaviour_table(m), Text(
            "first attempt pass: the first visible-test run passed; recovery: solved after a failing first run "
            "(of those episodes); verify before submit: submitted code the visible tests had run on; valid call "
            "rate: turns without a format error."))),
        Section("Cost", (Text(
            f"{c['gen_tokens_total']:.0f} generated tokens ({c['gen_tokens_mean']:.1f}/episode), "
            f"{c['turns_mean']:.2f} turns/episode, {c['sandbox_s_total']:.1f} s in the sandbox, "
            f"{m.get('wall_s', 0):.0f} s wall; truncated {c['truncated_frac']:.3f}; infra failures "
            f"{m.get('infra_failures', 0)}."),)),
        episodes_section(episodes),
        Section("Versions", (Code((*[f"{k}: {v}" for k, v in (m.get("versions") or {}).items()],
                                   f"policy: {m.get('policy')}", f"baseline: {m.get('baseline_policy')}")),)),
    )
    return Report(f"sandgym evaluation: {pol.get('spec', '?')}", sections)


def markdown(m: dict[str, Any]) -> str:
    return build_report(m, with_plots=False).markdown()


def plots(m: dict[str, Any]) -> dict[str, Figure]:
    """Completion overall / trained / unseen families (the headline), per domain, pass@k and pass^k vs k, and
    failure modes; candidate and baseline in their own colours, with 95% intervals."""
    plt = pyplot()
    if plt is None:
        return {}
    b = m.get("baseline") or {}
    out: dict[str, Figure] = {}
    doms = list(m["by_domain"])
    f = bar_figure("completion by domain (95% CI)", doms,
                   [("candidate", [m["by_domain"][d].get("completion") for d in doms])])
    if f:
        out["domains"] = f

    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    # candidate in blues, baseline in oranges (as in the bar charts); pass^k dashed
    for (name, s), (c_at, c_hat) in zip((("candidate", m["overall"]), ("baseline", b.get("overall"))),
                                        ((PALETTE[0], PALETTE[5]), (PALETTE[1], PALETTE[4])), strict=True):
        if s and s.get("pass_at_k"):
            ks = [int(k) for k in s["pass_at_k"]]
            ax.plot(ks, [s["pass_at_k"][str(k)]["value"] for k in ks], marker="o", color=c_at,
                    label=f"{name} pass@k")
            ax.plot(ks, [s["pass_hat_k"][str(k)]["value"] for k in ks], marker="s", ls="--",
                    color=c_hat, label=f"{name} pass^k")
            ax.set_xticks(ks)
    ax.set_xlabel("k (samples per task)")
    ax.set_ylim(0, 1.05)
    legend(ax)
    ax.set_title("pass@k (any of k succeeds) and pass^k (all k succeed)")
    out["passk"] = Figure("pass@k and pass^k", figure_png(fig))

    groups = ["all tasks", "trained families", "unseen families"]
    series: list[Series] = [("candidate", [m["overall"].get("completion"),
                                           *(m["transfer"][g].get("completion") for g in ("trained", "unseen"))])]
    if b:
        series.append(("baseline", [b["overall"].get("completion"),
                                    *(b["transfer"][g].get("completion") for g in ("trained", "unseen"))]))
    f = bar_figure("completion: all tasks, trained and unseen families (95% CI)", groups, series)
    if f:
        out["headline"] = f

    modes = list(m["failure_modes"])
    series = [("candidate", [m["failure_modes"][k] for k in modes])]
    if b:
        series.append(("baseline", [b.get("failure_modes", {}).get(k, 0.0) for k in modes]))
    f = bar_figure("failure modes (share of episodes)", modes, series)
    if f:
        out["failures"] = f
    return out


def write_reports(out: Path, m: dict[str, Any], episodes: Sequence[PolicyEpisodes] | None = None) -> None:
    """``report.md`` and ``report.html`` of the metrics ``m`` into ``out``; the browser shows ``episodes``, by
    default those ``out`` holds (``episodes.jsonl``, and ``baseline/episodes.jsonl`` when there is a baseline)."""
    build_report(m, episodes=episodes_at_hand(out, m) if episodes is None else episodes).write(out)
