"""The episode browser of a report: every episode's turns (the model's text, its tool calls, the observations),
reward components, outcome, failure mode, family, task id and seed, filterable, with two policies side by side on
the same task and seed.

The episodes travel inside ``report.html`` as JSON in a ``<script type="application/json">`` element and are drawn
by a small inline script (:mod:`sandgym.evaluate.report_browser_js`) that only ever sets ``textContent``: what the
agent wrote is shown as text, never run. Each text field is cut to :data:`FIELD_CHARS` characters with a visible
note (``episodes.jsonl`` keeps it whole), so the page stays one self-contained file of sane size.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandgym.envs.parsing import parse_turn
from sandgym.evaluate.episodes import EpisodeRow, read_prompts, read_rows
from sandgym.evaluate.report_browser_js import BROWSER_CSS, BROWSER_JS
from sandgym.evaluate.report_writer import Embed, Section, Text

FIELD_CHARS = 4000
"""The most characters of one text field (a turn's text, an observation, a call's arguments) the page embeds."""


@dataclass(frozen=True)
class PolicyEpisodes:
    """One policy's episodes, under the label the browser shows for it."""

    label: str
    rows: tuple[EpisodeRow, ...]
    prompts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """The tasks' prompts by task id, as :func:`~sandgym.evaluate.episodes.read_prompts` reads them (may be empty)."""


def clip(text: str, limit: int = FIELD_CHARS) -> tuple[str, int]:
    """``text`` cut to ``limit`` characters, and how many were cut.

    >>> clip("abcdef", 4)
    ('abcd', 2)
    """
    return (text, 0) if len(text) <= limit else (text[:limit], len(text) - limit)


def _field(out: dict[str, Any], key: str, text: str, limit: int) -> None:
    out[key], cut = clip(text, limit)
    if cut:
        out.setdefault("cut", {})[key] = cut


def turn_json(turn: Mapping[str, Any], limit: int = FIELD_CHARS) -> dict[str, Any]:
    """One turn as the browser shows it: the text, the tool calls parsed from it by the env's own parser (name and
    arguments), malformed calls, code blocks, the observation, and ``cut`` (characters cut per field)."""
    text = str(turn.get("text") or "")
    parsed = parse_turn(text)
    out: dict[str, Any] = {}
    _field(out, "text", text, limit)
    calls = []
    for c in parsed.calls:
        args, cut = clip(json.dumps(c.arguments, ensure_ascii=False), limit)
        calls.append({"name": c.name, "args": args, **({"cut": cut} if cut else {})})
    if calls:
        out["calls"] = calls
    if parsed.errors:
        out["errors"] = [f"{e.kind}: {e.message}" for e in parsed.errors]
    if parsed.code_blocks:
        out["code_blocks"] = len(parsed.code_blocks)
    _field(out, "obs", str(turn.get("observation") or ""), limit)
    if turn.get("truncated"):
        out["truncated"] = True
    return out


def episode_json(row: EpisodeRow, policy: int, limit: int = FIELD_CHARS) -> dict[str, Any]:
    """One episode of policy number ``policy`` as the browser's data."""
    traj = row.trajectory or {}
    return {
        "p": policy, "task": row.task_id, "seed": row.seed, "sample": row.sample, "family": row.family,
        "domain": row.domain, "unseen": row.unseen, "success": row.success, "reward": row.reward,
        "mode": row.failure_mode or ("success" if row.success else "unknown"), "infra": row.infra_failure,
        "truncated": row.truncated, "doc_tokens": row.doc_tokens, "n_turns": row.turns,
        "components": dict(row.reward_components),
        "turns": [turn_json(t, limit) for t in traj.get("turns") or ()],
    }


def cut_fields(episodes: Sequence[Mapping[str, Any]]) -> int:
    """How many text fields of these episodes' data were cut."""
    return sum(len(t.get("cut", {})) + sum(1 for c in t.get("calls", ()) if c.get("cut"))
               for e in episodes for t in e["turns"])


