"""A tiny verifiers environment package, as on the Environments Hub: ``load_environment()`` returns a
``vf.SingleTurnEnv`` (a dataset of questions with answers, a system prompt, a parser) whose ``vf.Rubric`` has one
reward function and one metric. ``vf.load_environment("tests.interop.vf_capitals")`` imports it."""

from __future__ import annotations

import verifiers as vf
from datasets import Dataset

ROWS = [{"question": "What is the capital of France?", "answer": "Paris"},
        {"question": "What is the capital of Japan?", "answer": "Tokyo"},
        {"question": "What is the capital of Canada?", "answer": "Ottawa"}]
EVAL_ROWS = [{"question": "What is the capital of Kenya?", "answer": "Nairobi"}]
SYSTEM = "Answer with the name of the city only."


def correct_city(completion, answer, parser) -> float:
    """1 when the parsed answer is the city (case and surrounding space ignored)."""
    return float((parser.parse_answer(completion) or "").strip().lower() == answer.strip().lower())


def brief(completion, parser) -> float:
    """A metric (weight 0): the answer is at most three words."""
    return float(len((parser.parse_answer(completion) or "").split()) <= 3)


def load_environment(fail: bool = False, **kwargs) -> vf.SingleTurnEnv:
    rubric = vf.Rubric(funcs=[correct_city], weights=[1.0])
    rubric.add_metric(brief)
    if fail:
        def broken(completion) -> float:
            raise KeyError("no such field")

        rubric.add_reward_func(broken, weight=0.5)
    return vf.SingleTurnEnv(dataset=Dataset.from_list(ROWS), eval_dataset=Dataset.from_list(EVAL_ROWS),
                            system_prompt=SYSTEM, rubric=rubric, **kwargs)
