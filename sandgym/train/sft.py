"""``sandgym sft``: a warm start that trains the same LoRA adapter on demonstrations (loss on assistant tokens).

Demonstrations come from the scripted oracle on the train split of the configured domains (it solves each task
through the tools, in the exact tool-call format the environment parses), from a JSONL file of chat
transcripts (``{"messages": [{"role": ..., "content": ...}, ...]}`` per line), from user feedback imported by
``sandgym feedback import`` (reward-weighted, see :mod:`sandgym.train.feedback_sft`), or from the policy's own
episodes continued by the oracle (DAgger-style, see :mod:`sandgym.train.relabel`); ``source_kind`` tells them apart. The loss is the per-token weighted cross-entropy (weights: the samples' 4th field, 1 on demonstrations).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch

from sandgym.agents.policy import ScriptedPolicy
from sandgym.agents.scripted import OracleAgent
from sandgym.agents.trajectory import Trajectory, save_jsonl
from sandgym.errors import ConfigError
from sandgym.train import components
from sandgym.train.config import TrainConfig
from sandgym.train.feedback_sft import feedback_to_samples, source_kind
from sandgym.train.relabel import relabelled_samples
from sandgym.train.shared_prefix import checkpointing_on, freed_memory_returned
from sandgym.train.step import Sample, collate, forward_logprobs, micro_batches


@dataclass(frozen=True)
class SFTResult:
    adapter_dir: Path
    demonstrations: int
    losses: tuple[float, ...]
    by_outcome: Mapping[str, int] = field(default_factory=dict)
    """Feedback source: records trained on, by outcome (empty for oracle and transcripts)."""
    skipped: Mapping[str, int] = field(default_factory=dict)
    """Feedback source: records that teach nothing (rejected, no correction, weight <= 0), by outcome."""


def initial_adapter(config: TrainConfig, run_dir: Path, *, check: Callable[[Any], None] | None = None) -> str | None:
    """The adapter RL starts from: ``model.adapter``, or a fresh SFT warm start when ``init = "sft"``. ``check``
    is called with the policy before the warm start trains (the RL run's prompt-length check), so bad input fails
    before any training time is spent."""
    if config.model.adapter:
        return config.model.adapter
    if config.init == "sft":
        out = run_dir / "sft"
        if (out / "adapter" / "adapter_config.json").is_file():  # a resumed run reuses its warm start
            return str(out / "adapter")
        policy = None
        if check is not None:
            source_kind(config.sft.source)  # a bad source fails before the model loads
            torch.manual_seed(config.seed)  # the adapter's LoRA init, as run_sft seeds it
            policy = components.build_policy(config, adapter=config.model.adapter, trainable=True)
            check(policy)
        return str(run_sft(config, out, policy=policy).adapter_dir)
    return None


def run_sft(config: TrainConfig, out_dir: Path | str, *, policy: Any = None) -> SFTResult:
    """Train the adapter on demonstrations; saves it to ``out_dir/adapter`` and returns the result."""
    kind = source_kind(config.sft.source)  # a bad source fails before the model loads
    if kind == "episodes" and any(d.rollout for d in config.domains.mix):
        raise ConfigError(f"sft.source={config.sft.source!r}: relabelling the policy's episodes replays them in "
                          "[rollout]; with [domains.mix.rollout] tables warm-start from the oracle or transcripts")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(config.seed)  # the new adapter's LoRA init (as the RL loop seeds its own): a function of seed
    policy = policy or components.build_policy(config, adapter=config.model.adapter, trainable=True)
    used: Mapping[str, int] = {}
    skipped: Mapping[str, int] = {}
    if kind == "feedback":
        fb = feedback_to_samples(Path(config.sft.source), policy.chat_format,
                                 config.rollout.env_kwargs.get("system_prompt"))
        samples, used, skipped = list(fb.samples), fb.used, fb.skipped
        if not samples:
            raise ConfigError(f"sft.source={config.sft.source!r} has no record to learn from (skipped by outcome: "
                              f"{dict(skipped)}); it needs accepted records, or edited ones with edited_output, "
                              "whose reward is > 0")
    elif kind == "episodes":
        samples = relabelled_samples(config, policy.tokenizer, out)
    else:
        samples = demonstrations(config, policy, out)
    if not samples:
        raise ConfigError(f"sft.source={config.sft.source!r} produced no demonstrations; check the domains")
    if used:
        (out / "feedback_samples.json").write_text(json.dumps({"trained": used, "skipped": skipped}), encoding="utf-8")
    losses = train_on_samples(policy.model, samples, config, pad_id=int(policy.tokenizer.pad_token_id))
    (out / "sft_losses.json").write_text(json.dumps(losses), encoding="utf-8")
    adapter_dir = policy.save_adapter(out / "adapter")
    return SFTResult(adapter_dir=adapter_dir, demonstrations=len(samples), losses=tuple(losses),
                     by_outcome=dict(used), skipped=dict(skipped))


def demonstrations(config: TrainConfig, policy: Any, out: Path) -> list[Sample]:
    """Oracle demonstrations or chat transcripts (``sft.source``), each token of a demonstrated turn weighted 1."""
    if config.sft.source == "oracle":
        trajs = oracle_trajectories(config, policy.tokenizer)
        save_jsonl(trajs, out / "demonstrations.jsonl")
        samples = []
        for t in trajs:
            if t.success and t.has_tokens and teaches(t):
                mask = demonstrated_mask(t)
                samples.append(Sample(t.token_ids, mask, t.logprobs, tuple(float(m) for m in mask)))
        return samples
    return transcripts_to_samples(Path(config.sft.source), policy.chat_format)


def oracle_trajectories(config: TrainConfig, tokenizer: Any) -> list[Trajectory]:
    """Run the oracle on train-split tasks of the configured domains, recording exact token sequences."""
    from sandgym.agents.rollout import RolloutConfig, rollout

    tasks = [t for ts in components.domain_tasks(config).values() for t in ts]
    rng = random.Random(config.seed)
    rng.shuffle(tasks)
    envs = components.DomainRollouts(config)
    share = Counter(envs.key(t) for t in tasks[: config.sft.episodes])
    out: list[Trajectory] = []
    for key, n in share.items():  # each domain with its own [domains.mix.rollout] in it; the rest in [rollout]
        spec = envs.specs[key]
        style = config.sft.style(spec.code_action)
        mine = [t for t in tasks if envs.key(t) == key]
        # test-and-fix: a planted bug fails the visible tests only sometimes, so draw from 3x the tasks and balance
        mine = mine[: n * (3 if style == "fix" else 1)]
        policy = ScriptedPolicy(partial(OracleAgent, style=style, compute=config.sft.compute), tokenizer=tokenizer)
        rc = RolloutConfig(max_new_tokens=4096, max_turns=spec.max_turns + 4, max_total_tokens=16384, seed=config.seed)
        trajs = components.named_by_domain(rollout(policy, spec.env_factory(), mine, group_size=1, config=rc), mine)
        out += balanced_fix_demos(trajs, n) if style == "fix" else trajs
    return out


def balanced_fix_demos(trajs: Sequence[Trajectory], n: int) -> list[Trajectory]:
    """``n`` test-and-fix demonstrations, half of them a fix (the first run failed) when there are enough: with
    few fixes among them, the warm start learns to submit after any first run, passing or not."""
    fixes: list[Trajectory] = []
    direct: list[Trajectory] = []
    for t in trajs:
        if t.success and teaches(t):
            fixed = t.outcome is not None and t.outcome.actions.first_test_passed is False
            (fixes if fixed else direct).append(t)
    k = min(len(fixes), n // 2)
    picked = fixes[:k] + direct[: n - k]
    return picked + fixes[k : k + n - len(picked)]  # too few direct ones: more fixes fill the rest


def teaches(t: Trajectory) -> bool:
    """A test-and-fix demonstration teaches the loop only when its test runs read pass (one block) or fail then
    pass (a bug, then the fix); a planted bug the visible tests missed would teach rewriting passing code."""
    a = t.outcome.actions if t.outcome is not None else None
    if a is None or a.test_runs < 2:
        return True
    return a.first_test_passed is False


def demonstrated_mask(t: Trajectory) -> tuple[int, ...]:
    """The tokens to learn from: every assistant token, except the planted bug of a test-and-fix demonstration (its
    first turn, whose visible tests failed), which stays in the context but is never a target: the warm start
    teaches reading a failure and fixing it, not writing the bug."""
    a = t.outcome.actions if t.outcome is not None else None
    mask = list(t.action_mask)
    if a is not None and a.first_test_passed is False:
        i = mask.index(1) if 1 in mask else len(mask)
        while i < len(mask) and mask[i] == 1:
            mask[i] = 0
            i += 1
    return tuple(mask)


def transcripts_to_samples(path: Path, chat_format: Any) -> list[Sample]:
    """Chat transcripts -> samples whose mask covers assistant tokens only."""
    if not path.is_file():
        raise ConfigError(f"sft.source={str(path)!r} is neither 'oracle' nor an existing JSONL file of transcripts")
    samples = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            messages = json.loads(line)["messages"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ConfigError(f"{path}:{lineno}: expected {{\"messages\": [...]}} ({e}); fix or remove the line") from e
        ids: list[int] = []
        mask: list[int] = []
        for k, msg in enumerate(messages):
            if msg.get("role") == "assistant":
                prefix = chat_format.prompt_ids(messages[:k]) if not ids else []
                ids += prefix
                mask += [0] * len(prefix)
                body = chat_format.completion_ids(msg["content"])
                ids += body
                mask += [1] * len(body)
                rest = chat_format.delta_ids(messages[: k + 1], messages[k + 1 :]) if k + 1 < len(messages) else []
                ids += rest
                mask += [0] * len(rest)
        if sum(mask):
            samples.append(Sample(tuple(ids), tuple(mask), (0.0,) * len(ids), tuple(float(m) for m in mask)))
    return samples


def train_on_samples(model: torch.nn.Module, samples: Sequence[Sample], config: TrainConfig, *, pad_id: int) -> list[float]:
    """Weighted cross-entropy on masked (assistant) tokens: ``-sum(w * log p) / (masked tokens)``, ``w`` the
    samples' per-token weights (1 on demonstrations, a feedback record's reward); returns each epoch's mean loss."""
    progress = components.progress

    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=config.sft.lr)
    model.train()
    losses = []
    batches = list(micro_batches(samples, config.sft.micro_batch))
    bar = progress(total=config.sft.epochs * len(batches), desc="sft")
    rng = random.Random(config.seed)
    with freed_memory_returned(checkpointing_on(model)):  # as learner_update: only while it trains
        for _ in range(config.sft.epochs):
            rng.shuffle(batches)
            total, count = 0.0, 0
            for mb in batches:
                batch = collate(mb, pad_id)
                logp = forward_logprobs(model, batch, 1.0)
                loss = -(logp * batch.advantages * batch.mask).sum() / batch.mask.sum().clamp(min=1.0)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, config.optim.max_grad_norm)
                opt.step()
                total += float(loss.detach())
                count += 1
                bar.update(1)
                bar.set_postfix(loss=f"{float(loss.detach()):.3f}")
            losses.append(total / max(count, 1))
    bar.close()
    return losses
