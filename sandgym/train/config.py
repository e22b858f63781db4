"""The one config of ``sandgym train`` / ``sandgym sft``: TOML file + ``--set`` overrides, validated up front."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sandgym.configs import from_dict, load_dataclass, to_dict
from sandgym.errors import ConfigError
from sandgym.rollout.spec import RolloutSpec
from sandgym.train.trackers import TRACKERS

# Copies of sandgym.train.advantages.ADVANTAGE_ESTIMATORS and sandgym.train.loss.LOSS_AGGREGATIONS (a test keeps
# them equal): importing those modules imports torch, and config errors must be reported before torch loads.
ADVANTAGE_ESTIMATORS = ("grpo", "dr_grpo", "rloo")
LOSS_AGGREGATIONS = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm")


@dataclass(frozen=True)
class ModelConfig:
    """The policy: a base causal LM with a trainable LoRA adapter (section ``[model]``). Device and dtype are not
    keys: CUDA in bfloat16 when a GPU is present, else the CPU in float32."""

    name: str = "smollm2-135m"
    """Embedded name, Hugging Face id (available offline) or local directory."""
    adapter: str | None = None
    """Start from this PEFT adapter directory (e.g. an SFT warm start) instead of a fresh LoRA."""
    lora_r: int = 16
    """LoRA rank of a fresh adapter (ignored when ``adapter`` is given: the adapter keeps its own)."""
    lora_alpha: int = 32
    """LoRA scaling numerator: the update is scaled by lora_alpha / lora_r."""
    lora_dropout: float = 0.0
    """Dropout on the LoRA branch's input during training (0 to 1)."""
    target_modules: tuple[str, ...] = ()
    """Empty: sensible defaults for the architecture (all attention and MLP projections)."""
    inference: str = ""
    """``http://HOST:PORT`` of a vLLM-compatible server (``vllm serve --enable-lora``, ``sandgym serve-model``)
    serving this same base model: rollouts are generated there, the learner stays here, and every step's adapter is
    hot-loaded under a versioned name (docs/SCALING.md). Empty: generate in this process."""
    generation_weights: Literal["float", "int8"] = "float"
    """Weights of the in-process generation copy: "float" (the model's dtype, the adapter merged in) or "int8"
    (dynamic int8 with the adapter applied live: 1.7-1.8x faster decoding on CPU, but off-policy: on SmolLM2-135M
    ``losses/tis_mean`` is ~0.8 and RL did not learn with it, docs/BENCHMARKS.md; the loop warns below 0.9). CPU
    only."""
    inference_adapter_dir: str = ""
    """Where published adapters are written for the server to load; it must see the same path (default
    ``RUN_DIR/served_adapters``)."""


@dataclass(frozen=True)
class AlgorithmConfig:
    """The RL objective (section ``[algorithm]``): a GRPO-family clipped policy gradient on group advantages."""

    name: Literal["grpo", "dr_grpo", "rloo"] = "grpo"
    """Advantage estimator: grpo (divide by group std), dr_grpo (no std division), rloo (leave-one-out)."""
    group_size: int = 4
    """Samples per task (G)."""
    beta: float = 0.0
    """KL coefficient to the adapter-disabled reference; 0 skips the reference pass entirely."""
    clip_low: float = 0.2
    """The probability ratio is clipped below at 1 - clip_low."""
    clip_high: float = 0.28
    """The probability ratio is clipped above at 1 + clip_high (above clip_low: "clip-higher", as in DAPO)."""
    epochs: int = 1
    """Optimiser passes over each batch (>1 makes the clipped ratio matter)."""
    tis_cap: float = 2.0
    """Cap of the truncated importance weight correcting generator/trainer log-prob mismatch."""
    loss_aggregation: Literal["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"] = "token_mean"
    """How per-token losses become one: "token_mean" (over every sampled token of the batch, DAPO),
    "seq_mean_token_mean" (per sequence, then over sequences: the original GRPO, biased towards short answers) or
    "seq_mean_token_sum_norm" (each sequence's sum divided by rollout.max_total_tokens: Dr. GRPO)."""
    advantage_mode: Literal["trajectory", "per_step"] = "trajectory"
    """trajectory: every sampled token gets its trajectory's advantage (outcome reward). per_step: each turn's
    tokens get the advantage of the return from that turn on (turn rewards from checkable intermediate states),
    normalised within the group. Use per_step for long multi-turn tasks whose intermediate states can be checked;
    otherwise trajectory (with only a final reward the two give every turn of a trajectory similar credit). The
    long-context recipes use per_step with ``rollout.env_kwargs`` turn_rewards (``examples/joint_json_tracking.toml``)."""
    skip_zero_advantage: bool = True
    """Do not spend forward/backward passes on groups whose rewards are all equal (exact when beta = 0)."""
    gradient_conflict: Literal["off", "measure", "pcgrad"] = "off"
    """With 2+ domains in a step: "measure" computes each domain's gradient apart (same passes, one extra copy of
    the LoRA gradient per domain) and logs their cosine (``losses/grad_cosine``, ``losses/grad_cosine_min``);
    "pcgrad" also projects each domain's gradient off those it conflicts with before summing
    (``losses/pcgrad_projections``). Single-process training only (a data-parallel learner skips it). For joint
    runs (``examples/joint.toml``, ``examples/joint_json_tracking.toml``)."""


