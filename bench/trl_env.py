"""sandgym's trainer and TRL's GRPOTrainer on the same sandgym tasks: time per step and mean reward.

Both trainers get the same tasks (``--suite``, one task per step, written once to a tasks file both load), the same
model (the embedded SmolLM2-135M unless ``--model``) with the same chat template (TRL's copy of the Qwen2.5
tool-calling template, which the embedded model's own template lacks: ``tool_calling_tokenizer``), the same system
prompt, the same tools (``--tools``) rendered by that template, the same environment (sandgym's ToolEnv made from
one ``RolloutSpec``, local sandbox, ``--max-turns`` turns) and the same grader and rewards (the env's). Sampling:
G = ``--group-size`` completions per task at temperature 1. Learning: GRPO group advantages divided by the group
std, token-mean loss (TRL's ``dapo``), no KL (``beta`` 0), AdamW at a constant ``--lr``, grad-norm clip 1.0, a fresh
LoRA (r 16, alpha 32, q/k/v/o/gate/up/down), float32, no vLLM.

What differs is each trainer's own way: sandgym's loop (``sandgym.train.loop.run``) samples each turn up to
``--max-new-tokens`` and stops at the end of a call, steps the env with the turn's text (a turn cut by the budget
too: ``truncated_turn = "continue"``, so that every episode is graded, as under TRL; the default "end" scores such
an episode 0 ungraded), and leaves samples with a zero advantage out of the learner (``--learn-every-sample`` keeps
them, as TRL does); TRL (``GRPOTrainer`` with ``environment_factory`` = ``sandgym.interop.trl``) generates until
the model's end of turn, runs the parsed tool calls through the env, and bounds the whole rollout (turns and tool
replies) by ``max_completion_length`` = ``--max-turns`` x ``--max-new-tokens``. Time per step is the loop's
``perf/step_s`` and TRL's step from ``on_step_begin`` to ``on_step_end``; mean reward is each step's mean over its
G episodes (sandgym's ``rollout/reward_mean``, TRL's logged ``reward``: both the env's reward). Each trainer runs
in its own child process, ``--warmup`` steps first, then ``--steps`` measured steps; ``--repeats`` runs each
trainer that many times, in alternating order.

    python bench/trl_env.py --repeats 2 --steps 2 --out trl_env.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from honest import load_line, spread  # bench/honest.py (the script's folder is on sys.path)

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
SYSTEM_PROMPT = ("You are a software engineer. Write the solution file with write_file, check it with run_tests, "
                 "then call submit.")


@dataclass(frozen=True)
class BenchConfig:
    model: str = "smollm2-135m"
    suite: str = "coding/strings:train"
    difficulty: int = 1
    tools: tuple[str, ...] = ("write_file", "run_tests", "submit")
    max_turns: int = 2
    max_new_tokens: int = 48
    group_size: int = 4
    lr: float = 1e-4
    warmup: int = 0
    steps: int = 3
    threads: int = 2
    seed: int = 0
    skip_zero_advantage: bool = True
    """sandgym: leave samples with a zero advantage out of the learner (its default with beta 0); TRL trains on all."""
    model_dir: str = ""
    """Filled by the parent: the model with the tool-calling template (both children load it)."""
    tasks_file: str = ""
    """Filled by the parent: the tasks, one per step."""

    @property
    def total_steps(self) -> int:
        return self.warmup + self.steps

    def rollout(self) -> Any:
        from sandgym.rollout.spec import RolloutSpec

        return RolloutSpec(max_new_tokens=self.max_new_tokens, max_turns=self.max_turns, max_total_tokens=4096,
                           truncated_turn="continue", code_action="none", tools=self.tools,
                           env_kwargs={"system_prompt": SYSTEM_PROMPT})


# ---- shared inputs: the tasks and the model directory -----------------------------------------------------------
def prepare(cfg: BenchConfig, work: Path) -> BenchConfig:
    """Write the tasks file and a model directory (the model's files, the tokenizer with the tool template)."""
    from transformers import AutoTokenizer

    from sandgym.agents.models import resolve_model
    from sandgym.interop.trl import tool_calling_tokenizer
    from sandgym.tasks.load import save_jsonl
    from sandgym.tasks.registry import load_suite

    tasks = load_suite(cfg.suite, n=cfg.total_steps, seed=cfg.seed, difficulty=cfg.difficulty or None)
    tasks_file = save_jsonl(tasks[: cfg.total_steps], work / "tasks.jsonl")
    source = resolve_model(cfg.model)
    model_dir = work / "model"
    model_dir.mkdir()
    for f in source.iterdir():
        if f.is_file() and not f.name.startswith(("tokenizer", "special_tokens", "chat_template", "vocab", "merges")):
            os.symlink(f.resolve(), model_dir / f.name)
    tool_calling_tokenizer(AutoTokenizer.from_pretrained(str(source))).save_pretrained(str(model_dir))
    return BenchConfig(**{**asdict(cfg), "model_dir": str(model_dir), "tasks_file": str(tasks_file)})


# ---- sandgym side: the loop `sandgym train` runs -------------------------------------------------------------------
def run_sandgym(cfg: BenchConfig) -> dict[str, Any]:
    import torch

    from sandgym.train.config import load_config
    from sandgym.train.loop import run
    from sandgym.train.metrics import load_metrics

    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    r = cfg.rollout()
    with tempfile.TemporaryDirectory() as d:
        overrides = {
            "out_dir": json.dumps(str(Path(d) / "run")), "seed": cfg.seed, "init": '"base"',
            "model.name": json.dumps(cfg.model_dir), "model.lora_r": 16, "model.lora_alpha": 32,
            "model.lora_dropout": 0.0, "model.target_modules": json.dumps(list(LORA_TARGETS)),
            "rollout.max_new_tokens": r.max_new_tokens, "rollout.max_turns": r.max_turns,
            "rollout.max_total_tokens": r.max_total_tokens, "rollout.temperature": 1.0, "rollout.top_p": 1.0,
            "rollout.truncated_turn": json.dumps(r.truncated_turn),
            "rollout.code_action": '"none"', "rollout.tools": json.dumps(list(r.tools)),
            "rollout.env_kwargs": "{system_prompt = " + json.dumps(SYSTEM_PROMPT) + "}",
            "algorithm.name": '"grpo"', "algorithm.group_size": cfg.group_size, "algorithm.beta": 0.0,
            "algorithm.epochs": 1, "algorithm.loss_aggregation": '"token_mean"', "domains.normalize": "false",
            "algorithm.skip_zero_advantage": json.dumps(cfg.skip_zero_advantage),
            "optim.lr": cfg.lr, "optim.max_grad_norm": 1.0, "optim.steps": cfg.total_steps,
            "optim.tasks_per_step": 1, "optim.micro_batch": cfg.group_size,
            "checkpoint.every": cfg.total_steps, "logging.tensorboard": "false", "logging.sample_trajectories": 0,
            "domains.mix": f'[{{suite = {json.dumps(cfg.tasks_file)}, n_tasks = {cfg.total_steps}}}]',
        }
        config = load_config(None, [f"{k}={v}" for k, v in overrides.items()])
        t = time.perf_counter()
        result = run(config)
        wall = time.perf_counter() - t
        metrics = load_metrics(result.run_dir)
    steps = [{"step_s": m["perf/step_s"], "reward_mean": m["rollout/reward_mean"],
              "success_rate": m["rollout/success_rate"], "turns_mean": m["rollout/turns_mean"],
              "gen_tokens_mean": m["rollout/gen_tokens_mean"],
              "trained_sequences": m["losses/trained_sequences"]} for m in metrics]
    return {"setup_s": wall - sum(s["step_s"] for s in steps), "steps": steps}


# ---- TRL side: GRPOTrainer with sandgym's environment_factory ------------------------------------------------------
def run_trl(cfg: BenchConfig) -> dict[str, Any]:
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from sandgym.interop.trl import SandgymSpec

    torch.set_num_threads(cfg.threads)
    t = time.perf_counter()
    torch.manual_seed(cfg.seed)
    tokenizer = AutoTokenizer.from_pretrained(cfg.model_dir)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(cfg.model_dir, dtype=torch.float32)
    work = Path(tempfile.mkdtemp(prefix="trl_env-"))
    spec = SandgymSpec(cfg.tasks_file, rollout=cfg.rollout(), record=work / "trajectories.jsonl")
    args = GRPOConfig(
        output_dir=str(work / "out"), per_device_train_batch_size=cfg.group_size, gradient_accumulation_steps=1,
        num_generations=cfg.group_size, max_completion_length=cfg.max_turns * cfg.max_new_tokens,
        max_tool_calling_iterations=cfg.max_turns, num_iterations=1, max_steps=cfg.total_steps,
        learning_rate=cfg.lr, lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0,
        beta=0.0, loss_type="dapo", scale_rewards="group", temperature=1.0, top_p=1.0, bf16=False, fp16=False,
        gradient_checkpointing=False, use_vllm=False, use_cpu=True, shuffle_dataset=False, logging_steps=1,
        report_to="none", save_strategy="no", disable_tqdm=True, dataloader_num_workers=0, seed=cfg.seed,
    )
    peft_config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=list(LORA_TARGETS),
                             task_type="CAUSAL_LM")
    trainer = GRPOTrainer(model=model, args=args, train_dataset=spec.train_dataset, processing_class=tokenizer,
                          peft_config=peft_config, environment_factory=spec.environment_factory)
    steps: list[dict[str, float]] = []

    class StepTimer(TrainerCallback):  # type: ignore[misc]
        def on_step_begin(self, *_: Any, **__: Any) -> None:
            self.t = time.perf_counter()

        def on_step_end(self, *_: Any, **__: Any) -> None:
            steps.append({"step_s": time.perf_counter() - self.t})

    trainer.add_callback(StepTimer())
    setup_s = time.perf_counter() - t
    try:
        trainer.train()
    finally:
        spec.close()
    logs = [e for e in trainer.state.log_history if "reward" in e]
    episodes = spec.trajectories()
    g = cfg.group_size
    for i, (s, entry) in enumerate(zip(steps, logs, strict=False)):
        mine = episodes[i * g:(i + 1) * g]
        s["reward_mean"] = float(entry["reward"])
        s["graded_reward_mean"] = sum(e.reward for e in mine) / max(1, len(mine))
        s["success_rate"] = sum(e.success for e in mine) / max(1, len(mine))
        s["turns_mean"] = sum(e.num_turns for e in mine) / max(1, len(mine))
        s["tool_calls_mean"] = float(entry.get("tools/call_frequency", 0.0))
        s["completion_tokens_mean"] = float(entry.get("completions/mean_length", 0.0))
        s["trained_sequences"] = float(g)  # TRL's loss covers every completion
    shutil.rmtree(work, ignore_errors=True)
    return {"setup_s": setup_s, "steps": steps}


