"""The one report writer: markdown and HTML from the same tables, real <table>s, distinct series colours, the
headline first, and a page that a browser renders (headless Chromium: not blank, tables are tables; the episode
browser lists episodes, a filter narrows them, two policies show side by side, hostile text stays text)."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from sandgym.evaluate.aggregate import aggregate
from sandgym.evaluate.episodes import EpisodeRow
from sandgym.evaluate.metrics import Interval, format_interval
from sandgym.evaluate.report import build_report, write_reports
from sandgym.evaluate.report_browser import browser_data
from sandgym.evaluate.report_writer import PALETTE, Report, Section, Table, Text, bars, pyplot
from tests.evaluate.browser_episodes import EVIL, EVIL_TASK, three_policies


def _rows(rate: dict[str, float], n_tasks: int = 8, samples: int = 2) -> list[EpisodeRow]:
    rows = []
    for fam, p in rate.items():
        for t in range(n_tasks):
            for s in range(samples):
                ok = (t * samples + s) % 10 < p * 10
                rows.append(EpisodeRow(seed=0, task_id=f"{fam}-{t}", domain="coding" if fam != "needle" else
                                       "long_context", family=fam, unseen=fam == "parsing", sample=s, success=ok,
                                       reward=float(ok), failure_mode="success" if ok else "wrong_answer", turns=2,
                                       gen_tokens=40, sandbox_s=0.1, truncated=False, infra_failure=False))
    return rows


@pytest.fixture(scope="module")
def eval_metrics() -> dict:
    cand = _rows({"strings": 0.8, "parsing": 0.4, "needle": 0.6})
    base = _rows({"strings": 0.3, "parsing": 0.1, "needle": 0.2})
    m = aggregate(cand, samples=2, baseline=base, trained_families=("strings", "needle"))
    m.update(policy={"spec": "runs/candidate"}, baseline_policy={"spec": "base-model"})
    return m


class _Dom(HTMLParser):
    """Tables (rows per table), <pre> texts and the text of the page in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[int] = []
        self.pre: list[str] = []
        self.text: list[str] = []
        self.imgs = 0
        self._in_pre = False
        self._in_body = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "body":
            self._in_body = True
        elif tag == "table":
            self.tables.append(0)
        elif tag == "tr":
            self.tables[-1] += 1
        elif tag == "pre":
            self._in_pre = True
            self.pre.append("")
        elif tag == "img" and dict(attrs).get("src", "").startswith("data:image/png;base64,"):
            self.imgs += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "pre":
            self._in_pre = False

    def handle_data(self, data: str) -> None:
        if self._in_pre:
            self.pre[-1] += data
        if self._in_body and data.strip():
            self.text.append(data.strip())


def _dom(page: str) -> _Dom:
    d = _Dom()
    d.feed(page)
    return d


def _expected_rows(report: Report) -> list[int]:
    return [len(b.rows) + 1 for s in report.sections for b in s.blocks if isinstance(b, Table)]


def test_one_interval_formatter():
    assert format_interval({"value": 0.5, "low": 0.25, "high": 0.75}) == "0.500 [0.250, 0.750]"
    assert format_interval(Interval(0.1, -0.05, 0.2), signed=True) == "+0.100 [-0.050, +0.200]"
    assert str(Interval(0.5, 0.25, 0.75)) == "0.500 [0.250, 0.750]"
    assert format_interval({"value": float("nan"), "low": 0, "high": 0}) == format_interval(None) == "n/a"


def test_markdown_and_html_come_from_the_same_tables():
    r = Report("t", (Section("Headline", (Text("main **result** in `code`"),
                                          Table(("a", "b"), (("1", "x|y"), ("2", "z"))))),))
    md, page = r.markdown(), r.html()
    assert "| a | b |\n|---|---|\n| 1 | x\\|y |\n| 2 | z |" in md
    assert "<table><thead><tr><th scope='col'>a</th><th scope='col'>b</th></tr></thead>" in page
    assert "<td>x|y</td>" in page and "<strong>result</strong>" in page and "<code>code</code>" in page
    assert _dom(page).tables == [3] and "<pre" not in page
    with pytest.raises(ValueError, match="2 columns"):
        Table(("a", "b"), (("only one",),))


def test_evaluation_report_headline_first_tables_and_no_self_reference(eval_metrics, tmp_path):
    write_reports(tmp_path, eval_metrics)
    md, page = (tmp_path / "report.md").read_text(), (tmp_path / "report.html").read_text()
    report = build_report(eval_metrics, with_plots=False)
    dom = _dom(page)
    assert dom.tables == _expected_rows(report) and len(dom.tables) >= 5
    assert all("|---" not in p for p in dom.pre)  # no table as pipe text
    assert dom.imgs == 4
    assert "report.html" not in page
    assert "The plots are in report.html." in md
    assert dom.text[0].startswith("sandgym evaluation") and dom.text[1] == "Headline"
    assert dom.text[2].startswith("Completion 0.") and "over base-model" in dom.text[2]
    assert md.index("## Headline") < md.index("## By domain")


@pytest.mark.skipif(pyplot() is None, reason="matplotlib is not installed")
def test_each_series_has_its_own_colour():
    plt = pyplot()
    fig, ax = plt.subplots()
    bars(ax, ["x", "y"], [("candidate", [{"value": 0.5, "low": 0.4, "high": 0.6}, 0.7]),
                          ("baseline", [0.2, None])])
    colours = [tuple(round(c, 3) for c in p.get_facecolor()) for p in ax.patches]
    assert len(colours) == 3  # the missing baseline value draws no bar
    assert colours[0] == colours[1] != colours[2]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["candidate", "baseline"]
    plt.close(fig)