@dataclass(frozen=True)
class DomainConfig:
    """One entry of the training mix (an array of tables ``[[domains.mix]]``): a suite, its weight and, for a joint
    run whose domains need different budgets or tools, its own rollout keys."""

    suite: str
    """A suite spec, e.g. "coding/strings:train" or a task file."""
    name: str = ""
    """Name used for normalisation and logging (default: the suite's domain)."""
    weight: float = 1.0
    """Relative share of each step's tasks drawn from this domain (>= 0; see domains.weighting)."""
    difficulty: int | None = None
    """Difficulty of a generated suite's tasks, 1 (very easy) to 4; unset mixes the levels."""
    n_tasks: int = 64
    """How many tasks to generate from the suite (generated suites are infinite)."""
    rollout: dict[str, Any] = field(default_factory=dict)
    """This domain's own rollout keys (``[domains.mix.rollout]``), each replacing ``[rollout]``'s value for its
    tasks: budgets (max_new_tokens, max_turns, max_total_tokens, truncated_turn), the code action, tools, env and
    env_kwargs (replaced whole, not merged). E.g. JSON coding episodes with 160 tokens a turn and
    ``require_submit`` beside long-context ones with 96 tokens, six turns and a per-turn evidence term. Sampling
    (temperature, top_p) stays one for the run: the learner scores every sequence at it. Every entry of one
    domain name must give the same table (the domain's tasks share one rollout). For joint runs
    (``examples/joint_json_tracking.toml``)."""


@dataclass(frozen=True)
class DomainsConfig:
    """What to train on (section ``[domains]``): the mix of suites and how it is weighted and normalised."""

    mix: tuple[DomainConfig, ...] = (DomainConfig(suite="coding:train"),)
    """The domains, one ``[[domains.mix]]`` table each (keys below)."""
    weighting: Literal["fixed", "linear", "adaptive"] = "fixed"
    """fixed: config weights; linear: from the weights to uniform over the run; adaptive: favour domains whose
    success rate is away from 0 and 1 (where groups have reward variance, so the gradient is informative)."""
    normalize: bool = True
    """Normalise rewards per domain with running mean/std before group advantages."""


