"""Readable reports of an evaluation: ``report.md`` and a self-contained ``report.html`` with inline plots."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any

from sandgym.evaluate.metrics import format_p

SECTIONS = ("Headline", "By domain", "By family", "Stability", "Transfer", "Failure modes", "Traps", "Cost",
            "Versions")


def _ci(d: dict[str, float] | None) -> str:
    if not d:
        return "n/a"
    return f"{d['value']:.3f} [{d['low']:.3f}, {d['high']:.3f}]"


def headline_rows(m: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(metric, candidate, baseline, gain) rows of the headline table."""
    b = m.get("baseline") or {}
    rows = []
    for label, key in (("completion (all)", "overall"), ("completion (trained families)", "trained"),
                       ("completion (unseen families)", "unseen")):
        cand = m["overall"] if key == "overall" else m["transfer"][key]
        base = (b.get("overall") if key == "overall" else b.get("transfer", {}).get(key)) or {}
        gain = b.get(f"gain_{key}")
        g = f"{_ci(gain['diff'])} ({format_p(gain['p_value'])})" if gain else "n/a"
        rows.append((label, _ci(cand.get("completion")), _ci(base.get("completion")), g))
    return rows


def markdown(m: dict[str, Any]) -> str:
    pol = m.get("policy", {})
    lines = [f"# sandgym evaluation: {pol.get('spec', '?')}", ""]
    lines += ["## Headline", "", "95% bootstrap intervals over tasks; gains are paired over the same tasks and seeds.", "",
              "| metric | candidate | baseline | gain |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in headline_rows(m)]
    ov = m["overall"]
    lines += ["", f"Mean reward {_ci(ov.get('reward'))} over {ov.get('episodes', 0)} episodes of {ov.get('tasks', 0)} tasks.", ""]
    lines += ["## By domain", "", "| domain | completion | reward | pass@1 |", "|---|---|---|---|"]
    for d, s in m["by_domain"].items():
        lines.append(f"| {d} | {_ci(s.get('completion'))} | {_ci(s.get('reward'))} | {_ci(s.get('pass_at_k', {}).get('1'))} |")
    lines += ["", "## By family", "", "| family | unseen | completion | tasks |", "|---|---|---|---|"]
    for f, s in m["by_family"].items():
        lines.append(f"| {f} | {'yes' if s.get('unseen') else ''} | {_ci(s.get('completion'))} | {s.get('tasks', 0)} |")
    lines += ["", "## Stability", "", "| k | pass@k | pass^k |", "|---|---|---|"]
    for k, v in ov.get("pass_at_k", {}).items():
        lines.append(f"| {k} | {_ci(v)} | {_ci(ov['pass_hat_k'].get(k))} |")
    seeds = m["stability"]["seeds"]
    lines += ["", f"Consistency (all K samples agree): {_ci(ov.get('consistency'))}. "
              f"Completion by seed: {seeds['completion_by_seed']} (std {seeds['std']:.3f}).", ""]
    tr = m["transfer"]
    gap = tr.get("gap")
    lines += ["## Transfer", "", f"Trained families: {_ci(tr['trained'].get('completion'))}; unseen families: "
              f"{_ci(tr['unseen'].get('completion'))}; gap: {'n/a' if gap is None else f'{gap:.3f}'}."]
    b = m.get("baseline")
    if b:
        for key in ("trained", "unseen"):
            g = b.get(f"gain_{key}")
            if g:
                ng = g.get("normalized_gain")
                lines.append(f"- {key}: {g['baseline']:.3f} -> {g['candidate']:.3f}, gain {_ci(g['diff'])}, "
                             f"normalised gain {'n/a' if ng is None else f'{ng:.3f}'}, {format_p(g['p_value'])}")
    lines += ["", "## Failure modes", "", "| mode | candidate | baseline |", "|---|---|---|"]
    bfm = (b or {}).get("failure_modes", {})
    for mode, share in m["failure_modes"].items():
        lines.append(f"| {mode} | {share:.3f} | {bfm.get(mode, float('nan')):.3f} |")
    lines += ["", "## Traps", ""]
    t = m.get("traps")
    if t:
        bt = (b or {}).get("traps") or {}
        lines.append(f"Trap-test failure rate {_ci(t['trap_failure_rate'])} (baseline {_ci(bt.get('trap_failure_rate'))}); "
                     f"main-test failure rate {_ci(t['main_failure_rate'])} (baseline {_ci(bt.get('main_failure_rate'))}).")
    else:
        lines.append("No task in these suites carries trap tests.")
    c = m["cost"]
    lines += ["", "## Cost", "", f"{c['gen_tokens_total']:.0f} generated tokens ({c['gen_tokens_mean']:.1f}/episode), "
              f"{c['turns_mean']:.2f} turns/episode, {c['sandbox_s_total']:.1f} s in the sandbox, "
              f"{m.get('wall_s', 0):.0f} s wall; truncated {c['truncated_frac']:.3f}; infra failures {m.get('infra_failures', 0)}.", ""]
    lines += ["## Versions", "", "```", *[f"{k}: {v}" for k, v in (m.get("versions") or {}).items()],
              f"policy: {m.get('policy')}", f"baseline: {m.get('baseline_policy')}", "```", ""]
    return "\n".join(lines)


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def plots(m: dict[str, Any]) -> dict[str, str]:
    """Base64 PNGs: per-domain bars with intervals, pass@k vs k, seen vs unseen, failure modes."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}
    b = m.get("baseline") or {}
    out = {}

    def bars(ax: Any, labels: list[str], series: list[tuple[str, list[dict[str, float] | None]]]) -> None:
        width = 0.8 / max(len(series), 1)
        for i, (name, vals) in enumerate(series):
            xs = [j + i * width for j in range(len(labels))]
            v = [x["value"] if x else 0 for x in vals]
            err = [[x["value"] - x["low"] if x else 0 for x in vals], [x["high"] - x["value"] if x else 0 for x in vals]]
            ax.bar(xs, v, width, yerr=err, capsize=3, label=name)
        ax.set_xticks([j + width * (len(series) - 1) / 2 for j in range(len(labels))], labels, rotation=30, ha="right")
        ax.set_ylim(0, 1.05)
        ax.legend()

    doms = list(m["by_domain"])
    fig, ax = plt.subplots(figsize=(6, 3))
    series = [("candidate", [m["by_domain"][d].get("completion") for d in doms])]
    if b:
        series.append(("baseline", [None for _ in doms]))
    bars(ax, doms, series[:1])
    ax.set_title("completion by domain (95% CI)")
    out["domains"] = _png(fig)

    fig, ax = plt.subplots(figsize=(6, 3))
    for name, s in (("candidate", m["overall"]), ("baseline", b.get("overall"))):
        if s and s.get("pass_at_k"):
            ks = [int(k) for k in s["pass_at_k"]]
            ax.plot(ks, [s["pass_at_k"][str(k)]["value"] for k in ks], marker="o", label=f"{name} pass@k")
            ax.plot(ks, [s["pass_hat_k"][str(k)]["value"] for k in ks], marker="x", ls="--", label=f"{name} pass^k")
    ax.set_xlabel("k")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7)
    ax.set_title("pass@k and pass^k")
    out["passk"] = _png(fig)

    fig, ax = plt.subplots(figsize=(6, 3))
    groups = ["trained", "unseen"]
    series = [("candidate", [m["transfer"][g].get("completion") for g in groups])]
    if b:
        series.append(("baseline", [b["transfer"][g].get("completion") for g in groups]))
    bars(ax, groups, series)
    ax.set_title("seen vs unseen families (95% CI)")
    out["transfer"] = _png(fig)

    fig, ax = plt.subplots(figsize=(6, 3))
    modes = list(m["failure_modes"])
    xs = range(len(modes))
    ax.bar([x - 0.2 for x in xs], [m["failure_modes"][k] for k in modes], 0.4, label="candidate")
    if b:
        ax.bar([x + 0.2 for x in xs], [b.get("failure_modes", {}).get(k, 0) for k in modes], 0.4, label="baseline")
    ax.set_xticks(list(xs), modes, rotation=30, ha="right")
    ax.legend()
    ax.set_title("failure modes (share of episodes)")
    out["failures"] = _png(fig)
    return out


def to_html(m: dict[str, Any], md: str) -> str:
    imgs = plots(m)
    body = [f"<h1>{html.escape(md.splitlines()[0].lstrip('# '))}</h1>"]
    body.append("<h2>Headline</h2><table><tr><th>metric</th><th>candidate</th><th>baseline</th><th>gain</th></tr>")
    for row in headline_rows(m):
        body.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
    body.append("</table>")
    for title, key in (("By domain", "domains"), ("Stability: pass@k", "passk"), ("Transfer", "transfer"),
                       ("Failure modes", "failures")):
        if key in imgs:
            body.append(f"<h2>{title}</h2><img alt='{key}' src='data:image/png;base64,{imgs[key]}'/>")
    body.append(f"<h2>Full report</h2><pre>{html.escape(md)}</pre>")
    style = "body{font-family:sans-serif;max-width:960px;margin:auto}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px}"
    return f"<!doctype html><html><head><meta charset='utf-8'><title>sandgym report</title><style>{style}</style></head><body>{''.join(body)}</body></html>"


def write_reports(out: Path, m: dict[str, Any]) -> None:
    md = markdown(m)
    (out / "report.md").write_text(md, encoding="utf-8")
    (out / "report.html").write_text(to_html(m, md), encoding="utf-8")
