"""``sandgym feedback import``: user feedback on suggestions -> scored trajectories and preference pairs.

A log record is one JSON object per line::

    {"prompt": "...", "output": "...", "outcome": "accepted" | "edited" | "rejected",
     "edit_distance": 12, "edited_output": "...", "id": "...", "metadata": {...}}

``prompt``, ``output`` and ``outcome`` are required. Rewards (``RewardMapping``): by default accepted = 1.0,
edited = 0.5, rejected = 0.0. With ``edit_distance_scale`` set, an edited record's reward instead falls linearly
with its edit distance: ``accepted - (accepted - rejected) * min(1, distance / scale)`` (the distance is the given
``edit_distance``, else the character insert/delete distance between ``output`` and ``edited_output``).
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sandgym.agents.trajectory import Trajectory, Turn, save_jsonl
from sandgym.errors import ConfigError, SandgymError
from sandgym.private.scrub import Scrubber, ScrubReport

OUTCOMES: tuple[str, ...] = ("accepted", "edited", "rejected")
REWARD_VERSION = "feedback@v1"
_FIELDS = {"id", "prompt", "output", "outcome", "edit_distance", "edited_output", "metadata"}


class FeedbackError(SandgymError, ValueError):
    """A feedback log has malformed records (the message names each line, what is wrong and the fix)."""


@dataclass(frozen=True)
class RewardMapping:
    """Outcome -> reward, and the optional edit-distance scale for edited records."""

    accepted: float = 1.0
    edited: float = 0.5
    rejected: float = 0.0
    edit_distance_scale: float | None = None
    """Characters of edit distance at which an edited suggestion is worth no more than a rejected one."""

    def __post_init__(self) -> None:
        if self.edit_distance_scale is not None and self.edit_distance_scale <= 0:
            raise ConfigError(f"edit_distance_scale={self.edit_distance_scale} must be > 0 (or unset)")

    @classmethod
    def parse(cls, spec: str | None, edit_distance_scale: float | None = None) -> RewardMapping:
        """From ``accepted=1.0,edited=0.5,rejected=0.0`` (any subset; the rest keep their defaults)."""
        values: dict[str, float] = {}
        for part in (spec or "").split(","):
            if not part.strip():
                continue
            key, sep, value = part.partition("=")
            key = key.strip()
            if not sep or key not in OUTCOMES:
                raise ConfigError(f"--mapping entry {part!r} must be OUTCOME=REWARD with OUTCOME one of {OUTCOMES}, "
                                  "e.g. accepted=1.0,edited=0.5,rejected=0.0")
            try:
                values[key] = float(value)
            except ValueError as exc:
                raise ConfigError(f"--mapping {key}={value!r} is not a number; give a float such as 0.5") from exc
        return cls(**values, edit_distance_scale=edit_distance_scale)

    def reward(self, record: FeedbackRecord) -> float:
        if record.outcome == "accepted":
            return self.accepted
        if record.outcome == "rejected":
            return self.rejected
        distance = record.distance
        if self.edit_distance_scale is None or distance is None:
            return self.edited
        share = min(1.0, distance / self.edit_distance_scale)
        return self.accepted - (self.accepted - self.rejected) * share

    def to_json(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "edited": self.edited, "rejected": self.rejected,
                "edit_distance_scale": self.edit_distance_scale}


@dataclass(frozen=True)
class FeedbackRecord:
    """One suggestion and how the user treated it."""

    id: str
    prompt: str
    output: str
    outcome: str
    edit_distance: float | None = None
    edited_output: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    line: int = 0

    @property
    def distance(self) -> float | None:
        """The given edit distance, else the insert/delete distance to ``edited_output`` (None when neither)."""
        if self.edit_distance is not None:
            return self.edit_distance
        if self.edited_output is None:
            return None
        matcher = difflib.SequenceMatcher(None, self.output, self.edited_output, autojunk=False)
        same = sum(b.size for b in matcher.get_matching_blocks())
        return float(len(self.output) + len(self.edited_output) - 2 * same)

    def to_trajectory(self, mapping: RewardMapping, source: str = "logs") -> Trajectory:
        """A text-level trajectory (no token ids: for evaluation and reward-weighted / preference stages)."""
        reward = mapping.reward(self)
        return Trajectory.from_turns(
            [Turn((), (), (), text=self.output)], task_id=self.id, domain="feedback", family=source, split="train",
            reward=reward, reward_components={REWARD_VERSION: reward}, success=self.outcome == "accepted",
            failure_mode="" if self.outcome == "accepted" else self.outcome, terminated=True,
            metadata={"prompt": self.prompt, "outcome": self.outcome, "edit_distance": self.distance,
                      "edited_output": self.edited_output, "mapping": mapping.to_json(), "line": self.line,
                      **({"log": self.metadata} if self.metadata else {})},
        )


@dataclass(frozen=True)
class BadRecord:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


def _check(data: Any, line: int) -> FeedbackRecord | BadRecord:
    if not isinstance(data, dict):
        return BadRecord(line, f"expected a JSON object, got {type(data).__name__} (fix: one object per line)")
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        near = {u: difflib.get_close_matches(u, sorted(_FIELDS), n=1) for u in unknown}
        hint = "; ".join(f"{u!r}" + (f" (did you mean {m[0]!r}?)" if m else "") for u, m in near.items())
        return BadRecord(line, f"unknown field(s) {hint} (fix: use only {sorted(_FIELDS)})")
    for name in ("prompt", "output", "outcome"):
        if name not in data:
            return BadRecord(line, f"missing required field {name!r} (fix: add {name} as a string)")
        if not isinstance(data[name], str):
            return BadRecord(line, f"{name} must be a string, got {type(data[name]).__name__} {data[name]!r:.40}")
    if data["outcome"] not in OUTCOMES:
        close = difflib.get_close_matches(data["outcome"], OUTCOMES, n=1)
        return BadRecord(line, f"outcome {data['outcome']!r} is not one of {OUTCOMES}"
                               + (f" (did you mean {close[0]!r}?)" if close else ""))
    dist = data.get("edit_distance")
    if dist is not None and (isinstance(dist, bool) or not isinstance(dist, (int, float)) or dist < 0):
        return BadRecord(line, f"edit_distance must be a number >= 0, got {dist!r} (fix: a character count)")
    edited = data.get("edited_output")
    if edited is not None and not isinstance(edited, str):
        return BadRecord(line, f"edited_output must be a string, got {type(edited).__name__}")
    if edited is not None and data["outcome"] != "edited":
        return BadRecord(line, f"edited_output given but outcome is {data['outcome']!r} (fix: outcome 'edited')")
    meta = data.get("metadata", {})
    if not isinstance(meta, dict):
        return BadRecord(line, f"metadata must be an object, got {type(meta).__name__}")
    rid = data.get("id")
    if rid is None:
        rid = "fb-" + hashlib.sha256(f"{data['prompt']}\0{data['output']}".encode()).hexdigest()[:12]
    return FeedbackRecord(str(rid), data["prompt"], data["output"], data["outcome"],
                          None if dist is None else float(dist), edited, dict(meta), line)


def parse_lines(lines: Iterable[str]) -> tuple[list[FeedbackRecord], list[BadRecord]]:
    """Every valid record and every bad line (blank lines are skipped)."""
    good: list[FeedbackRecord] = []
    bad: list[BadRecord] = []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            bad.append(BadRecord(number, f"invalid JSON: {exc.msg} at column {exc.colno} (fix: one complete JSON "
                                         "object per line)"))
            continue
        checked = _check(data, number)
        (good if isinstance(checked, FeedbackRecord) else bad).append(checked)  # type: ignore[arg-type]
    return good, bad


def read_records(path: str | Path, *, skip_bad: bool = False) -> tuple[list[FeedbackRecord], list[BadRecord]]:
    """Records of a log file; FeedbackError naming every bad line unless ``skip_bad``."""
    try:
        lines = Path(path).read_bytes().decode("utf-8").split("\n")  # not splitlines: U+2028 may sit in a text
    except FileNotFoundError:
        raise FeedbackError(f"feedback log {str(path)!r} does not exist; pass the path of a JSONL file of "
                            "accepted/edited/rejected records (docs/PRIVATE_DATA.md)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise FeedbackError(f"feedback log {str(path)!r} cannot be read as UTF-8 text ({e}); check the file") from None
    good, bad = parse_lines(lines)
    if bad and not skip_bad:
        listing = "\n".join(f"{path}:{b}" for b in bad)
        raise FeedbackError(f"{len(bad)} malformed record(s):\n{listing}\n(fix them, or pass --skip-bad to import "
                            f"the {len(good)} valid record(s) and report the rest)")
    return good, bad


def preference_pairs(records: Iterable[FeedbackRecord]) -> list[dict[str, Any]]:
    """Pairs (prompt, chosen, rejected): an edit beats its original; an accepted output beats a rejected one (or
    an edited original) for the same prompt."""
    pairs: list[dict[str, Any]] = []
    by_prompt: dict[str, dict[str, list[FeedbackRecord]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        by_prompt[r.prompt][r.outcome].append(r)
        if r.outcome == "edited" and r.edited_output is not None and r.edited_output != r.output:
            pairs.append({"prompt": r.prompt, "chosen": r.edited_output, "rejected": r.output, "source": [r.id],
                          "kind": "edit"})
    for prompt, groups in by_prompt.items():
        for good in groups["accepted"]:
            for worse in groups["rejected"] + groups["edited"]:
                if worse.output != good.output:
                    pairs.append({"prompt": prompt, "chosen": good.output, "rejected": worse.output,
                                  "source": [good.id, worse.id], "kind": f"accepted>{worse.outcome}"})
    return pairs


@dataclass(frozen=True)
class ImportResult:
    trajectories: tuple[Trajectory, ...]
    pairs: tuple[dict[str, Any], ...]
    bad: tuple[BadRecord, ...]
    scrub: ScrubReport = ScrubReport()


def scrub_records(records: Iterable[FeedbackRecord], scrubber: Scrubber) -> tuple[list[FeedbackRecord], ScrubReport]:
    """Records with secrets removed from prompt, output and edited output (file = ``line N``)."""
    out: list[FeedbackRecord] = []
    found: list[Any] = []
    for r in records:
        texts: dict[str, Any] = {}
        for name in ("prompt", "output", "edited_output"):
            value = getattr(r, name)
            if value is not None:
                texts[name], f = scrubber.text(value, f"line {r.line} {name}")
                found += f
        out.append(replace(r, **texts))
    return out, ScrubReport(tuple(found))


def import_feedback(path: str | Path, out: str | Path, *, mapping: RewardMapping | None = None,
                    pairs_out: str | Path | None = None, skip_bad: bool = False, scrub: bool = True) -> ImportResult:
    """Read a log, write trajectories to ``out`` and preference pairs to ``pairs_out`` (default OUT.pairs.jsonl).

    With ``scrub`` (the default) secrets are removed from every text first (``sandgym.private.scrub``); edit
    distances are measured on the original texts.
    """

    mapping = mapping or RewardMapping()
    records, bad = read_records(path, skip_bad=skip_bad)
    report = ScrubReport()
    if scrub:
        records = [replace(r, edit_distance=r.distance) for r in records]
        records, report = scrub_records(records, Scrubber())
    source = Path(path).stem
    trajs = [r.to_trajectory(mapping, source) for r in records]
    pairs = preference_pairs(records)
    save_jsonl(trajs, out)
    target = Path(pairs_out) if pairs_out else Path(out).with_suffix(".pairs.jsonl")
    target.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs), encoding="utf-8")
    return ImportResult(tuple(trajs), tuple(pairs), tuple(bad), report)
