"""The same GRPO step run by sandgym and by TRL's ``GRPOTrainer``: wall time per step and peak memory of each.

Both trainers get the same model (the embedded SmolLM2-135M unless ``--model``), the same fresh LoRA adapter
shape (r=16, alpha=32, no dropout, on q/k/v/o/gate/up/down), the same chat-templated prompts (short arithmetic
questions, ``--prompts-per-step`` per step), G completions per prompt of at most ``--max-new-tokens`` tokens
sampled at temperature 1, the same pure-python reward (0.5 for a bare-number answer + 1.0 when it is right), GRPO
group advantages (divided by the group std), token-mean loss aggregation (TRL's ``dapo``), one optimiser pass
(AdamW, constant ``--lr``, grad-norm clip 1.0), a KL term with ``--beta`` against the adapter-disabled model,
float32, no gradient checkpointing, no vLLM.

sandgym's step is the trainer's own pieces called the way ``sandgym.train.loop`` calls them: sample the G
completions with ``sample_batch`` on ``HFPolicy.generation_model()`` (the merged copy), rewards, group
advantages, ``learner_update``. TRL's step is ``GRPOTrainer.train`` with one prompt x G completions per optimiser
step (``per_device_train_batch_size = G``). Each trainer runs in its own child process (so its peak RSS,
``getrusage(RUSAGE_SELF).ru_maxrss``, is its own), ``--warmup`` steps first, then the median of ``--steps``.

    python bench/vs_trl.py --out runs/bench/vs_trl.json        # 3 alternating repeats, ~20 min on the 2-core VM
    python bench/vs_trl.py --steps 2 --warmup 1 --only sandgym    # sandgym side only
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium
from honest import load_line, spread  # bench/honest.py (the script's folder is on sys.path)

TIME_GOAL, MEMORY_GOAL = 0.5, 0.8
"""The targets: sandgym's step at most half TRL's time and at most 0.8x its peak memory."""
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class BenchConfig:
    model: str = "smollm2-135m"
    group_size: int = 8
    prompts_per_step: int = 1
    max_new_tokens: int = 32
    lr: float = 1e-4
    beta: float = 0.04
    lora_r: int = 16
    lora_alpha: int = 32
    warmup: int = 1
    steps: int = 4
    threads: int = 2
    seed: int = 0
    micro_batch: int = 0
    """sandgym learner micro-batch (0: the whole step's G x prompts sequences in one pass, like TRL)."""
    merge_for_generation: bool = True
    generation_weights: str = "float"
    """sandgym's generation copy: "float" or "int8" (dynamic int8 with the adapter live)."""

    @property
    def total_steps(self) -> int:
        return self.warmup + self.steps


# ---- the shared task: prompts and reward ------------------------------------------------------------------------
def make_prompts(n: int, seed: int = 0) -> list[tuple[str, int]]:
    """``n`` short questions ``What is A + B? ...`` with their answers (deterministic)."""
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        out.append((f"What is {a} + {b}? Answer with just the number.", a + b))
    return out


_BARE_NUMBER = re.compile(r"\s*(-?\d+)\s*\.?\s*")


def reward(text: str, answer: int) -> float:
    """0.5 for a reply that is a bare number, +1.0 when that number is the answer."""
    m = _BARE_NUMBER.fullmatch(text)
    if m is None:
        return 0.0
    return 0.5 + (1.0 if int(m.group(1)) == answer else 0.0)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def _rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def _timed(fn: Callable[..., Any], bucket: list[float]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            bucket.append(time.perf_counter() - t)

    return wrapper


# ---- sandgym side -----------------------------------------------------------------------------------------------
@dataclass
class SandgymState:
    policy: Any
    optimizer: Any
    algo: Any
    cfg: BenchConfig
    prompts: list[tuple[list[int], int]]
    ref_times: list[float] = field(default_factory=list)


def sandgym_setup(cfg: BenchConfig) -> SandgymState:
    """The policy (fresh LoRA), its AdamW optimiser and the tokenized prompts."""
    import torch

    import sandgym.train.step as step_mod
    from sandgym.agents.hf import HFPolicy, LoraSpec
    from sandgym.train.config import AlgorithmConfig

    torch.manual_seed(cfg.seed)
    policy = HFPolicy(
        cfg.model,
        lora=LoraSpec(r=cfg.lora_r, alpha=cfg.lora_alpha, dropout=0.0, target_modules=LORA_TARGETS),
        device="cpu",
        dtype="float32",
        merge_for_generation=cfg.merge_for_generation,
        generation_weights=cfg.generation_weights,
    )
    policy.model.train()
    optimizer = torch.optim.AdamW([p for p in policy.model.parameters() if p.requires_grad], lr=cfg.lr, weight_decay=0.0)
    algo = AlgorithmConfig(name="grpo", group_size=cfg.group_size, beta=cfg.beta, epochs=1, loss_aggregation="token_mean")
    tok = policy.tokenizer
    prompts = []
    for question, answer in make_prompts(cfg.prompts_per_step * cfg.total_steps, cfg.seed):
        ids = tok.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True, tokenize=True,
                                      return_dict=True)["input_ids"]
        prompts.append((list(ids), answer))
    state = SandgymState(policy, optimizer, algo, cfg, prompts)
    # Instrument (not modify) the reference pass so the learner's time can be split.
    if not getattr(step_mod._ref_logprobs, "_bench_timed", False):
        orig = step_mod._ref_logprobs
        bucket: list[float] = []
        wrapped = _timed(orig, bucket)
        wrapped._bench_timed = True  # type: ignore[attr-defined]
        wrapped._bucket = bucket  # type: ignore[attr-defined]
        step_mod._ref_logprobs = wrapped
    state.ref_times = step_mod._ref_logprobs._bucket  # type: ignore[attr-defined]
    return state


def sandgym_step(state: SandgymState, step: int) -> dict[str, float]:
    """One GRPO step on prompts ``[step * P, (step + 1) * P)``; returns its timings (seconds) and statistics."""
    import torch

    from sandgym.agents.sampler import sample_batch
    from sandgym.train.advantages import compute_advantages
    from sandgym.train.step import Sample, learner_update

    cfg, policy, G = state.cfg, state.policy, state.cfg.group_size
    batch = state.prompts[step * cfg.prompts_per_step : (step + 1) * cfg.prompts_per_step]
    n_ref = len(state.ref_times)
    c0 = time.process_time()
    t0 = time.perf_counter()
    # 1. generation: G samples of every prompt, from the merged copy (refreshed after each optimiser step)
    model = policy.generation_model()
    t_merge = time.perf_counter() - t0
    prompt_rows = [ids for ids, _ in batch for _ in range(G)]
    rows = sample_batch(
        model,
        prompt_rows,
        max_new_tokens=[cfg.max_new_tokens] * len(prompt_rows),
        generators=[torch.Generator().manual_seed(cfg.seed * 1_000_003 + step * 1000 + i) for i in range(len(prompt_rows))],
        temperature=1.0,
        top_p=1.0,
        stop_token_ids=policy.chat_format.stop_token_ids,
        pad_token_id=int(policy.tokenizer.pad_token_id),
    )
    t1 = time.perf_counter()
    # 2. rewards -> group advantages
    answers = [ans for _, ans in batch for _ in range(G)]
    texts = [policy.tokenizer.decode(list(r.token_ids), skip_special_tokens=True) for r in rows]
    rewards = torch.tensor([reward(t, a) for t, a in zip(texts, answers, strict=True)], dtype=torch.float64)
    groups = torch.arange(len(batch)).repeat_interleave(G)
    adv = compute_advantages("grpo", rewards, groups).tolist()
    samples = []
    for p, r, a in zip(prompt_rows, rows, adv, strict=True):
        if not r.token_ids:
            continue
        if state.algo.skip_zero_advantage and state.algo.beta == 0 and abs(a) < 1e-8:
            continue  # what sandgym.train.loop does: no gradient from a zero-advantage sample when beta = 0
        k = len(r.token_ids)
        samples.append(
            Sample(
                token_ids=tuple(p) + tuple(r.token_ids),
                action_mask=(0,) * len(p) + (1,) * k,
                sampling_logprobs=(0.0,) * len(p) + tuple(r.logprobs),
                advantages=(0.0,) * len(p) + (float(a),) * k,
            )
        )
    t2 = time.perf_counter()
    # 3. loss -> backward -> optimiser step
    if samples:
        learner_update(
            policy.model,
            state.optimizer,
            samples,
            state.algo,
            pad_id=int(policy.tokenizer.pad_token_id),
            temperature=1.0,
            micro_batch=cfg.micro_batch or len(samples),
            max_grad_norm=1.0,
            norm_len=cfg.max_new_tokens,
        )
    t3 = time.perf_counter()
    t_ref = sum(state.ref_times[n_ref:])
    return {
        "step_s": t3 - t0,
        "step_cpu_s": time.process_time() - c0,
        "generate_s": t1 - t0,
        "merge_s": t_merge,
        "reward_adv_s": t2 - t1,
        "learner_s": t3 - t2,
        "ref_s": t_ref,
        "policy_fwd_bwd_opt_s": t3 - t2 - t_ref,
        "completion_tokens": float(sum(len(r.token_ids) for r in rows)),
        "trained_sequences": float(len(samples)),
        "reward_mean": float(rewards.mean()),
    }


def run_sandgym(cfg: BenchConfig) -> dict[str, Any]:
    import torch

    torch.set_num_threads(cfg.threads)
    t = time.perf_counter()
    state = sandgym_setup(cfg)
    setup_s = time.perf_counter() - t
    rss_setup = _rss_mb()
    steps = [sandgym_step(state, i) for i in range(cfg.total_steps)]
    return {"setup_s": setup_s, "rss_after_setup_mb": rss_setup, "steps": steps, "peak_rss_mb": _peak_rss_mb()}


# ---- sandgym's own training loop (what `sandgym train` runs) --------------------------------------------------------
def template_system_prompt(model: str) -> str:
    """The system message the model's chat template adds to a conversation that has none ("" if it adds none).

    TRL renders the bare user question with the template, so its prompts carry this one; sandgym's chat format puts
    its own tool-use default there unless the env names one (with it, the loop once sampled 1.52x TRL's tokens)."""
    from transformers import AutoTokenizer

    from sandgym.agents.models import resolve_model

    tok = AutoTokenizer.from_pretrained(str(resolve_model(model)))
    question, system = [{"role": "user", "content": "What?"}], "\u2063SYSTEM\u2063"
    plain = str(tok.apply_chat_template(question, tokenize=False))
    head, _, after = str(tok.apply_chat_template([{"role": "system", "content": system}, *question],
                                                 tokenize=False)).partition(system)
    inserted = plain.startswith(head) and plain.endswith(after) and len(plain) > len(head) + len(after)
    return plain[len(head):len(plain) - len(after)] if inserted else ""


class ArithEnv(gymnasium.Env):  # type: ignore[misc]
    """One turn: the question as the only (user) message, the reply scored by :func:`reward`. ``system_prompt`` is
    the one the model's chat template inserts by itself (what TRL's prompts get), so both trainers sample from the
    same prompt tokens."""

    def __init__(self, system_prompt: str = "") -> None:
        from sandgym.envs.spaces import AnyText

        self.observation_space, self.action_space = AnyText(), AnyText()
        self.task: Any = None
        self.system_prompt = system_prompt

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.task = (options or {})["task"]
        messages = [{"role": "user", "content": self.task.prompt}]
        return self.task.prompt, {"messages": messages, "tools": [], "task": self.task,
                                  "system_prompt": self.system_prompt}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        from sandgym.envs.outcome import Actions, EpisodeOutcome, Grade

        r = reward(action, int(self.task.verifier.answer))
        outcome = EpisodeOutcome(grade=Grade(kind="match", answer_matched=r > 1.0), actions=Actions(turns=1, submitted=True))
        return "", r, True, False, {"messages": [], "reward_components": {"arith@v1": r}, "runtime": {},
                                     "infra_failure": False, "outcome": outcome, "turn_rewards": [r]}


def run_sandgym_train(cfg: BenchConfig) -> dict[str, Any]:
    """The same step through ``sandgym.train.loop.run``: the rollout engine, the env, trajectories, batch
    advantages, the learner, the adapter's publication and the step's logging. Per-step times are the loop's own
    ``perf/step_s`` (everything but checkpoint saving) and ``perf/rollout_s``."""
    import torch

    from sandgym.tasks.load import save_jsonl
    from sandgym.tasks.task import Task, Verifier
    from sandgym.train.config import load_config
    from sandgym.train.loop import run
    from sandgym.train.metrics import load_metrics

    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    gymnasium.register(id="bench/Arith-v0", entry_point=ArithEnv,
                       kwargs={"system_prompt": template_system_prompt(cfg.model)})
    with tempfile.TemporaryDirectory() as d:
        tasks = [Task(id=f"arith-{i}", domain="arith", family="add", split="train", prompt=q,
                      verifier=Verifier(kind="match", answer=str(a)))
                 for i, (q, a) in enumerate(make_prompts(cfg.prompts_per_step * cfg.total_steps, cfg.seed))]
        suite = save_jsonl(tasks, Path(d) / "arith.jsonl")
        overrides = {
            "out_dir": json.dumps(str(Path(d) / "run")), "seed": cfg.seed, "init": '"base"',
            "model.name": json.dumps(cfg.model), "model.lora_r": cfg.lora_r, "model.lora_alpha": cfg.lora_alpha,
            "model.lora_dropout": 0.0, "model.target_modules": json.dumps(list(LORA_TARGETS)),
            "model.generation_weights": json.dumps(cfg.generation_weights),
            "rollout.env": '"bench/Arith-v0"', "rollout.max_new_tokens": cfg.max_new_tokens, "rollout.max_turns": 1,
            "rollout.temperature": 1.0, "rollout.top_p": 1.0,
            "algorithm.name": '"grpo"', "algorithm.group_size": cfg.group_size, "algorithm.beta": cfg.beta,
            "algorithm.epochs": 1, "algorithm.loss_aggregation": '"token_mean"', "domains.normalize": "false",
            "optim.lr": cfg.lr, "optim.max_grad_norm": 1.0, "optim.steps": cfg.total_steps,
            "optim.tasks_per_step": cfg.prompts_per_step,
            "optim.micro_batch": cfg.micro_batch or cfg.group_size * cfg.prompts_per_step,
            "checkpoint.every": cfg.total_steps, "logging.tensorboard": "false", "logging.sample_trajectories": 0,
            "domains.mix": f'[{{suite = {json.dumps(str(suite))}, n_tasks = {len(tasks)}}}]',
        }
        config = load_config(None, [f"{k}={v}" for k, v in overrides.items()])
        t = time.perf_counter()
        result = run(config)
        wall = time.perf_counter() - t
        metrics = load_metrics(result.run_dir)
    steps = [{"step_s": m["perf/step_s"], "generate_s": m["perf/rollout_s"],
              "rest_s": m["perf/step_s"] - m["perf/rollout_s"], "reward_mean": m["rollout/reward_mean"],
              "completion_tokens": m["rollout/gen_tokens_mean"] * cfg.group_size * cfg.prompts_per_step,
              "tis_mean": m.get("losses/tis_mean", 1.0), "tis_max": m.get("losses/tis_max", 1.0)}
             for m in metrics]
    return {"setup_s": wall - sum(s["step_s"] for s in steps), "rss_after_setup_mb": float("nan"), "steps": steps,
            "peak_rss_mb": _peak_rss_mb()}


# ---- TRL side -----------------------------------------------------------------------------------------------------
def run_trl(cfg: BenchConfig) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from sandgym.agents.models import resolve_model

    torch.set_num_threads(cfg.threads)
    t = time.perf_counter()
    path = str(resolve_model(cfg.model))
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    torch.manual_seed(cfg.seed)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    items = make_prompts(cfg.prompts_per_step * cfg.total_steps, cfg.seed)
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": q}], "answer": a} for q, a in items])

    def bare_number_reward(completions: list[Any], answer: list[int], **_: Any) -> list[float]:
        return [reward(c[0]["content"] if isinstance(c, list) else c, a) for c, a in zip(completions, answer, strict=True)]

    out_dir = tempfile.mkdtemp(prefix="vs_trl-")
    args = GRPOConfig(
        output_dir=out_dir,
        per_device_train_batch_size=cfg.group_size * cfg.prompts_per_step,
        gradient_accumulation_steps=1,
        num_generations=cfg.group_size,
        max_completion_length=cfg.max_new_tokens,
        num_iterations=1,
        max_steps=cfg.total_steps,
        learning_rate=cfg.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=1.0,
        beta=cfg.beta,
        loss_type="dapo",
        scale_rewards="group",
        temperature=1.0,
        top_p=1.0,
        bf16=False,
        fp16=False,
        gradient_checkpointing=False,
        use_vllm=False,
        use_cpu=True,
        shuffle_dataset=False,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=cfg.seed,
    )
    peft_config = LoraConfig(
        r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=0.0, target_modules=list(LORA_TARGETS), task_type="CAUSAL_LM"
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=bare_number_reward,
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    # Instrument (not modify) generation and the log-prob passes to split TRL's step time.
    gen_times: list[float] = []
    nograd_times: list[float] = []
    grad_times: list[float] = []
    trainer._generate = _timed(trainer._generate, gen_times)
    orig_logps = trainer._get_per_token_logps_and_entropies

    def logps(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return orig_logps(*a, **k)
        finally:
            (grad_times if torch.is_grad_enabled() else nograd_times).append(time.perf_counter() - t0)

    trainer._get_per_token_logps_and_entropies = logps
    steps: list[dict[str, float]] = []
    logs_seen: list[dict[str, float]] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, *_: Any, **__: Any) -> None:
            self.t = time.perf_counter()
            self.c = time.process_time()
            self.marks = (len(gen_times), len(nograd_times), len(grad_times))

        def on_step_end(self, *_: Any, **__: Any) -> None:
            g, n, p = self.marks
            steps.append(
                {
                    "step_s": time.perf_counter() - self.t,
                    "step_cpu_s": time.process_time() - self.c,
                    "generate_s": sum(gen_times[g:]),
                    "ref_s": sum(nograd_times[n:]),
                    "policy_fwd_s": sum(grad_times[p:]),
                }
            )

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, float] | None = None, **_: Any) -> None:
            if logs is not None:
                logs_seen.append(dict(logs))

    trainer.add_callback(StepTimer())
    setup_s = time.perf_counter() - t
    rss_setup = _rss_mb()
    trainer.train()
    train_logs = [entry for entry in logs_seen if "reward" in entry]
    for s, entry in zip(steps, train_logs, strict=False):
        s["completion_tokens"] = float(entry.get("completions/mean_length", 0.0)) * cfg.group_size * cfg.prompts_per_step
        s["reward_mean"] = float(entry.get("reward", 0.0))
        s["trained_sequences"] = float(cfg.group_size * cfg.prompts_per_step)
    return {"setup_s": setup_s, "rss_after_setup_mb": rss_setup, "steps": steps, "peak_rss_mb": _peak_rss_mb()}


