"""Rollout engine throughput vs plain batched ``model.generate``, and the embedded model's load times.

Multi-turn coding-like episodes (a ~350-token system+task prompt, tool results of ~70 tokens, 3 model turns of at
most ``--max-new-tokens``) with the embedded SmolLM2-135M + a fresh LoRA adapter (sampled from the merged copy).
Turns cut by the token budget continue (``truncated_turn='continue'``) so every episode has ``--turns`` turns.
The baseline replays every generation round of the engine (the same prompts, batch size and token budget) through
``model.generate`` (sampling, KV cache, stop on <|im_end|>). Tokens/s counts useful tokens only: each row's
tokens up to and including its stop token (what a trajectory keeps); generate's padding after a row has stopped
is not counted, the engine drops those rows. The engine also runs once more with ``kv_reuse_mb = 0`` (every turn
re-prefills the whole conversation, as generate does) to show what keeping the KV cache between turns saves.

Each batch size runs the three (engine, engine without KV reuse, generate) ``--repeats`` times, interleaved and in a
rotating order so load drift hits all three alike; the table gives medians and the spread (min-max) of tokens/s and
of the engine / generate ratio per repeat. The load is printed at start and end.

    python bench/rollout_throughput.py                     # batch sizes 1 4 8, 3 repeats, CPU, 2 threads
    python bench/rollout_throughput.py --batch-sizes 8 --turns 2 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import torch

from sandgym.agents.hf import HFPolicy
from sandgym.agents.policy import Generation, GenerationRequest, OnDone, SamplingParams
from sandgym.agents.rollout import RolloutConfig, RolloutEngine

SYSTEM = (
    "You are a software engineer. Write or fix Python code in the workspace; hidden tests decide.\n"
    "Act by calling tools. Write each call on its own line as\n"
    '<tool_call>{"name": "<tool>", "arguments": {<JSON arguments>}}</tool_call>\n'
    'Example: <tool_call>{"name": "read_file", "arguments": {"path": "solution.py"}}</tool_call>\n'
    "A reply with only a ```python code block runs that code with the python tool.\n"
    'When finished, call submit (the answer to a question, or "done" after coding).\nTools:\n'
    '{"name":"python","description":"Run Python code; prints are returned.","parameters":{"type":"object",'
    '"properties":{"code":{"type":"string"}},"required":["code"]}}\n'
    '{"name":"write_file","description":"Create or overwrite a workspace file.","parameters":{"type":"object",'
    '"properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}}\n'
    '{"name":"run_tests","description":"Run the visible tests.","parameters":{"type":"object","properties":{}}}\n'
    '{"name":"submit","description":"Finish the episode.","parameters":{"type":"object","properties":'
    '{"answer":{"type":"string"}},"required":["answer"]}}'
)
SHORT_SYSTEM = "\n".join(SYSTEM.splitlines()[:3])
TASKS = [
    "Write solution.py defining reverse_words(s: str) -> str that reverses the order of words in s.",
    "Write solution.py defining is_palindrome(s: str) -> bool, ignoring case and spaces.",
    "Write solution.py defining fizzbuzz(n: int) -> list[str] for the numbers 1..n.",
    "Fix solution.py: mean(xs) must return 0.0 for an empty list instead of raising ZeroDivisionError.",
]
TOOL_RESULT = (
    "============================= test session starts ==============================\n"
    "collected 3 items\n\ntest_visible.py .F.                                        [100%]\n"
    "FAILED test_visible.py::test_edge - AssertionError: assert None == ''\n1 failed, 2 passed in 0.04s"
)


class CodingLikeEnv(gym.Env):
    """Instant fake coding env: every turn gets a pytest-like tool result; ends after ``turns`` turns."""

    def __init__(self, turns: int, system: str = SYSTEM) -> None:
        self.turns, self.n, self.system = turns, 0, system

    def reset(self, *, seed: int | None = None, options: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self.n = 0
        prompt = str((options or {})["task"])
        return prompt, {"messages": [{"role": "system", "content": self.system}, {"role": "user", "content": prompt}],
                        "system_prompt": self.system, "tools": []}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.n += 1
        done = self.n >= self.turns
        return TOOL_RESULT, 0.0, done, False, {"messages": [{"role": "tool", "content": TOOL_RESULT}]}


class Recorder:
    """Wraps a policy and records each generation round's prompts (for the generate baseline)."""

    def __init__(self, policy: HFPolicy) -> None:
        self.policy = policy
        self.rounds: list[list[tuple[int, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.policy, name)

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingParams, on_done: OnDone | None = None) -> list[Generation]:
        self.rounds.append([r.token_ids for r in requests])
        return self.policy.generate(requests, sampling, on_done)


def engine_run(policy: HFPolicy, batch: int, args: argparse.Namespace) -> tuple[float, int, Recorder, int]:
    tasks = [TASKS[i % len(TASKS)] for i in range(batch)]
    rec = Recorder(policy)
    cfg = RolloutConfig(max_new_tokens=args.max_new_tokens, max_total_tokens=4096, max_turns=args.turns,
                        max_batch_size=batch, seed=args.seed, stop_strings=(), truncated_turn="continue")
    system = SYSTEM if args.prompt == "full" else SHORT_SYSTEM
    engine = RolloutEngine(rec, lambda: CodingLikeEnv(args.turns, system), cfg)  # type: ignore[arg-type]
    t = time.perf_counter()
    trajs = engine.run(tasks, group_size=1)
    wall = time.perf_counter() - t
    truncated = sum(turn.truncated for tr in trajs for turn in tr.turns)
    return wall, sum(tr.num_generated_tokens for tr in trajs), rec, truncated


@torch.inference_mode()
def generate_run(policy: HFPolicy, rounds: list[list[tuple[int, ...]]], args: argparse.Namespace) -> tuple[float, int]:
    model = policy.generation_model()
    tok = policy.tokenizer
    stop = sorted(policy.chat_format.stop_token_ids)
    pad = int(tok.pad_token_id)
    total, wall = 0, 0.0
    torch.manual_seed(args.seed)
    for prompts in rounds:
        width = max(len(p) for p in prompts)
        ids = torch.tensor([[pad] * (width - len(p)) + list(p) for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        t = time.perf_counter()
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=args.max_new_tokens, do_sample=True,
                             temperature=1.0, top_p=1.0, top_k=0, eos_token_id=stop, pad_token_id=pad)
        wall += time.perf_counter() - t
        for row in out[:, width:].tolist():
            n = next((i + 1 for i, x in enumerate(row) if x in stop), len(row))
            total += n
    return wall, total


ORDERS = (("engine", "no_reuse", "generate"), ("no_reuse", "engine", "generate"), ("engine", "generate", "no_reuse"))
"""Rotated per repeat, so no measurement always runs first or last."""


def load_times() -> tuple[float, float]:
    from sandgym.agents import models

    old = os.environ.get("SANDGYM_CACHE")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["SANDGYM_CACHE"] = tmp
        try:
            t = time.perf_counter()
            HFPolicy("smollm2-135m")
            first = time.perf_counter() - t
            t = time.perf_counter()
            HFPolicy("smollm2-135m")
            cached = time.perf_counter() - t
            assert models.embedded_cache_path().is_dir()
        finally:
            if old is None:
                os.environ.pop("SANDGYM_CACHE", None)
            else:
                os.environ["SANDGYM_CACHE"] = old
    return first, cached


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repeats of each measurement")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", choices=["full", "short"], default="full",
                    help="full: ~350-token system prompt with tool schemas; short: its first 3 lines (~60 tokens)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-load", action="store_true", help="skip the first-load/cached-load timing")
    ap.add_argument("--unmerged", action="store_true", help="also time the engine through the unmerged adapter")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, max_new_tokens={args.max_new_tokens}, turns={args.turns}, prompt={args.prompt}")
    if not args.skip_load:
        first, cached = load_times()
        print(f"embedded model load: first (GGUF -> safetensors cache) {first:.1f} s, cached {cached:.1f} s")
    policy = HFPolicy("smollm2-135m")
    policy.generation_model()  # build the merged copy outside the timings
    print(f"load at start: {os.getloadavg()[0]:.2f}; {args.repeats} interleaved repeats per batch size")
    print("| batch | engine tok/s | engine without KV reuse tok/s | generate tok/s | engine / generate (per repeat) | "
          "KV reuse gain | engine tokens | generate tokens | turns cut by max_new_tokens |")
    print("|---|---|---|---|---|---|---|---|---|")
    for batch in args.batch_sizes:
        tps: dict[str, list[float]] = {"engine": [], "no_reuse": [], "generate": []}
        ratios, e_tok, g_tok, cut = [], 0, 0, 0
        for rep in range(args.repeats):
            rounds: list[list[tuple[int, ...]]] = []
            got: dict[str, float] = {}
            for kind in ORDERS[rep % len(ORDERS)]:  # generate replays this repeat's engine rounds: always after it
                if kind == "engine":
                    wall, e_tok, rec, cut = engine_run(policy, batch, args)
                    rounds, tokens = rec.rounds, e_tok
                elif kind == "no_reuse":
                    policy.kv_reuse_mb = 0
                    wall, tokens, _, _ = engine_run(policy, batch, args)
                    del policy.kv_reuse_mb
                else:
                    wall, g_tok = generate_run(policy, rounds, args)
                    tokens = g_tok
                got[kind] = tokens / wall
            for k, v in got.items():
                tps[k].append(v)
            ratios.append(got["engine"] / got["generate"])
        med = {k: statistics.median(v) for k, v in tps.items()}

        def spread(v: list[float]) -> str:
            return f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})"

        print(f"| {batch} | {spread(tps['engine'])} | {spread(tps['no_reuse'])} | {spread(tps['generate'])} | "
              f"{statistics.median(ratios):.2f} ({', '.join(f'{r:.2f}' for r in ratios)}) | "
              f"{med['engine'] / med['no_reuse']:.2f} | {e_tok} | {g_tok} | {cut}/{batch * args.turns} |", flush=True)
        if args.unmerged:
            policy.merge_for_generation = False
            u_wall, u_tok, _, _ = engine_run(policy, batch, args)
            policy.merge_for_generation = True
            print(f"|   unmerged adapter, batch {batch} | {u_tok / u_wall:.1f} | | | {u_tok} | | |", flush=True)
    print(f"load at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