# ---- parent ------------------------------------------------------------------------------------------------------
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
        data: dict[str, Any] = json.loads(out.read_text())
        data["process_wall_s"] = time.perf_counter() - t
        return data


def summarise(runs: Sequence[dict[str, Any]], warmup: int) -> dict[str, Any]:
    """One trainer's repeats: the median over its measured steps (of every repeat), each repeat's median step
    time, and the mean reward over the measured steps and over every step."""
    measured = [s for r in runs for s in r["steps"][warmup:]]
    keys = sorted({k for s in measured for k in s})
    return {"median": {k: statistics.median(s[k] for s in measured if k in s) for k in keys},
            "step_s_by_repeat": [statistics.median(s["step_s"] for s in r["steps"][warmup:]) for r in runs],
            "mean_reward_measured": statistics.mean(s["reward_mean"] for s in measured),
            "mean_reward_all": statistics.mean(s["reward_mean"] for r in runs for s in r["steps"]),
            "setup_s": [r["setup_s"] for r in runs], "process_wall_s": [r["process_wall_s"] for r in runs],
            "runs": [r["steps"] for r in runs]}


def report(summary: dict[str, Any]) -> str:
    s, t = summary["sandgym"], summary["trl"]
    rows = [("time per step, s (median of measured steps)", s["median"]["step_s"], t["median"]["step_s"], ".1f"),
            ("mean reward, measured steps", s["mean_reward_measured"], t["mean_reward_measured"], ".3f"),
            ("mean reward, every step", s["mean_reward_all"], t["mean_reward_all"], ".3f"),
            ("success rate (median)", s["median"].get("success_rate"), t["median"].get("success_rate"), ".2f"),
            ("turns per episode (median)", s["median"].get("turns_mean"), t["median"].get("turns_mean"), ".2f"),
            ("sampled tokens per episode (median)", s["median"].get("gen_tokens_mean"),
             t["median"].get("completion_tokens_mean"), ".0f"),
            ("sequences in the learner per step (median)", s["median"].get("trained_sequences"),
             t["median"].get("trained_sequences"), ".0f")]
    lines = ["| | sandgym train loop | TRL GRPOTrainer + sandgym env |", "|---|---:|---:|"]
    lines += [f"| {label} | {format(a, f) if a is not None else '-'} | {format(b, f) if b is not None else '-'} |"
              for label, a, b, f in rows]
    by_repeat = [", ".join(f"{x:.1f}" for x in side["step_s_by_repeat"]) for side in (s, t)]
    lines.append(f"| time per step by repeat, s | {by_repeat[0]} | {by_repeat[1]} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    d = BenchConfig()
    p.add_argument("--model", default=d.model)
    p.add_argument("--suite", default=d.suite)
    p.add_argument("--difficulty", type=int, default=d.difficulty)
    p.add_argument("--tools", default=",".join(d.tools))
    p.add_argument("--max-turns", type=int, default=d.max_turns)
    p.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens)
    p.add_argument("--group-size", type=int, default=d.group_size)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--warmup", type=int, default=d.warmup, help="steps run before measuring")
    p.add_argument("--steps", type=int, default=d.steps, help="measured steps")
    p.add_argument("--threads", type=int, default=d.threads)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--learn-every-sample", action="store_true",
                   help="sandgym: train on zero-advantage samples too, as TRL does (algorithm.skip_zero_advantage)")
    p.add_argument("--only", choices=("all", "sandgym", "trl"), default="all")
    p.add_argument("--repeats", type=int, default=2, help="each trainer this many times, in alternating order")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per child process")
    p.add_argument("--out", type=Path, default=None, help="write the JSON summary here")
    p.add_argument("--child", choices=("sandgym", "trl"), help=argparse.SUPPRESS)
    p.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--config-json", help=argparse.SUPPRESS)
    a = p.parse_args(argv)

    if a.child:
        raw = json.loads(a.config_json)
        cfg = BenchConfig(**{**raw, "tools": tuple(raw["tools"])})
        a.child_out.write_text(json.dumps({"sandgym": run_sandgym, "trl": run_trl}[a.child](cfg)))
        return 0

    cfg = BenchConfig(model=a.model, suite=a.suite, difficulty=a.difficulty, tools=tuple(a.tools.split(",")),
                      max_turns=a.max_turns, max_new_tokens=a.max_new_tokens, group_size=a.group_size, lr=a.lr,
                      warmup=a.warmup, steps=a.steps, threads=a.threads, seed=a.seed,
                      skip_zero_advantage=not a.learn_every_sample)
    print(load_line("start") + f"; {cfg.warmup} warm-up + {cfg.steps} measured steps per trainer", flush=True)
    summary: dict[str, Any] = {"load_average": os.getloadavg()}
    with tempfile.TemporaryDirectory() as work:
        cfg = prepare(cfg, Path(work))
        summary["config"] = {k: v for k, v in asdict(cfg).items() if k not in ("model_dir", "tasks_file")}
        summary["tasks"] = [json.loads(line)["id"] for line in Path(cfg.tasks_file).read_text().splitlines()]
        sides = [w for w in ("sandgym", "trl") if a.only in ("all", w)]
        runs: dict[str, list[dict[str, Any]]] = {w: [] for w in sides}
        for r in range(a.repeats):
            for which in sides if r % 2 == 0 else sides[::-1]:  # each trainer sees the same load drift
                print(f"repeat {r + 1}/{a.repeats}: running {which} ...", flush=True)
                runs[which].append(_child(which, cfg, a.timeout))
                steps = runs[which][-1]["steps"]
                print(f"  {which}: {spread([x['step_s'] for x in steps[cfg.warmup:]], '.1f')} s/step, mean reward "
                      f"{statistics.mean(x['reward_mean'] for x in steps):.3f}; {load_line('now')}", flush=True)
        for which in sides:
            summary[which] = summarise(runs[which], cfg.warmup)
    summary["load_average_end"] = os.getloadavg()
    print(load_line("end"))
    if "sandgym" in summary and "trl" in summary:
        print()
        print(report(summary))
    if a.out is not None:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(summary, indent=2))
        print(f"\nwrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
