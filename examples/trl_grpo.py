"""Train with TRL's GRPOTrainer on a sandgym suite: sandgym's tools act in its sandbox, sandgym's grader rewards.

    python examples/trl_grpo.py                                   # CPU, the embedded SmolLM2-135M, 2 steps
    python examples/trl_grpo.py --model Qwen/Qwen2.5-0.5B-Instruct --suite coding:train --steps 50
    accelerate launch examples/trl_grpo.py --model ... --bf16 --use-vllm --vllm-mode colocate

The suite's tasks become TRL's dataset (the env's system prompt and the task); each rollout is one sandgym episode
(``sandgym.interop.trl``): the model calls the env's tools (``--tools``), ``get_reward`` is sandgym's reward for
the graded episode, and every graded episode is appended to ``OUT/trajectories.jsonl`` in sandgym's trajectory
format (``sandgym.agents.trajectory.load_jsonl`` reads it). docs/INTEROP.md, "TRL", says what is tested where.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
SYSTEM_PROMPT = ("You are a software engineer. Write the solution file with write_file, check it with run_tests, "
                 "then call submit.")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m", help="the embedded smollm2-135m, a local checkpoint directory "
                   "or a Hugging Face id (fetched by transformers when it is not in the local cache)")
    p.add_argument("--suite", default="coding/strings:train", help="a sandgym suite spec, tasks .jsonl or folder")
    p.add_argument("--n-tasks", type=int, default=8, help="tasks taken from a generated suite")
    p.add_argument("--difficulty", type=int, default=1, help="difficulty of generated tasks (0: mixed)")
    p.add_argument("--tools", default="write_file,run_tests,submit", help="comma-separated sandgym tools offered")
    p.add_argument("--max-turns", type=int, default=3, help="turns (tool calls) per episode, the env's budget")
    p.add_argument("--system-prompt", default=SYSTEM_PROMPT, help="the env's system prompt ('' for sandgym's own)")
    p.add_argument("--sandbox", default="local", help="sandgym sandbox backend: local, e2b, auto")
    p.add_argument("--steps", type=int, default=2, help="optimizer steps")
    p.add_argument("--group-size", type=int, default=4, help="completions per prompt (TRL's num_generations)")
    p.add_argument("--prompts-per-step", type=int, default=1, help="prompts per device per step")
    p.add_argument("--max-completion-length", type=int, default=128,
                   help="tokens per rollout: the model's turns and the tools' replies together")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--beta", type=float, default=0.0, help="KL coefficient against the reference model")
    p.add_argument("--lora-r", type=int, default=16, help="LoRA rank (0: train every weight)")
    p.add_argument("--bf16", action="store_true", help="bfloat16 weights and training (GPUs)")
    p.add_argument("--gradient-checkpointing", action="store_true",
                   help="recompute activations in the backward pass (less memory; generation then runs without a "
                        "KV cache, far slower on CPU)")
    p.add_argument("--use-vllm", action="store_true", help="generate with vLLM (GPUs; needs vllm installed)")
    p.add_argument("--vllm-mode", choices=("colocate", "server"), default="colocate",
                   help="vLLM in the training processes, or a `trl vllm-serve` server")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("runs/trl_grpo"), help="output directory")
    return p.parse_args(argv)


def model_path(name: str) -> str:
    """A local directory for the embedded model or a cached one; other names go to transformers as they are."""
    from sandgym.agents.models import is_embedded, resolve_model
    from sandgym.errors import ModelNotAvailableError

    try:
        return str(resolve_model(name))
    except ModelNotAvailableError:
        if is_embedded(name) or Path(name).expanduser().exists():
            raise
        return name


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from peft import LoraConfig
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from sandgym.interop.trl import SandgymSpec, tool_calling_tokenizer
    from sandgym.rollout.spec import RolloutSpec

    path = model_path(a.model)
    env_kwargs = {"system_prompt": a.system_prompt} if a.system_prompt else {}
    rollout = RolloutSpec(code_action="none", tools=tuple(t for t in a.tools.split(",") if t), max_turns=a.max_turns,
                          sandbox=a.sandbox, env_kwargs=env_kwargs)
    spec = SandgymSpec(a.suite, rollout=rollout, n=a.n_tasks, seed=a.seed, difficulty=a.difficulty or None,
                       record=a.out / "trajectories.jsonl")
    tokenizer = tool_calling_tokenizer(AutoTokenizer.from_pretrained(path))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    args = GRPOConfig(
        output_dir=str(a.out),
        per_device_train_batch_size=a.group_size * a.prompts_per_step,
        num_generations=a.group_size,
        max_completion_length=a.max_completion_length,
        max_tool_calling_iterations=a.max_turns,
        max_steps=a.steps,
        learning_rate=a.lr,
        beta=a.beta,
        temperature=1.0,
        bf16=a.bf16,
        gradient_checkpointing=a.gradient_checkpointing,
        model_init_kwargs={"dtype": torch.bfloat16 if a.bf16 else torch.float32},
        use_cpu=not torch.cuda.is_available(),
        use_vllm=a.use_vllm,
        vllm_mode=a.vllm_mode,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=a.seed,
    )
    peft_config = (LoraConfig(r=a.lora_r, lora_alpha=2 * a.lora_r, lora_dropout=0.0, target_modules=LORA_TARGETS,
                              task_type="CAUSAL_LM") if a.lora_r > 0 else None)
    trainer = GRPOTrainer(model=path, args=args, processing_class=tokenizer, peft_config=peft_config,
                          train_dataset=spec.train_dataset, environment_factory=spec.environment_factory)
    try:
        trainer.train()
    finally:
        spec.close()
    trainer.save_model(str(a.out / "final"))
    if trainer.is_world_process_zero():
        for entry in trainer.state.log_history:
            if "reward" in entry:
                print(f"step {entry['step']}: reward {entry['reward']:.3f}, tool calls per rollout "
                      f"{entry.get('tools/call_frequency', 0.0):.2f}")
        episodes = spec.trajectories()
        mean = sum(t.reward for t in episodes) / len(episodes) if episodes else float("nan")
        print(f"{len(episodes)} graded episodes (mean reward {mean:.3f}) in {spec.record}; "
              f"model in {a.out / 'final'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
