"""Does sandgym's sampler draw longer completions than ``model.generate`` under the same sampling settings?
(bench/vs_trl.py once saw sandgym sample 8-35% more tokens per step than TRL.)

    python bench/sampling_lengths.py                      # 16 prompts x 16 samples, 32 new tokens, 2 repeats

Both sample from the same model (the embedded SmolLM2-135M, no adapter), the same chat-templated prompts as
bench/vs_trl.py, temperature 1, top_p 1, no top-k, at most ``--max-new-tokens``, stopping at the same end tokens
(TRL's rule: the tokenizer's EOS plus the model's ``generation_config.eos_token_id``). sandgym: ``sample_batch``
with a generator per row; transformers: ``model.generate(do_sample=True, top_k=0)`` with one global seed, as TRL
runs it. Counted as TRL counts a completion: tokens up to and including the first end token. Prints each side's
mean tokens per completion with a bootstrap 95% interval, the share that ended on an end token, and which end
tokens ended them; repeats alternate the order.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from honest import load_line  # noqa: E402  (bench/honest.py)
from vs_trl import make_prompts  # noqa: E402


def interval(xs: list[float], seed: int = 0) -> tuple[float, float, float]:
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(xs, k=len(xs))) for _ in range(2000))
    return statistics.fmean(xs), means[50], means[1949]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    import torch

    from sandgym.agents.hf import HFPolicy
    from sandgym.agents.sampler import sample_batch

    torch.set_num_threads(2)
    print(load_line("start") + f"; {args.prompts} prompts x {args.samples} samples, {args.repeats} repeats",
          flush=True)
    policy = HFPolicy("smollm2-135m", lora=None)
    model, tok = policy.generation_model(), policy.tokenizer
    eos = model.generation_config.eos_token_id
    ends = {tok.eos_token_id, *([eos] if isinstance(eos, int) else (eos or []))}
    print(f"end tokens (TRL's rule): {sorted(ends)} {[tok.decode([e]) for e in sorted(ends)]}; sandgym's chat "
          f"format stops at {sorted(policy.chat_format.stop_token_ids)}", flush=True)
    prompts = [tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=True,
                                       return_dict=True)["input_ids"] for q, _ in make_prompts(args.prompts)]
    rows = [list(p) for p in prompts for _ in range(args.samples)]

    def counted(ids: list[int]) -> tuple[int, int | None]:
        for i, t in enumerate(ids):
            if t in ends:
                return i + 1, t
        return len(ids), None

    def sandgym(rep: int) -> list[tuple[int, int | None]]:
        out = sample_batch(model, rows, max_new_tokens=[args.max_new_tokens] * len(rows),
                           generators=[torch.Generator().manual_seed(rep * 100_000 + i) for i in range(len(rows))],
                           temperature=1.0, top_p=1.0, stop_token_ids=frozenset(ends),
                           pad_token_id=int(tok.pad_token_id))
        return [counted(list(r.token_ids)) for r in out]

    @torch.inference_mode()
    def generate(rep: int) -> list[tuple[int, int | None]]:
        torch.manual_seed(rep)
        res = []
        for p in prompts:
            x = torch.tensor([p] * args.samples)
            y = model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=args.max_new_tokens,
                               do_sample=True, temperature=1.0, top_p=1.0, top_k=0, eos_token_id=sorted(ends),
                               pad_token_id=int(tok.pad_token_id))
            res += [counted(row[len(p):].tolist()) for row in y]
        return res

    got: dict[str, list[tuple[int, int | None]]] = {"sandgym": [], "transformers": []}
    for rep in range(args.repeats):
        for name in (("sandgym", "transformers") if rep % 2 == 0 else ("transformers", "sandgym")):
            got[name] += (sandgym if name == "sandgym" else generate)(rep)
    print(load_line("end"))
    print("\n| sampler | completions | tokens per completion (95% CI) | ended on an end token | by end token |\n"
          "|---|---:|---:|---:|---|")
    for name, res in got.items():
        mean, lo, hi = interval([float(n) for n, _ in res])
        ended = [e for _, e in res if e is not None]
        by = {tok.decode([e]): ended.count(e) for e in sorted(set(ended))}
        print(f"| {name} | {len(res)} | {mean:.1f} [{lo:.1f}, {hi:.1f}] | {len(ended) / len(res):.0%} | {by} |")


if __name__ == "__main__":
    main()