# ---- headless Chromium ----------------------------------------------------------------------------------------

CHROMIUM = next((p for p in (shutil.which("chromium"), "/usr/bin/chromium") if p and Path(p).exists()), None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _chromium(page: Path, tmp: Path, *extra: str, fragment: str = "",
              timeout: float = 120) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    url = page.resolve().as_uri() + (f"#{fragment}" if fragment else "")
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--window-size=1280,2000", *extra, url],
                          capture_output=True, text=True, timeout=timeout, check=True)


def _screenshot_checks(png: Path) -> None:
    from PIL import Image

    img = Image.open(png).convert("RGB")
    assert img.size == (1280, 2000)
    pixels = list(img.get_flattened_data() if hasattr(img, "get_flattened_data") else img.getdata())
    ink = sum(1 for p in pixels if min(p) < 200) / len(pixels)
    assert ink > 0.03, f"the screenshot is (nearly) blank: {ink:.1%} of pixels are not white"

    def share(hex_colour: str) -> float:
        target = tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
        return sum(1 for p in pixels if all(abs(a - b) < 12 for a, b in zip(p, target, strict=True))) / len(pixels)

    # the bar charts on the first screen show two series in two different colours
    assert share(PALETTE[0]) > 0.002 and share(PALETTE[1]) > 0.002


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (apt-get install chromium; .ci/run installs it)")
def test_evaluation_report_renders_in_headless_chromium(eval_metrics, tmp_path):
    out = tmp_path / "eval"
    out.mkdir()
    write_reports(out, eval_metrics)
    page = out / "report.html"
    dom = _dom(_chromium(page, tmp_path, "--dump-dom").stdout)
    assert dom.tables == _expected_rows(build_report(eval_metrics, with_plots=False))
    assert dom.imgs == 4
    png = tmp_path / "eval.png"
    _chromium(page, tmp_path, f"--screenshot={png}")
    _screenshot_checks(png)


class _Browser(HTMLParser):
    """What the episode browser drew: list rows, side-by-side columns, <pre> texts, and anything that could run."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict] = []
        self.cols: list[dict] = []
        self.pre: list[str] = []
        self.text: list[str] = []
        self.unsafe: list[tuple[str, dict]] = []
        self.body: dict = {}
        self._in_pre = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "body":
            self.body = a
        elif tag == "tr" and "data-ep" in a:
            self.rows.append(a)
        elif tag == "div" and a.get("class") == "sg-col":
            self.cols.append(a)
        elif tag == "pre":
            self._in_pre = True
            self.pre.append("")
        if any(k.startswith("on") for k in a) or (tag == "img" and not a.get("src", "").startswith("data:image/png")):
            self.unsafe.append((tag, a))

    def handle_endtag(self, tag: str) -> None:
        if tag == "pre":
            self._in_pre = False

    def handle_data(self, data: str) -> None:
        if self._in_pre:
            self.pre[-1] += data
        elif data.strip():
            self.text.append(data.strip())


@pytest.fixture(scope="module")
def browser_page(tmp_path_factory) -> Path:
    """An evaluation report whose browser holds base / SFT / SFT+RL episodes (one task's text is hostile)."""
    out = tmp_path_factory.mktemp("browser")
    policies = three_policies()
    m = aggregate(list(policies[2].rows), samples=2, baseline=list(policies[0].rows), trained_families=("strings",))
    m.update(policy={"spec": "runs/sft_rl"}, baseline_policy={"spec": "base-model"})
    build_report(m, episodes=policies).write(out)
    return out / "report.html"


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (apt-get install chromium; .ci/run installs it)")
def test_episode_browser_lists_filters_and_compares_in_headless_chromium(browser_page, tmp_path):
    def view(fragment: str = "") -> _Browser:
        b = _Browser()  # a script the data let loose would alert() and hang the dump: the timeout fails the test
        b.feed(_chromium(browser_page, tmp_path, "--dump-dom", fragment=fragment, timeout=60).stdout)
        assert not b.unsafe and "data-pwned" not in b.body  # nothing the agent wrote became markup or ran
        return b

    episodes = browser_data(three_policies())["episodes"]
    n = len(episodes)
    every = view()
    assert len(every.rows) == n and f"Showing {n} of {n} episodes." in every.text
    assert "Pick an episode above to see its turns." in every.text and not every.cols

    narrowed = view("f=parsing&o=failure")
    expected = [str(i) for i, e in enumerate(episodes) if e["family"] == "parsing" and not e["success"]]
    assert 0 < len(narrowed.rows) < n and [r["data-ep"] for r in narrowed.rows] == expected
    assert all(r["data-family"] == "parsing" and r["data-outcome"] == "failure" for r in narrowed.rows)
    assert f"Showing {len(expected)} of {n} episodes." in narrowed.text

    ep = next(i for i, e in enumerate(episodes) if e["p"] == 2 and e["task"] == EVIL_TASK and e["sample"] == 1)
    pair = view(f"ep={ep}")
    assert [c["data-policy"] for c in pair.cols] == ["SFT + RL", "SFT only"]  # by default the policy before it
    assert {(c["data-task"], c["data-seed"], c["data-sample"]) for c in pair.cols} == {(EVIL_TASK, "0", "1")}
    assert pair.pre.count(EVIL) == 2  # the hostile text, shown as text in both columns
    assert sum("6,000 more characters cut here" in t for t in pair.text) == 2
    assert [c["data-policy"] for c in view(f"ep={ep}&vs=0").cols] == ["SFT + RL", "base model"]
