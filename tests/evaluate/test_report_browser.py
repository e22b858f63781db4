"""The episode browser's data: hostile text stays data, long fields are cut with a note, tool calls are parsed,
the fields the filters and the side-by-side view read are there, and ``sandgym eval``'s report finds its episodes.
(Headless Chromium renders it in test_report_html.py.)"""

from __future__ import annotations

import json
from html.parser import HTMLParser

from sandgym.evaluate.aggregate import aggregate
from sandgym.evaluate.episodes import append_rows
from sandgym.evaluate.report import write_reports
from sandgym.evaluate.report_browser import (
    FIELD_CHARS,
    PolicyEpisodes,
    browser_block,
    browser_data,
    episodes_section,
    script_json,
    turn_json,
)
from sandgym.evaluate.report_browser_js import BROWSER_JS
from sandgym.evaluate.report_writer import Report, Section, Text
from tests.evaluate.browser_episodes import EVIL, EVIL_TASK, LONG_OBS, policy_rows, three_policies


class _Scripts(HTMLParser):
    """The scripts of a page (type, text) and every element's attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[tuple[str, str]] = []
        self.attrs: list[tuple[str, dict]] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.attrs.append((tag, dict(attrs)))
        if tag == "script":
            self._in = dict(attrs).get("type", "")
            self.scripts.append((self._in, ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in is not None:
            kind, text = self.scripts[-1]
            self.scripts[-1] = (kind, text + data)


def _page(policies: list[PolicyEpisodes]) -> str:
    return Report("t", (Section("Headline", (Text("x"),)), episodes_section(policies))).html()


def _parse(page: str) -> _Scripts:
    p = _Scripts()
    p.feed(page)
    return p


def test_hostile_text_cannot_end_the_data_or_become_markup():
    page = _page(three_policies())
    dom = _parse(page)
    assert [kind for kind, _ in dom.scripts] == ["application/json", ""]  # the data and the browser, nothing else
    assert not any(tag == "img" or "onerror" in a for tag, a in dom.attrs)
    assert "<img" not in page and "alert(1)</script>" not in page
    data = json.loads(dom.scripts[0][1])
    evil = next(e for e in data["episodes"] if e["task"] == EVIL_TASK)
    assert evil["turns"][0]["text"] == EVIL  # read back exactly, as text
    assert evil["turns"][1]["calls"] == [{"name": "submit", "args": '{"answer": "</script>"}'}]
    assert "</" not in BROWSER_JS and "innerHTML" not in BROWSER_JS  # the script draws with textContent only


def test_script_json_escapes_what_could_close_the_element():
    text = script_json({"a": "</script><!-- & \u2028 é"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"a": "</script><!-- & \u2028 é"}


def test_long_fields_are_cut_with_a_count_and_the_markdown_says_so():
    policies = three_policies()
    data = browser_data(policies)
    evil = [e for e in data["episodes"] if e["task"] == EVIL_TASK]
    assert len(evil) == 6  # 3 policies x 2 samples
    obs = evil[0]["turns"][0]
    assert obs["obs"] == LONG_OBS[:FIELD_CHARS] and obs["cut"] == {"obs": len(LONG_OBS) - FIELD_CHARS}
    assert data["cut"] == 6 and data["limit"] == FIELD_CHARS
    md = browser_block(policies).markdown[0]
    assert "48 episodes of base model, SFT only, SFT + RL" in md and "(6 were)" in md
    small = browser_data(policies, limit=100)
    assert small["cut"] == 12 and small["episodes"][0]["turns"][0]["obs"] == LONG_OBS[:100]  # and EVIL (>100)


def test_turns_show_tool_calls_errors_and_code_actions():
    code = turn_json({"text": "```python\nprint(1)\n```", "observation": "1\n", "truncated": False})
    assert code == {"text": "```python\nprint(1)\n```", "code_blocks": 1, "obs": "1\n"}
    call = turn_json({"text": '<tool_call>{"name": "grep", "arguments": {"pattern": "x"}}</tool_call>'})
    assert call["calls"] == [{"name": "grep", "args": '{"pattern": "x"}'}] and call["obs"] == ""
    bad = turn_json({"text": "<tool_call>{oops", "observation": "no", "truncated": True})
    assert bad["errors"][0].startswith("malformed: Tool call is not valid JSON") and bad["truncated"]


def test_filter_and_pairing_fields_are_in_the_data():
    data = browser_data(three_policies())
    assert data["policies"] == ["base model", "SFT only", "SFT + RL"]
    eps = data["episodes"]
    assert {e["family"] for e in eps} == {"strings", "parsing"}
    assert {e["mode"] for e in eps} == {"success", "wrong_answer", "max_turns"}
    assert all(e["mode"] == "success" for e in eps if e["success"])
    for p in range(3):  # every policy has each (task, seed, sample): the side-by-side view always finds a pair
        assert {(e["task"], e["seed"], e["sample"]) for e in eps if e["p"] == p} == \
               {(e["task"], e["seed"], e["sample"]) for e in eps if e["p"] == 0}
    first = eps[0]
    assert first["components"] == {"tests@v1": 1.0, "format@v1": 1.0} and first["n_turns"] == 2
    assert {"task", "seed", "sample", "family", "domain", "unseen", "reward", "infra"} <= set(first)


def test_no_episodes_is_a_line_not_a_browser():
    section = episodes_section([PolicyEpisodes("candidate", ())])
    assert "No episodes at hand" in section.blocks[0].text  # type: ignore[union-attr]
    assert "sg-data" not in Report("t", (section,)).html()


def _metrics(cand, base):
    m = aggregate(list(cand), samples=2, baseline=list(base) if base else None, trained_families=("strings",))
    m.update(policy={"spec": "runs/x"}, baseline_policy={"spec": "base"} if base else None)
    return m


def test_eval_report_browses_the_candidate_and_its_baseline_from_their_episode_files(tmp_path):
    cand, base = policy_rows({"strings": 0.8, "parsing": 0.2}), policy_rows({"strings": 0.2, "parsing": 0.0})
    (tmp_path / "baseline").mkdir()
    append_rows(tmp_path / "episodes.jsonl", cand)
    append_rows(tmp_path / "baseline" / "episodes.jsonl", base)
    write_reports(tmp_path, _metrics(cand, base))
    page, md = (tmp_path / "report.html").read_text(), (tmp_path / "report.md").read_text()
    data = json.loads(_parse(page).scripts[0][1])
    # all 32: the rows whose text holds U+2028 (a line separator to str.splitlines) are read back too
    assert data["policies"] == ["candidate", "baseline"] and len(data["episodes"]) == 32
    assert "## Episodes" in md and "32 episodes of candidate, baseline" in md

    alone = tmp_path / "alone"
    alone.mkdir()
    append_rows(alone / "episodes.jsonl", cand)
    write_reports(alone, _metrics(cand, None))
    data = json.loads(_parse((alone / "report.html").read_text()).scripts[0][1])
    assert data["policies"] == ["candidate"]
    assert "side by side" not in (alone / "report.md").read_text()


def test_each_task_prompt_is_shown_once_cut_and_as_data(tmp_path):
    """The evaluation writes prompts.json beside episodes.jsonl; the browser embeds each episode's task prompt,
    cut to the field limit, hostile text as data, and only for tasks that have episodes."""
    from sandgym.evaluate.episodes import PROMPT_CHARS, read_prompts, write_prompts
    from sandgym.tasks.task import Task, Verifier

    cand = policy_rows({"strings": 0.5})
    tasks = sorted({r.task_id for r in cand})
    long_prompt = "x" * (PROMPT_CHARS + 50)
    made = [Task(id=t, domain="coding", family="strings", split="heldout", prompt=EVIL if i == 0 else long_prompt,
                 verifier=Verifier(kind="match", answer="1")) for i, t in enumerate(tasks)]
    write_prompts(tmp_path, [*made, Task(id="unused", domain="coding", family="x", split="heldout", prompt="p",
                                         verifier=Verifier(kind="match", answer="1"))])
    prompts = read_prompts(tmp_path)
    assert prompts[tasks[1]]["cut"] == 50 and len(prompts[tasks[1]]["text"]) == PROMPT_CHARS
    data = browser_data([PolicyEpisodes("candidate", cand, prompts)], limit=100)
    assert set(data["prompts"]) == set(tasks)  # "unused" has no episode
    assert data["prompts"][tasks[0]]["text"] == EVIL[:100]
    assert data["prompts"][tasks[1]]["cut"] == PROMPT_CHARS - 100 + 50
    page = _page([PolicyEpisodes("candidate", cand, prompts)])
    assert [k for k, _ in _parse(page).scripts].count("application/json") == 1 and "<img" not in page.split("sg-data")[1]
    assert read_prompts(tmp_path / "nowhere") == {}