def browser_data(policies: Sequence[PolicyEpisodes], limit: int = FIELD_CHARS) -> dict[str, Any]:
    """What the page embeds: the policies' labels, the field limit, how many fields were cut, and every episode
    (policy by policy, in each policy's order)."""
    episodes = [episode_json(r, i, limit) for i, p in enumerate(policies) for r in p.rows]
    tasks = {r.task_id for p in policies for r in p.rows}
    prompts: dict[str, dict[str, Any]] = {}
    for p in policies:
        for task, prompt in p.prompts.items():
            if task in tasks and task not in prompts and isinstance(prompt, Mapping):
                text, cut = clip(str(prompt.get("text", "")), limit)
                prompts[task] = {"text": text, "cut": cut + int(prompt.get("cut", 0) or 0)}
    return {"policies": [p.label for p in policies], "limit": limit, "cut": cut_fields(episodes),
            "episodes": episodes, "prompts": prompts}


def script_json(data: Any) -> str:
    """``data`` as JSON that is safe inside a ``<script>`` element: ``<``, ``>`` and ``&`` are written as ``\\u``
    escapes, so no text (``</script>``, ``<!--``) can end the element early; ``JSON.parse`` reads it back exactly."""
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"), allow_nan=False, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def browser_block(policies: Sequence[PolicyEpisodes], limit: int = FIELD_CHARS) -> Embed:
    """The browser as a report block: a line on how to use it, its markup, the data and the script; in
    ``report.md`` a line on what it holds and where."""
    data = browser_data(policies, limit)
    n, names = len(data["episodes"]), ", ".join(data["policies"])
    side = "; a second column shows another policy on the same task, seed and sample" if len(policies) > 1 else ""
    how = (f"Every episode of {names}: pick one to see its turns{side}. Filters and the open episode are kept in the "
           f"page's address, so a link opens the same view. Text fields are cut to {limit:,} characters (marked "
           "where they are); episodes.jsonl has them whole.")
    page = (f"<p>{html.escape(how)}</p><div id='sg-browser' class='sg-browser' data-episodes='{n}'>"
            "<noscript><p>The episode browser needs JavaScript.</p></noscript></div>"
            f"<script type='application/json' id='sg-data'>{script_json(data)}</script>"
            f"<script>{BROWSER_JS}</script>")
    md = (f"report.html has an episode browser: {n} episodes of {names}, each turn's text, tool calls and "
          "observations, filterable by family, outcome and failure mode"
          + (", with two policies side by side on the same task and seed" if len(policies) > 1 else "")
          + f". Text fields longer than {limit:,} characters are cut there ({data['cut']} {'was' if data['cut'] == 1 else 'were'}); episodes.jsonl "
          "has them whole.")
    return Embed(page, BROWSER_CSS, (md,))


def episodes_section(policies: Sequence[PolicyEpisodes], limit: int = FIELD_CHARS) -> Section:
    """The report's "Episodes" section: the browser of the policies that have episodes, or a line saying that no
    episodes were at hand."""
    shown = [p for p in policies if p.rows]
    if not shown:
        return Section("Episodes", (Text("No episodes at hand: the browser reads episodes.jsonl beside "
                                         "metrics.json (and baseline/episodes.jsonl)."),))
    return Section("Episodes", (browser_block(shown, limit),))


def episodes_at_hand(out: Path, metrics: Mapping[str, Any]) -> list[PolicyEpisodes]:
    """The episodes an evaluation directory holds: ``episodes.jsonl`` (the candidate) and
    ``baseline/episodes.jsonl`` (the baseline, when the evaluation had one); empty when there are none."""
    out = Path(out)
    policies = [PolicyEpisodes("candidate", tuple(read_rows(out / "episodes.jsonl")), read_prompts(out))]
    if metrics.get("baseline_policy"):
        policies.append(PolicyEpisodes("baseline", tuple(read_rows(out / "baseline" / "episodes.jsonl")),
                                       read_prompts(out / "baseline")))
    return [p for p in policies if p.rows]


__all__ = ["FIELD_CHARS", "PolicyEpisodes", "browser_block", "browser_data", "clip", "episode_json",
           "episodes_at_hand", "episodes_section", "script_json", "turn_json"]
