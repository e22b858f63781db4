"""The one report writer: a report is a title and sections of blocks (text, tables, figures), rendered to
``report.md`` and to a self-contained ``report.html`` (real tables, inline PNG plots) from the same data.

Evaluation (:mod:`sandgym.evaluate.report`), the demo and the sweep report build a :class:`Report` and call
:meth:`Report.write`. The first section is the headline: the main result comes first on the page.

Plots need matplotlib (the ``report`` extra); without it the HTML has the tables and text only.
"""

from __future__ import annotations

import base64
import html
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandgym.evaluate.metrics import Interval, format_interval, format_p

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#8C6D31", "#000000")
"""Series colours (Okabe-Ito, colour-blind safe); series i gets ``PALETTE[i % len(PALETTE)]``."""

IntervalLike = Interval | Mapping[str, Any] | None


def format_number(x: float | None, fmt: str = ".3f") -> str:
    """``x`` with ``fmt``; ``n/a`` when missing or NaN."""
    return "n/a" if x is None or x != x else format(x, fmt)


# ---- the document model ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Text:
    """A paragraph. Inline ``code``, **bold** and [links](href) render in both outputs."""

    text: str
    warning: bool = False


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


@dataclass(frozen=True)
class Code:
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    """A table: markdown and HTML are both rendered from these cells. ``wrap`` names the columns whose long
    text may wrap in HTML (every other cell stays on one line, so a row never breaks mid-interval)."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    wrap: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.header):
                raise ValueError(f"table row {row!r} has {len(row)} cells for {len(self.header)} columns")

    def markdown(self) -> str:
        """The table alone, as markdown (no trailing blank line)."""
        return "\n".join(_md_block(self)[:-1])


@dataclass(frozen=True)
class Figure:
    """A plot as a base64 PNG (HTML only; the markdown says once where the plots are)."""

    title: str
    png: str


@dataclass(frozen=True)
class Embed:
    """Ready HTML placed as is in ``report.html`` (its ``css`` joins the page's style sheet once); ``markdown`` is
    what ``report.md`` says in its place. Whoever builds ``html`` escapes what it holds (see
    :mod:`sandgym.evaluate.report_browser`)."""

    html: str
    css: str = ""
    markdown: tuple[str, ...] = ()


Block = Text | Bullets | Code | Table | Figure | Embed


@dataclass(frozen=True)
class Section:
    title: str
    blocks: tuple[Block, ...]
    level: int = 2


@dataclass(frozen=True)
class Report:
    """A title and sections; the first section is the headline."""

    title: str
    sections: tuple[Section, ...]
    html_name: str = field(default="report.html")

    def markdown(self) -> str:
        lines = [f"# {self.title}", ""]
        if any(isinstance(b, Figure) for s in self.sections for b in s.blocks):
            lines += [f"The plots are in {self.html_name}.", ""]
        for s in self.sections:
            body = [line for b in s.blocks for line in _md_block(b)]
            lines += [f"{'#' * s.level} {s.title}", "", *body]
        return "\n".join(lines)

    def html(self) -> str:
        body = [f"<h1>{_inline(self.title)}</h1>"]
        for i, s in enumerate(self.sections):
            inner = "".join(_html_block(b) for b in s.blocks)
            cls = " class='headline'" if i == 0 else ""
            body.append(f"<section{cls}><h{s.level}>{_inline(s.title)}</h{s.level}>{inner}</section>")
        css = CSS + "".join(dict.fromkeys(b.css for s in self.sections for b in s.blocks if isinstance(b, Embed)))
        return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
                f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
                f"<title>{html.escape(self.title)}</title><style>{css}</style></head>"
                f"<body><main>{''.join(body)}</main></body></html>")

    def write(self, out: str | Path, stem: str = "report") -> tuple[Path, Path]:
        """Write ``<stem>.md`` and ``<stem>.html`` into ``out``; returns both paths."""
        out = Path(out)
        md, page = out / f"{stem}.md", out / f"{stem}.html"
        md.write_text(self.markdown(), encoding="utf-8")
        page.write_text(self.html(), encoding="utf-8")
        return md, page


CSS = """
:root{color-scheme:light;--line:#d0d7de;--head:#f3f5f8;--accent:#0072B2}
body{margin:0;background:#fff;color:#1f2328;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,
"DejaVu Sans",sans-serif}
main{max-width:1240px;margin:0 auto;padding:24px 32px 48px}
h1{font-size:26px;margin:0 0 16px;border-bottom:2px solid var(--accent);padding-bottom:8px}
h2{font-size:20px;margin:28px 0 10px}
h3{font-size:16px;margin:20px 0 8px}
section.headline{background:#f6f9fc;border:1px solid var(--line);border-left:5px solid var(--accent);
border-radius:6px;padding:4px 20px 12px}
section.headline h2{margin-top:12px}
.table-wrap{overflow-x:auto;margin:10px 0 16px}
table{border-collapse:collapse;font-size:14px;font-variant-numeric:tabular-nums}
th,td{border:1px solid var(--line);padding:5px 10px;text-align:left;white-space:nowrap;vertical-align:top}
th{background:var(--head);font-weight:600;white-space:normal;min-width:4em}
tbody tr:nth-child(even){background:#fafbfc}
td.wrap{white-space:normal;min-width:18em;max-width:40em;font-size:13px}
p.warning{background:#fff4e5;border:1px solid #f0b46c;border-radius:6px;padding:8px 12px;font-weight:600}
code,pre{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:13px}
pre{background:#f6f8fa;border:1px solid var(--line);border-radius:6px;padding:10px 12px;overflow-x:auto}
figure{margin:12px 0 20px}
figure img{max-width:100%;height:auto;border:1px solid var(--line);border-radius:4px}
"""


_INLINE = re.compile(r"`([^`]+)`|\*\*([^*]+)\*\*|\[([^\]]+)\]\(([^)\s]+)\)")


def _inline(text: str) -> str:
    """Escape ``text`` for HTML, keeping inline ``code``, **bold** and [links](href)."""
    out, at = [], 0
    for m in _INLINE.finditer(text):
        out.append(html.escape(text[at:m.start()]))
        code, bold, label, href = m.groups()
        if code is not None:
            out.append(f"<code>{html.escape(code)}</code>")
        elif bold is not None:
            out.append(f"<strong>{html.escape(bold)}</strong>")
        else:
            out.append(f"<a href='{html.escape(href, quote=True)}'>{html.escape(label)}</a>")
        at = m.end()
    out.append(html.escape(text[at:]))
    return "".join(out)


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def _md_block(b: Block) -> list[str]:
    if isinstance(b, Text):
        return [f"**{b.text}**" if b.warning else b.text, ""]
    if isinstance(b, Bullets):
        return [*(f"- {i}" for i in b.items), ""]
    if isinstance(b, Code):
        return ["```", *b.lines, "```", ""]
    if isinstance(b, Embed):
        return [*b.markdown, ""] if b.markdown else []
    if isinstance(b, Table):
        return ["| " + " | ".join(map(_md_cell, b.header)) + " |", "|" + "---|" * len(b.header),
                *("| " + " | ".join(map(_md_cell, r)) + " |" for r in b.rows), ""]
    return []  # figures live in the HTML


def _html_block(b: Block) -> str:
    if isinstance(b, Text):
        return f"<p class='warning'>{_inline(b.text)}</p>" if b.warning else f"<p>{_inline(b.text)}</p>"
    if isinstance(b, Bullets):
        return "<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b.items) + "</ul>"
    if isinstance(b, Code):
        return f"<pre>{html.escape(chr(10).join(b.lines))}</pre>"
    if isinstance(b, Table):
        head = "".join(f"<th scope='col'>{html.escape(h)}</th>" for h in b.header)
        rows = "".join("<tr>" + "".join(f"<td class='wrap'>{html.escape(c)}</td>" if j in b.wrap
                                        else f"<td>{html.escape(c)}</td>" for j, c in enumerate(r)) + "</tr>"
                       for r in b.rows)
        return f"<div class='table-wrap'><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>"
    if isinstance(b, Embed):
        return b.html
    alt = html.escape(b.title, quote=True)
    return f"<figure><img alt='{alt}' src='data:image/png;base64,{b.png}'/></figure>"


# ---- plots ----------------------------------------------------------------------------------------------------

Series = tuple[str, Sequence[IntervalLike | float]]
"""A named series of values: intervals (drawn with error bars) or plain numbers."""


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, or None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "legend.fontsize": 9, "axes.spines.top": False,
                         "axes.spines.right": False, "axes.grid": True, "axes.grid.axis": "y", "grid.alpha": 0.3})
    return plt


def figure_png(fig: Any) -> str:
    """A matplotlib figure as a base64 PNG (the figure is closed)."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", facecolor="white")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def legend(ax: Any) -> None:
    """A legend outside the plot area, to the right, so it never hides data."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, borderaxespad=0.0)


def series_legend(fig: Any, names: Sequence[str]) -> None:
    """One legend for a figure of several panels: series ``i`` named ``names[i]`` in ``PALETTE[i]``, to the right."""
    from matplotlib.patches import Patch

    handles = [Patch(color=PALETTE[i % len(PALETTE)], label=n) for i, n in enumerate(names)]
    fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 0.9), frameon=False)


def _point(v: IntervalLike | float) -> tuple[float, float, float] | None:
    if v is None:
        return None
    if isinstance(v, int | float):
        return None if v != v else (float(v), 0.0, 0.0)
    d = v.to_json() if isinstance(v, Interval) else v
    if d.get("value") is None or d["value"] != d["value"]:
        return None
    return float(d["value"]), float(d["value"] - d["low"]), float(d["high"] - d["value"])


def bars(ax: Any, categories: Sequence[str], series: Sequence[Series], *, ylim: tuple[float, float] | None = None,
         ylabel: str = "", show_legend: bool = True) -> None:
    """Grouped bars: one colour per series (with its 95% interval as an error bar), one group per category.
    A missing value draws no bar (never a bar of height 0)."""
    width = 0.8 / max(len(series), 1)
    for i, (name, values) in enumerate(series):
        pts = [(j, p) for j, p in enumerate(map(_point, values)) if p is not None]
        if not pts:
            continue  # nothing to draw: no bar and no legend entry (the other series keep their colours)
        xs = [j - 0.4 + width * (i + 0.5) for j, _ in pts]
        ax.bar(xs, [p[0] for _, p in pts], width * 0.92, yerr=[[p[1] for _, p in pts], [p[2] for _, p in pts]],
               capsize=3, label=name, color=PALETTE[i % len(PALETTE)], edgecolor="white", linewidth=0.5,
               error_kw={"ecolor": "#333333", "elinewidth": 1})
    ax.set_xlim(-0.5, len(categories) - 0.5)  # the groups stay in place when a series has missing values
    ax.set_xticks(range(len(categories)), list(categories), rotation=20 if len(categories) > 3 else 0,
                  ha="right" if len(categories) > 3 else "center")
    if ylim is not None:
        ax.set_ylim(*ylim)
    if ylabel:
        ax.set_ylabel(ylabel)
    if not ax.patches:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="#57606a")
        ax.set_yticks([])
    elif show_legend and any(name for name, _ in series):
        legend(ax)


def bar_figure(title: str, categories: Sequence[str], series: Sequence[Series], *,
               ylim: tuple[float, float] | None = (0.0, 1.05), ylabel: str = "",
               size: tuple[float, float] = (7.5, 3.4)) -> Figure | None:
    """One grouped bar chart as a :class:`Figure` (None without matplotlib)."""
    plt = pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=size)
    bars(ax, categories, series, ylim=ylim, ylabel=ylabel)
    ax.set_title(title)
    return Figure(title, figure_png(fig))


__all__ = ["PALETTE", "Bullets", "Code", "Embed", "Figure", "Report", "Section", "Table", "Text", "bar_figure", "bars",
           "figure_png", "format_interval", "format_number", "format_p", "legend", "pyplot", "series_legend"]