@dataclass(frozen=True)
class OptimConfig:
    """The RL optimiser and the run's length (section ``[optim]``): AdamW on the LoRA parameters."""

    lr: float = 5e-5
    """AdamW learning rate, in (0, 1)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float = 1.0
    """Gradients are clipped to this global norm before each optimiser step."""
    steps: int = 20
    """RL steps (each: roll out, compute advantages, update)."""
    tasks_per_step: int = 8
    """Tasks drawn per step; each is rolled out algorithm.group_size times."""
    micro_batch: int = 4
    """Sequences per forward/backward pass (gradients accumulate over a step's micro-batches)."""
    warmup_steps: int = 0
    """Steps of linear learning-rate warm-up from 0 (constant after)."""
    loss_explode: float = 1e4
    """Stop (keeping the last good checkpoint) when |loss| exceeds this or is NaN."""
    activation_checkpointing: bool = False
    """Keep only each decoder layer's input during the learner's (and SFT's) forward pass and recompute the rest in
    the backward pass: memory grows with tokens x hidden size, not with every activation (long documents), for
    about a third more learner time. Exact: same gradients, shared-prefix pass included."""


@dataclass(frozen=True)
class CheckpointConfig:
    """Checkpoints (section ``[checkpoint]``): ``RUN_DIR/checkpoints/step-N/`` with the adapter, optimiser and RNG
    state; ``sandgym train --resume RUN_DIR`` continues from the latest."""

    every: int = 5
    """Save every this many steps (and after the last)."""
    keep_last: int = 3
    """Checkpoints kept; older ones are deleted."""


@dataclass(frozen=True)
class LoggingConfig:
    """What a run logs besides ``RUN_DIR/metrics.jsonl`` (section ``[logging]``)."""

    tensorboard: bool = True
    """Write TensorBoard events to ``RUN_DIR/tb``."""
    sample_trajectories: int = 4
    """Trajectories written per step to trajectories.jsonl for inspection."""
    trackers: tuple[str, ...] = ()
    """Experiment trackers besides TensorBoard: "trackio" (local-first) and/or "wandb" (WANDB_MODE=offline works
    without a network); see sandgym/train/trackers.py."""
    project: str = "sandgym"
    """The trackers' project name."""

    def __post_init__(self) -> None:
        unknown = [t for t in self.trackers if t not in TRACKERS]
        if unknown:
            raise ConfigError(f"logging.trackers={list(self.trackers)}: unknown {unknown}; choose from {TRACKERS}")


@dataclass(frozen=True)
class SFTConfig:
    """The supervised warm start (section ``[sft]``): run by ``sandgym sft``, and by ``sandgym train`` before RL
    when ``init = "sft"``; the adapter goes to ``OUT_DIR/sft/adapter``."""

    source: str = "oracle"
    """"oracle" (scripted oracle on the train domains), a JSONL of chat transcripts, or user feedback imported by
    ``sandgym feedback import`` (reward-weighted SFT: accepted outputs and users' edits, weighted by their reward;
    ``sandgym.train.feedback_sft``), or the policy's own episodes on the domains' train tasks (``sandgym eval``'s
    ``episodes.jsonl``), each state of them labelled by the oracle and continued from the last (DAgger-style,
    see ``relabel``; ``sandgym.train.relabel``; start from the policy with ``model.adapter``).
    A file's kind is read from its first record."""
    oracle_style: Literal["auto", "tools", "code", "fix"] = "auto"
    """Demonstration format: "tools" (multi-turn tool calls), "code" (one fenced python block, for single-file
    coding tasks), "fix" (test-and-fix: for half the tasks a block with one bug, its failing test run, the fixed
    block, then SUBMIT), "auto" (code when ``rollout.code_action = "submit"``, fix when "test", else tools)."""
    relabel: Literal["all_states", "last_state"] = "all_states"
    """With ``source`` = the policy's episodes: "all_states" labels every state the policy visited with the oracle's
    turn (the policy's turns that agree are trained, each one that does not gets a demonstration of the oracle's
    turn in its place, and the oracle continues from the last state); "last_state" trains only the continuation
    from the state the episode reached before its last turn."""
    compute: Literal["expression", "program"] = "expression"
    """When the env offers the ``python`` tool, how the oracle works out an answer that is arithmetic over many
    document lines (long-context tracking and aggregation) before submitting it: "expression" copies the numbers
    its search showed into one print (``print(10 - 5 + 7)``: the longer the document, the more terms to copy);
    "program" runs a loop over the document file that applies each of the variable's lines (or sums the region's
    paid amounts), the same code at every length with only the file's path and the question's name changed.
    Without ``python`` among ``rollout.tools`` neither is used. Used by the long-context recipes
    (``examples/long_context_program.toml``, ``examples/joint_json_tracking.toml``)."""
    episodes: int = 64
    """Oracle demonstrations to record (with ``source = "oracle"``), drawn across the domains' train tasks."""
    epochs: int = 2
    """Passes over the demonstrations."""
    lr: float = 2e-4
    """AdamW learning rate of the warm start."""
    micro_batch: int = 4
    """Sequences per forward/backward pass."""

    def style(self, code_action: str) -> str:
        """The oracle's demonstration format for an env with ``code_action`` (``oracle_style``, "auto" resolved)."""
        if self.oracle_style != "auto":
            return self.oracle_style
        return {"submit": "code", "test": "fix"}.get(code_action, "tools")


@dataclass(frozen=True)
class EvalDuringTraining:
    """Periodic held-out evaluation of the live policy (section ``[eval]``); writes ``RUN_DIR/eval_curve.jsonl``."""

    every: int = 0
    """Evaluate every this many steps (and before the first, after the last); 0 turns periodic evaluation off."""
    suites: tuple[str, ...] = ()
    """Held-out suites (empty: each training suite's ``:heldout`` split). The same fixed tasks at every step."""
    n_tasks: int = 8
    """Tasks drawn from each generated suite."""
    samples: int = 2
    """Samples per task."""
    task_seed: int = 1
    """Seed that picks the tasks of a generated held-out suite."""
    temperature: float = 0.7
    """Sampling temperature of the evaluation episodes (> 0)."""


@dataclass(frozen=True)
class DistributedConfig:
    """Scale-out on Ray (see docs/SCALING.md); the default ``local`` backend is the single-process loop."""

    backend: Literal["local", "ray"] = "local"
    """"local": one process, no Ray needed. "ray": rollout workers as Ray actors."""
    address: str = ""
    """Ray cluster to join ("auto", "ray://host:10001"); empty starts a local Ray instance."""
    num_workers: int = 2
    """Rollout worker actors, each with its own policy copy and environments."""
    async_mode: bool = False
    """Workers keep generating with the newest weights they have while the learner trains."""
    max_staleness: int = 1
    """Async mode: the most learner updates a trajectory's policy may lag behind (older ones are regenerated)."""
    learner_processes: int = 1
    """Data-parallel learner ranks (torch.distributed, gloo); 1 trains in the driver."""


@dataclass(frozen=True)
class TrainConfig:
    """Everything one training run needs. Load with :func:`load_config`."""

    out_dir: str = "runs/train"
    """The run directory: config.toml, metrics.jsonl, trajectories.jsonl, checkpoints/, tb/ (and sft/ for the warm
    start)."""
    seed: int = 0
    """Seeds the LoRA initialisation, task generation and order, and sampling."""
    init: Literal["base", "sft"] = "base"
    """"sft": run the SFT warm start (section [sft]) before RL."""
    model: ModelConfig = field(default_factory=ModelConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    rollout: RolloutSpec = field(default_factory=RolloutSpec)
    """How episodes are rolled out (the one :class:`~sandgym.rollout.spec.RolloutSpec`, validated there)."""
    domains: DomainsConfig = field(default_factory=DomainsConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    eval: EvalDuringTraining = field(default_factory=EvalDuringTraining)

    def __post_init__(self) -> None:
        validate(self)


def validate(c: TrainConfig) -> None:
    """Invariants checked before any work starts; each error names the key, the value and the fix."""

    def bad(key: str, value: object, fix: str) -> ConfigError:
        return ConfigError(f"{key}={value!r}: {fix}")

    if c.algorithm.name not in ADVANTAGE_ESTIMATORS:
        raise bad("algorithm.name", c.algorithm.name, f"use one of {ADVANTAGE_ESTIMATORS}")
    if c.algorithm.loss_aggregation not in LOSS_AGGREGATIONS:
        raise bad("algorithm.loss_aggregation", c.algorithm.loss_aggregation, f"use one of {LOSS_AGGREGATIONS}")
    if c.algorithm.group_size < 2:
        raise bad("algorithm.group_size", c.algorithm.group_size, "group advantages need at least 2 samples")
    if c.algorithm.beta < 0:
        raise bad("algorithm.beta", c.algorithm.beta, "the KL coefficient must be >= 0 (0 disables it)")
    if c.algorithm.epochs < 1:
        raise bad("algorithm.epochs", c.algorithm.epochs, "use at least 1 optimiser pass per batch")
    if not 0 < c.optim.lr < 1:
        raise bad("optim.lr", c.optim.lr, "use a learning rate in (0, 1), e.g. 5e-5")
    for key in ("steps", "tasks_per_step", "micro_batch"):
        if getattr(c.optim, key) < 1:
            raise bad(f"optim.{key}", getattr(c.optim, key), "must be >= 1")
    if not c.domains.mix:
        raise bad("domains.mix", c.domains.mix, "list at least one [[domains.mix]] with a suite")
    for i, d in enumerate(c.domains.mix):
        if d.weight < 0:
            raise bad(f"domains.mix[{i}].weight", d.weight, "weights must be >= 0")
    if sum(d.weight for d in c.domains.mix) <= 0:
        raise bad("domains.mix.weight", [d.weight for d in c.domains.mix], "at least one weight must be > 0")
    _validate_domain_rollouts(c, bad)
    if c.checkpoint.every < 1 or c.checkpoint.keep_last < 1:
        raise bad("checkpoint", (c.checkpoint.every, c.checkpoint.keep_last), "every and keep_last must be >= 1")
    _validate_distributed(c.distributed, bad)
    if c.model.inference and not c.model.inference.startswith(("http://", "https://")):
        raise bad("model.inference", c.model.inference, 'use the server\'s address, e.g. "http://127.0.0.1:8000"')
    if c.model.inference and c.distributed.backend != "local":
        raise bad("model.inference", c.model.inference, 'generation on a server needs distributed.backend = "local"')
    if c.eval.every < 0 or c.eval.n_tasks < 1 or c.eval.samples < 1 or c.eval.temperature <= 0:
        raise bad("eval", (c.eval.every, c.eval.n_tasks, c.eval.samples, c.eval.temperature),
                  "every >= 0 (0: off), n_tasks >= 1, samples >= 1 and temperature > 0")


DOMAIN_ROLLOUT_KEYS = ("max_new_tokens", "max_turns", "max_total_tokens", "truncated_turn", "code_action", "tools",
                       "env", "env_kwargs", "sandbox")
"""The ``[rollout]`` keys a domain may set for its own tasks (``[domains.mix.rollout]``)."""


def domain_name(d: DomainConfig) -> str:
    """The domain's name for normalisation, logging and its rollout: ``name``, else the suite's domain."""
    return d.name or d.suite.split(":")[0].split("/")[0]


def domain_rollout(c: TrainConfig, d: DomainConfig) -> RolloutSpec:
    """Domain ``d``'s rollout: ``[rollout]`` with ``d.rollout``'s keys replaced (validated there)."""
    if not d.rollout:
        return c.rollout
    return from_dict(RolloutSpec, {**to_dict(c.rollout), **d.rollout}, "rollout")


def _validate_domain_rollouts(c: TrainConfig, bad: Any) -> None:
    seen: dict[str, tuple[int, dict[str, Any]]] = {}
    for i, d in enumerate(c.domains.mix):
        key = f"domains.mix[{i}].rollout"
        unknown = sorted(set(d.rollout) - set(DOMAIN_ROLLOUT_KEYS))
        if unknown:
            why = ("sampling is one for the run (the learner scores every sequence at rollout.temperature); set it "
                   "in [rollout]" if set(unknown) & {"temperature", "top_p"} else f"a domain may set {DOMAIN_ROLLOUT_KEYS}")
            raise bad(key, d.rollout, f"unknown or run-wide keys {unknown}: {why}")
        try:
            domain_rollout(c, d)
        except ConfigError as e:
            raise ConfigError(f"{key}: {e} (the domain's keys replace [rollout]'s)") from None
        name = domain_name(d)
        first = seen.setdefault(name, (i, d.rollout))
        if first[1] != d.rollout:
            raise bad(key, d.rollout, f"domain {name!r} already has rollout {first[1]!r} (domains.mix[{first[0]}]); "
                      "one domain's tasks share one rollout: give every entry of it the same table, or another name")
    if any(d.rollout for d in c.domains.mix) and c.eval.every > 0 and c.eval.suites:
        raise bad("eval.suites", c.eval.suites, "with [domains.mix.rollout] tables the periodic evaluation scores "
                  "each domain's held-out split with the domain's rollout; leave eval.suites empty")


def _validate_distributed(d: DistributedConfig, bad: Any) -> None:
    if d.backend not in ("local", "ray"):
        raise bad("distributed.backend", d.backend, 'use "local" (one process) or "ray"')
    if d.backend == "local" and (d.address or d.learner_processes > 1):
        raise bad("distributed.backend", d.backend, 'address and learner_processes > 1 need backend = "ray"')
    for key in ("num_workers", "learner_processes"):
        if getattr(d, key) < 1:
            raise bad(f"distributed.{key}", getattr(d, key), "must be >= 1")
    if d.max_staleness < 0:
        raise bad("distributed.max_staleness", d.max_staleness, "use 0 (on-policy) or more updates of lag")


def load_config(path: str | Path | None = None, overrides: Sequence[str] = ()) -> TrainConfig:
    """TOML file (optional) + ``section.key=value`` overrides -> a validated :class:`TrainConfig`."""
    return load_dataclass(TrainConfig, path, overrides)