# ---- parent: run both children, summarise -------------------------------------------------------------------------
def summarise(result: dict[str, Any], warmup: int) -> dict[str, Any]:
    measured = result["steps"][warmup:]
    keys = sorted({k for s in measured for k in s})
    med = {k: statistics.median(s[k] for s in measured if k in s) for k in keys}
    return {
        "median": med,
        "steps_measured": len(measured),
        "peak_rss_mb": result["peak_rss_mb"],
        "rss_after_setup_mb": result["rss_after_setup_mb"],
        "setup_s": result["setup_s"],
        "all_steps": result["steps"],
    }


def alternating(sides: Sequence[str], repeat: int) -> list[str]:
    """The trainers' order in repeat ``repeat``: ABC, CBA, ABC, ... so that each sees the same load drift."""
    return list(sides) if repeat % 2 == 0 else list(sides)[::-1]


def combine(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One trainer's repeats: the median over repeats of each per-repeat median, the largest peak RSS, and every
    repeat kept (``repeats``) for the spread."""
    keys = sorted({k for r in runs for k in r["median"]})
    med = {k: statistics.median(r["median"][k] for r in runs if k in r["median"]) for k in keys}
    return {**runs[0], "median": med, "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
            "step_s_by_repeat": [r["median"]["step_s"] for r in runs], "repeats": list(runs)}


def _child(which: str, cfg: BenchConfig, timeout: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / f"{which}.json"
        cmd = [sys.executable, os.path.abspath(__file__), "--child", which, "--child-out", str(out), "--config-json",
               json.dumps(asdict(cfg))]
        env = dict(os.environ, OMP_NUM_THREADS=str(cfg.threads), MKL_NUM_THREADS=str(cfg.threads),
                   TOKENIZERS_PARALLELISM="false")
        t = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"{which} child failed (rc={proc.returncode}):\n{proc.stderr[-4000:]}")
        data = json.loads(out.read_text())
        data["process_wall_s"] = time.perf_counter() - t
        return data


def _fmt(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def report(summary: dict[str, Any]) -> str:
    sides = [(k, label) for k, label in (("sandgym-train", "sandgym train loop"), ("sandgym", "sandgym pieces"),
                                         ("trl", "TRL GRPOTrainer")) if k in summary]
    rows = [
        ("time per step, s (median)", "step_s"),
        ("  CPU time per step (user+sys, all threads), s", "step_cpu_s"),
        ("  generation, s", "generate_s"),
        ("    of which merged-copy refresh, s", "merge_s"),
        ("  reference pass (adapter off), s", "ref_s"),
        ("  policy fwd+bwd+optimizer (+rest), s", "rest_s"),
        ("completion tokens per step", "completion_tokens"),
        ("truncated importance weight (mean)", "tis_mean"),
    ]
    trl = summary.get("trl")
    lines = ["| | " + " | ".join(label for _, label in sides) + " | ratio to TRL |",
             "|---|" + "---:|" * (len(sides) + 1)]
    for label, key in rows:
        vals = [summary[k]["median"].get(key) for k, _ in sides]
        if all(v is None for v in vals):
            continue
        spec = ".0f" if "tokens" in key else ".3f" if key == "tis_mean" else ".2f"
        t = trl["median"].get(key) if trl else None
        ratios = " / ".join(_fmt(v / t) for (k, _), v in zip(sides, vals, strict=True) if k != "trl" and v and t)
        lines.append(f"| {label} | " + " | ".join(_fmt(v, spec) for v in vals) + f" | {ratios or '-'} |")
    peaks = [summary[k]["peak_rss_mb"] for k, _ in sides]
    lines.append("| peak RSS, MB | " + " | ".join(_fmt(v, ".0f") for v in peaks) + " | - |")
    if "ratio" in summary:
        r = summary["ratio"]
        lines.append("")
        by_repeat = ", ".join(f"{x:.2f}" for x in r.get("time_per_step_by_repeat", []))
        lines.append(f"{r['compared']} vs TRL: goal time <= {TIME_GOAL}x: "
                     f"{'MET' if r['time_per_step'] <= TIME_GOAL else 'NOT MET'} ({r['time_per_step']:.2f}x, median "
                     f"of the repeats: {by_repeat}); goal peak memory <= {MEMORY_GOAL}x: "
                     f"{'MET' if r['peak_rss'] <= MEMORY_GOAL else 'NOT MET'} ({r['peak_rss']:.2f}x)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    d = BenchConfig()
    p.add_argument("--model", default=d.model)
    p.add_argument("--group-size", type=int, default=d.group_size)
    p.add_argument("--prompts-per-step", type=int, default=d.prompts_per_step)
    p.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--beta", type=float, default=d.beta)
    p.add_argument("--lora-r", type=int, default=d.lora_r)
    p.add_argument("--lora-alpha", type=int, default=d.lora_alpha)
    p.add_argument("--warmup", type=int, default=d.warmup, help="steps run before measuring")
    p.add_argument("--steps", type=int, default=d.steps, help="measured steps (median reported)")
    p.add_argument("--threads", type=int, default=d.threads)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--micro-batch", type=int, default=d.micro_batch)
    p.add_argument("--no-merge", action="store_true", help="sandgym: sample through the unmerged adapter")
    p.add_argument("--generation-weights", choices=("float", "int8"), default=d.generation_weights,
                   help="sandgym: the generation copy's weights (int8: dynamic int8, adapter live)")
    p.add_argument("--only", choices=("all", "sandgym-train", "sandgym", "trl"), default="all",
                   help="sandgym-train: the training loop `sandgym train` runs (the goal's comparison); sandgym: the "
                        "step hand-assembled from its pieces (generation and learner only)")
    p.add_argument("--repeats", type=int, default=3, help="each trainer this many times, in alternating order")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per child process")
    p.add_argument("--out", type=Path, default=None, help="write the JSON summary here")
    p.add_argument("--child", choices=("sandgym", "sandgym-train", "trl"), help=argparse.SUPPRESS)
    p.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--config-json", help=argparse.SUPPRESS)
    a = p.parse_args(argv)

    if a.child:
        cfg = BenchConfig(**json.loads(a.config_json))
        run_child = {"sandgym": run_sandgym, "sandgym-train": run_sandgym_train, "trl": run_trl}[a.child]
        result = run_child(cfg)
        a.child_out.write_text(json.dumps(result))
        return 0

    cfg = BenchConfig(
        model=a.model, group_size=a.group_size, prompts_per_step=a.prompts_per_step, max_new_tokens=a.max_new_tokens,
        lr=a.lr, beta=a.beta, lora_r=a.lora_r, lora_alpha=a.lora_alpha, warmup=a.warmup, steps=a.steps,
        threads=a.threads, seed=a.seed, micro_batch=a.micro_batch, merge_for_generation=not a.no_merge,
        generation_weights=a.generation_weights,
    )
    summary: dict[str, Any] = {"config": asdict(cfg), "load_average": os.getloadavg(), "repeats": a.repeats}
    print(load_line("start") + f"; {a.repeats} repeat(s), trainers in alternating order; {cfg.warmup} warm-up + "
          f"{cfg.steps} measured steps per trainer per repeat (median, spread)", flush=True)
    sides = [w for w in ("sandgym-train", "sandgym", "trl") if a.only in ("all", w)]
    runs: dict[str, list[dict[str, Any]]] = {w: [] for w in sides}
    for r in range(a.repeats):
        for which in alternating(sides, r):
            print(f"repeat {r + 1}/{a.repeats}: running {which} ({cfg.warmup} warm-up + {cfg.steps} measured "
                  "steps) ...", flush=True)
            res = _child(which, cfg, a.timeout)
            s = summarise(res, cfg.warmup)
            s["process_wall_s"] = res["process_wall_s"]
            if which == "sandgym":
                s["median"]["rest_s"] = s["median"]["policy_fwd_bwd_opt_s"]
            if which == "trl":
                s["median"]["rest_s"] = statistics.median(
                    x["step_s"] - x["generate_s"] - x["ref_s"] for x in res["steps"][cfg.warmup :]
                )
            runs[which].append(s)
            measured = [x["step_s"] for x in res["steps"][cfg.warmup:]]
            print(f"  {which}: {spread(measured, '.2f')} s/step, peak RSS {s['peak_rss_mb']:.0f} MB", flush=True)
    for which, rs in runs.items():
        summary[which] = combine(rs)
    ours = "sandgym-train" if "sandgym-train" in summary else "sandgym"
    if ours in summary and "trl" in summary:
        per_repeat = [o["median"]["step_s"] / t["median"]["step_s"] for o, t in zip(runs[ours], runs["trl"], strict=True)]
        summary["ratio"] = {
            "compared": ours,
            "time_per_step": statistics.median(per_repeat),
            "time_per_step_by_repeat": per_repeat,
            "peak_rss": summary[ours]["peak_rss_mb"] / summary["trl"]["peak_rss_mb"],
        }
        summary["goal_met"] = {
            "time": summary["ratio"]["time_per_step"] <= TIME_GOAL,
            "memory": summary["ratio"]["peak_rss"] <= MEMORY_GOAL,
        }
    summary["load_average_end"] = os.getloadavg()
    print(load_line("end"))
    print()
    print(report(summary))
    if a.out is not None:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(summary, indent=2))
        print(f"\nwrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
