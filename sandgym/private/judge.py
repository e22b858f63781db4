"""A model-based judge reward (any text-level ``Policy``), hybrid rule + judge rewards, and judge calibration.

The judge is asked to grade an answer against a rubric and to end with ``SCORE: <0-10>``; the score is parsed
robustly (``SCORE: 7``, ``Score = 7/10``, ``**SCORE:** 8.5``, a trailing ``7/10``) and normalised to [0, 1].
Every result carries the judge's reward version ``judge@<hash>`` (a hash of the judge's identity, version,
rubric, template and scale: change any of them and it is a new reward) and its calibration stats, when known.

>>> parse_score("The answer is right.\\nSCORE: 8")
0.8
>>> parse_score("no number here") is None
True
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sandgym.agents.policy import Generation, GenerationRequest, SamplingParams, TextPolicy
from sandgym.errors import ConfigError

JUDGE_TEMPLATE = (
    "Grade the answer to the task below against the rubric.\n\n## Rubric\n{rubric}\n\n## Task\n{prompt}\n\n"
    "## Answer\n{answer}\n\nExplain briefly, then end with one line exactly of the form `SCORE: N` where N is an "
    "integer from 0 (fails the rubric) to {scale} (fully meets it)."
)
JUDGE_SYSTEM = "You are a strict, fair grader. You only grade; you never solve the task yourself."

_SCORE = re.compile(r"score\W{0,4}\s*[:=]?\s*\**\s*(-?\d+(?:\.\d+)?)\s*(?:(?:/|out of)\s*(\d+(?:\.\d+)?))?", re.I)
_FRACTION = re.compile(r"(-?\d+(?:\.\d+)?)\s*(?:/|out of)\s*(\d+(?:\.\d+)?)")


def parse_score(text: str, scale: float = 10.0) -> float | None:
    """The last ``SCORE: N`` (or ``N/M``, or a bare number) in ``text`` as a value in [0, 1]; None if absent."""
    found = list(_SCORE.finditer(text)) or list(_FRACTION.finditer(text))
    if found:
        value, denom = found[-1].group(1), found[-1].group(2)
        den = float(denom) if denom else scale
    elif re.fullmatch(r"\s*-?\d+(?:\.\d+)?\s*", text):
        value, den = text, scale
    else:
        return None
    if den <= 0:
        return None
    return min(1.0, max(0.0, float(value) / den))


class FunctionPolicy(TextPolicy):
    """A text-level ``Policy`` from a function ``(user_text) -> reply``: scripted judges for tests and baselines."""

    def __init__(self, fn: Callable[[str], str], name: str = "function") -> None:
        self.fn, self.name = fn, name

    def reply(self, request: GenerationRequest, sampling: SamplingParams) -> Generation:
        return Generation(text=self.fn(request.observation))


@dataclass(frozen=True)
class CalibrationStats:
    """How a judge agrees with human labels on a labelled set (binary: label 1 = meets the rubric)."""

    n: int
    agreement: float
    """Share of items where (score >= threshold) equals the label."""
    confusion: tuple[tuple[int, int], tuple[int, int]]
    """Rows: true label 0, 1; columns: predicted 0, 1."""
    ece: float
    """Expected calibration error of the score as a probability of label 1 (equal-width bins)."""
    kappa: float
    brier: float
    unparsed: int
    threshold: float = 0.5
    bins: int = 10
    judge_version: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "agreement": self.agreement, "confusion": [list(r) for r in self.confusion],
                "ece": self.ece, "kappa": self.kappa, "brier": self.brier, "unparsed": self.unparsed,
                "threshold": self.threshold, "bins": self.bins, "judge_version": self.judge_version}


@dataclass(frozen=True)
class JudgeResult:
    """One graded answer: the normalised score (0.0 when unparsable), the raw reply, and who graded it."""

    score: float
    parsed: bool
    raw: str
    version: str
    calibration: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class JudgeReward:
    """Grades answers against ``rubric`` with ``policy``; ``judge(prompts, answers) -> list[float]``."""

    policy: Any
    rubric: str
    version: str = "v1"
    """Bump when anything about the judge changes that the hash cannot see (e.g. the served weights)."""
    judge_id: str | None = None
    """Identity of the model (default: the policy's ``model`` or ``name`` attribute, else its class name)."""
    scale: int = 10
    max_new_tokens: int = 256
    temperature: float = 0.0
    template: str = JUDGE_TEMPLATE
    calibration: CalibrationStats | None = None

    def __post_init__(self) -> None:
        if not self.rubric.strip():
            raise ConfigError("JudgeReward needs a non-empty rubric: say what a good answer must do")
        if self.scale <= 0:
            raise ConfigError(f"scale={self.scale} must be a positive integer, e.g. 10")
        for key in ("{rubric}", "{prompt}", "{answer}"):
            if key not in self.template:
                raise ConfigError(f"judge template lacks {key}; include {{rubric}}, {{prompt}} and {{answer}}")

    @property
    def identity(self) -> str:
        p, model = self.policy, getattr(self.policy, "model", None)  # a served model's name, or HFPolicy's module
        return self.judge_id or str((model if isinstance(model, str) else None) or getattr(p, "name", None)
                                    or type(p).__name__)

    @property
    def reward_version(self) -> str:
        """``judge@<hash>``: a changed judge, rubric, template or scale is a new reward version."""
        blob = json.dumps([self.identity, self.version, self.rubric, self.template, self.scale])
        return "judge@" + hashlib.sha256(blob.encode()).hexdigest()[:12]

    def with_calibration(self, stats: CalibrationStats) -> JudgeReward:
        return replace(self, calibration=stats)

    def grade(self, prompts: Sequence[str], answers: Sequence[str]) -> list[JudgeResult]:
        """One ``JudgeResult`` per (prompt, answer)."""
        if len(prompts) != len(answers):
            raise ValueError(f"{len(prompts)} prompts but {len(answers)} answers; pass one answer per prompt")
        requests = []
        chat = self.policy.chat_format if getattr(self.policy, "token_level", False) else None
        for key, (prompt, answer) in enumerate(zip(prompts, answers, strict=True)):
            text = self.template.format(rubric=self.rubric, prompt=prompt, answer=answer, scale=self.scale)
            messages = ({"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": text})
            self.policy.start_episode(key, None)
            requests.append(GenerationRequest(key=key, messages=messages, observation=text, info={},
                                              max_new_tokens=self.max_new_tokens,
                                              token_ids=tuple(chat.prompt_ids(messages)) if chat else ()))
        try:
            gens = self.policy.generate(requests, SamplingParams(temperature=self.temperature, stop_strings=()))
        finally:
            for r in requests:
                self.policy.end_episode(r.key)
        calib = self.calibration.to_json() if self.calibration else None
        out = []
        for g in gens:
            score = parse_score(g.text, self.scale)
            out.append(JudgeResult(score if score is not None else 0.0, score is not None, g.text,
                                   self.reward_version, calib))
        return out

    def __call__(self, prompts: Sequence[str], answers: Sequence[str]) -> list[float]:
        return [r.score for r in self.grade(prompts, answers)]


RuleTerm = Callable[[str, str], float]


@dataclass(frozen=True)
class HybridResult:
    reward: float
    components: Mapping[str, float]
    judge: JudgeResult


@dataclass(frozen=True)
class HybridReward:
    """Weighted mean of rule-based terms (primary) and the judge (secondary).

    ``weights`` names every rule term and ``"judge"``; the judge's weight must stay below the rule terms' total.
    Components are keyed ``<term>`` and the judge's ``judge@<hash>``.
    """

    rule_terms: Mapping[str, RuleTerm]
    judge: JudgeReward
    weights: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.rule_terms:
            raise ConfigError("HybridReward needs at least one rule term (the judge is only secondary)")
        missing = [k for k in [*self.rule_terms, "judge"] if k not in self.weights]
        unknown = [k for k in self.weights if k not in self.rule_terms and k != "judge"]
        if missing or unknown:
            raise ConfigError(f"HybridReward weights: missing {missing}, unknown {unknown}; give one weight per rule "
                              f"term {sorted(self.rule_terms)} plus 'judge'")
        if any(w < 0 for w in self.weights.values()):
            raise ConfigError(f"HybridReward weights {dict(self.weights)} must be >= 0")
        rules = sum(self.weights[k] for k in self.rule_terms)
        if self.weights["judge"] >= rules:
            raise ConfigError(f"judge weight {self.weights['judge']} must be below the rule terms' total {rules} "
                              "(rules are primary); lower it or raise the rule weights")

    @property
    def version(self) -> str:
        blob = json.dumps([sorted(self.weights.items()), self.judge.reward_version])
        return "hybrid@" + hashlib.sha256(blob.encode()).hexdigest()[:12]

    def score(self, prompts: Sequence[str], answers: Sequence[str]) -> list[HybridResult]:
        judged = self.judge.grade(prompts, answers)
        total = sum(self.weights.values())
        out = []
        for prompt, answer, j in zip(prompts, answers, judged, strict=True):
            comps = {name: float(term(prompt, answer)) for name, term in self.rule_terms.items()}
            reward = sum(self.weights[k] * v for k, v in comps.items()) + self.weights["judge"] * j.score
            comps[j.version] = j.score
            out.append(HybridResult(reward / total if total else 0.0, comps, j))
        return out

    def __call__(self, prompts: Sequence[str], answers: Sequence[str]) -> list[float]:
        return [r.reward for r in self.score(prompts, answers)]
