"""sandgym environments for TRL's ``GRPOTrainer(environment_factory=...)`` (docs/INTEROP.md, "TRL").

    spec = SandgymSpec("coding/strings:train", n=16, record="runs/trl/trajectories.jsonl")
    trainer = GRPOTrainer(model, args=GRPOConfig(...), processing_class=tool_calling_tokenizer(tokenizer),
                          train_dataset=spec.train_dataset, environment_factory=spec.environment_factory)

What TRL sees, and what it is in sandgym:

- ``spec.environment_factory()`` makes one :class:`SandgymEnvironment` around one sandgym env, made the way
  ``sandgym train`` makes its envs (:meth:`RolloutSpec.env_factory`: ``rollout.env``, ``env_kwargs``, ``tools``,
  ``sandbox``, ``max_turns``). Its sandbox is reset in place between episodes, as the trainer's env pool does.
- Its public methods other than ``reset`` and ``get_reward`` are the env's tools (``write_file``, ``run_tests``,
  ``submit`` ...: names, descriptions and parameters from the env's own tool schemas). A call is one env step of
  that call in sandgym's format (``<tool_call>{"name": ..., "arguments": ...}</tool_call>``): it runs in the
  episode's sandbox, counts as one turn (two calls in one message are two turns) and returns the env's reply as
  text (the tool's result, or the error a bad call gets). Calls after the episode ended run nothing.
- ``reset(task_id=..., **row)`` starts an episode on the row's task (the ``task_id`` column of
  ``spec.train_dataset``) and returns None (the row's prompt already holds the env's system prompt and the task).
  Without a ``task_id`` (TRL's dataset-free mode) it draws a task of the suite and returns the system prompt and
  the task's text, which TRL appends to the empty user message.
- ``get_reward()`` is the episode's reward from sandgym's grader: the env grades the episode and weighs its
  versioned rewards (``correctness@v1``, ``format@v1``, ``runtime@v1`` ...; ``RewardConfig``), the same code path
  as ``sandgym train`` and ``sandgym eval``. An episode that TRL ended before it ended in the env (the model's last
  message called no tool, or TRL's budget ran out) gets that last message as one more turn without a tool call,
  which is its last (truncation ``max_turns``): the env then grades the workspace as it grades any episode whose
  turns ran out. None for an infrastructure failure or a task error (TRL leaves such a rollout out of its group's
  baseline; sandgym leaves it out of training and scores).
- ``spec.train_dataset``: one row per task, ``prompt`` = the env's ``[system, user]`` messages, ``task_id``.
- With ``record``, each graded episode is appended to that file as one sandgym :class:`Trajectory` (the JSON of
  ``save_jsonl`` and of a run's ``trajectories.jsonl``; ``load_jsonl`` reads it, ``sft.source`` takes it). It is
  text-level: a turn's text is the call as the env received it ("" for the closing turn without a call), its
  observation the env's reply; the token ids stay with TRL. Under several processes (accelerate) process ``R``
  writes ``NAME.rankR.jsonl``.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import json
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path
from typing import Any, Literal

from datasets import Dataset
from trl.chat_template_utils import qwen2_5_chat_template, supports_tool_calling

from sandgym.agents.trajectory import Trajectory, Turn, load_jsonl
from sandgym.envs.outcome import EpisodeOutcome
from sandgym.envs.tasksource import load_tasks
from sandgym.envs.tool_env import ToolEnv
from sandgym.errors import ConfigError
from sandgym.rollout.spec import RolloutSpec
from sandgym.tasks.task import Task

__all__ = ["SandgymEnvironment", "SandgymSpec", "tool_calling_tokenizer"]

RESERVED = frozenset({"reset", "get_reward"})
"""Method names TRL gives a meaning of its own; a tool may not take them."""
EPISODE_OVER = "The episode is over: this call did not run. Reply without a tool call."
_JSON_TYPES: Mapping[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list,
                                  "object": dict}
_instances = itertools.count()


@dataclass(frozen=True)
class _Settings:
    """What each environment of one spec is made from (picklable: the factory is a ``partial`` over it)."""

    rollout: RolloutSpec
    tasks: tuple[Task, ...]
    tools: tuple[Mapping[str, Any], ...]
    record: str | None
    seed: int
    opened: list[Any] = field(default_factory=list, compare=False, repr=False)


class SandgymEnvironment:
    """One sandgym env behind TRL's environment interface; the tool methods are added per tool set
    (:func:`environment_class`). Only ``reset``, ``get_reward`` and the tools are public: TRL offers every other
    public method to the model as a tool."""

    def __init__(self, settings: _Settings) -> None:
        self._settings = settings
        self._env = settings.rollout.env_factory()()
        inner = self._env.unwrapped
        if hasattr(inner, "reuse_sandbox") and "reuse_sandbox" not in settings.rollout.env_kwargs:
            inner.reuse_sandbox = True  # a sandbox proven clean between episodes, as sandgym's env pool does
        self._by_id = {t.id: t for t in settings.tasks}
        self._number = next(_instances)
        self._rng = random.Random(settings.seed * 1_000_003 + self._number)
        self._task: Task | None = None
        self._turns: list[Turn] = []
        self._final: Mapping[str, Any] | None = None
        self._reward = 0.0
        self._ended = (False, False)  # (terminated, truncated)
        self._episodes = 0

    # ---- TRL's interface ------------------------------------------------------------------------------------------
    def reset(self, task_id: str | None = None, **row: Any) -> str | None:
        """A new episode on ``task_id`` (a task of the suite), or on a task drawn from it when there is none."""
        if task_id is None:
            task = self._settings.tasks[self._rng.randrange(len(self._settings.tasks))]
        elif task_id in self._by_id:
            task = self._by_id[task_id]
        else:
            raise ConfigError(f"task_id={task_id!r} is not a task of this suite ({len(self._by_id)} tasks); build "
                              "the dataset with SandgymSpec.train_dataset or pass a task id of the same suite")
        _, info = self._env.reset(options={"task": task})
        self._task, self._turns, self._final, self._reward, self._ended = task, [], None, 0.0, (False, False)
        if task_id is not None:
            return None
        return "\n\n".join(str(m["content"]) for m in info["messages"])

    def get_reward(self) -> float | None:
        """The episode's reward from sandgym's grader (None for an infrastructure failure or a task error)."""
        if self._task is None:
            return None
        self._finish()
        final = self._final or {}
        return None if final.get("infra_failure") else float(self._reward)

    # ---- what the episode came to (properties: TRL would offer methods to the model) ---------------------------
    @property
    def task(self) -> Task | None:
        return self._task

    @property
    def reward_components(self) -> dict[str, float]:
        """The graded episode's reward components by ``name@vN`` (empty until it is graded)."""
        return {str(k): float(v) for k, v in ((self._final or {}).get("reward_components") or {}).items()}

    @property
    def outcome(self) -> EpisodeOutcome | None:
        outcome = (self._final or {}).get("outcome")
        return outcome if isinstance(outcome, EpisodeOutcome) else None

    # ---- internals ------------------------------------------------------------------------------------------------
    def _call(self, name: str, arguments: Mapping[str, Any]) -> str:
        if self._task is None:
            raise ConfigError("a tool was called before reset(); TRL resets each environment before generating")
        if self._final is not None:
            return EPISODE_OVER
        call = json.dumps({"name": name, "arguments": dict(arguments)}, ensure_ascii=False)
        text = f"<tool_call>{call}</tool_call>"
        obs, info = self._step(text)
        return "\n".join(str(m["content"]) for m in info.get("messages") or []) or obs

    def _step(self, text: str) -> tuple[str, Mapping[str, Any]]:
        obs, reward, terminated, truncated, info = self._env.step(text)
        self._turns.append(Turn((), (), (), text, str(obs)))
        if terminated or truncated or info.get("infra_failure"):
            self._final, self._reward, self._ended = info, float(reward), (bool(terminated), bool(truncated))
            self._record()
        return str(obs), info

    def _finish(self) -> None:
        """End an episode still running: the model's last message, which called no tool, is its last turn."""
        if self._final is not None:
            return
        inner = self._env.unwrapped
        if isinstance(inner, ToolEnv):
            saved = inner.max_turns
            inner.max_turns = len(self._turns) + 1
            try:
                self._step("")
            finally:
                inner.max_turns = saved
            return
        for _ in range(10_000):  # another env: turns without a call until its own budget ends the episode
            self._step("")
            if self._final is not None:
                return
        raise ConfigError(f"env {self._settings.rollout.env!r} did not end an episode after 10,000 turns without a "
                          "tool call; give it a turn budget (rollout.max_turns)")

    def _trajectory(self) -> Trajectory:
        """The graded episode in sandgym's trajectory format (text-level turns)."""
        task, final = self._task, self._final or {}
        assert task is not None and self._final is not None
        terminated, truncated = self._ended
        outcome = self.outcome
        reason = str((outcome and outcome.truncation) or final.get("truncation") or "env") if truncated else None
        verdict = {} if outcome is not None else {"infra_failure": bool(final.get("infra_failure")),
                                                  "failure_mode": "infra" if final.get("infra_failure") else ""}
        self._episodes += 1
        return Trajectory.from_turns(
            self._turns, task_id=task.id, domain=task.domain, family=task.family, split=task.split,
            reward=self._reward, reward_components=self.reward_components,
            runtime={k: float(v) for k, v in (final.get("runtime") or {}).items() if isinstance(v, (int, float))},
            truncated=truncated, truncation_reason=reason, terminated=terminated, outcome=outcome,
            metadata={"source": "trl", "environment": self._number, "episode": self._episodes}, **verdict)

    def _record(self) -> None:
        if self._settings.record is None:
            return
        line = json.dumps(self._trajectory().to_json(), ensure_ascii=False) + "\n"
        with open(self._settings.record, "a", encoding="utf-8") as f:
            f.write(line)

    def _close(self) -> None:
        with contextlib.suppress(Exception):
            self._env.close()


def _docstring(function: Mapping[str, Any]) -> str:
    props: Mapping[str, Any] = function.get("parameters", {}).get("properties", {})
    description = " ".join(str(function.get("description") or function["name"]).split())
    if not props:
        return description
    args = "\n".join(f"    {name}: {' '.join(str(p.get('description') or name).split())}"
                     for name, p in props.items())
    return f"{description}\n\nArgs:\n{args}\n"


def _hint(schema: Mapping[str, Any], nullable: bool) -> Any:
    if "enum" in schema:
        hint: Any = Literal[tuple(schema["enum"])]  # type: ignore[valid-type]
    else:
        hint = _JSON_TYPES.get(str(schema.get("type")), str)
        items = schema.get("items")
        item = _JSON_TYPES.get(str(items.get("type"))) if isinstance(items, Mapping) else None
        if hint is list and item is not None:
            hint = list[item]  # type: ignore[valid-type]
    return hint | None if nullable else hint


def _tool_method(schema: Mapping[str, Any]) -> Any:
    """A method named after the tool whose signature and docstring give TRL (transformers' ``get_json_schema``)
    the tool's schema; it steps the env with the call."""
    function = schema["function"]
    name = str(function["name"])
    params: Mapping[str, Any] = function.get("parameters", {}).get("properties", {})
    required = set(function.get("parameters", {}).get("required", []))

    def method(self: SandgymEnvironment, **arguments: Any) -> str:
        return self._call(name, arguments)

    sig = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    hints: dict[str, Any] = {}
    for pname, p in params.items():
        hints[pname] = _hint(p, bool(p.get("nullable")))
        default = inspect.Parameter.empty if pname in required else None
        sig.append(inspect.Parameter(pname, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hints[pname]))
    method.__name__ = method.__qualname__ = name
    method.__doc__ = _docstring(function)
    method.__annotations__ = {**hints, "return": str}
    method.__signature__ = inspect.Signature(sig, return_annotation=str)  # type: ignore[attr-defined]
    return method


_CLASSES: dict[str, type[SandgymEnvironment]] = {}


def environment_class(tools: Sequence[Mapping[str, Any]]) -> type[SandgymEnvironment]:
    """The :class:`SandgymEnvironment` subclass whose methods are these tools (OpenAI function schemas)."""
    key = json.dumps(list(tools), sort_keys=True)
    if key not in _CLASSES:
        names = [str(t["function"]["name"]) for t in tools]
        bad = [n for n in names if n in RESERVED or n.startswith("_") or not n.isidentifier()
               or n in ("task", "reward_components", "outcome")]
        if bad:
            raise ConfigError(f"tool name(s) {bad} cannot be methods of a TRL environment (reserved: "
                              f"{sorted(RESERVED)}, 'task', 'reward_components', 'outcome'; a tool name must be a "
                              "Python identifier not starting with '_'); rename the tool or leave it out of "
                              "rollout.tools")
        attrs = {n: _tool_method(t) for n, t in zip(names, tools, strict=True)}
        attrs["__module__"] = __name__
        _CLASSES[key] = type("SandgymEnvironment", (SandgymEnvironment,), attrs)
    return _CLASSES[key]


def new_environment(settings: _Settings) -> SandgymEnvironment:
    """One environment of a spec (what ``SandgymSpec.environment_factory`` calls)."""
    env = environment_class(settings.tools)(settings)
    settings.opened.append(env)
    return env


class SandgymSpec:
    """A sandgym suite for TRL: ``train_dataset`` and ``environment_factory`` plug into ``GRPOTrainer``.

    Args:
        suite: a suite spec (``"coding:train"``, ``"coding/strings:train@16"``, a tasks ``.jsonl`` or a task folder)
            or the tasks themselves.
        rollout: the env settings (``env``, ``env_kwargs``, ``tools``, ``sandbox``, ``max_turns``) as a
            ``[rollout]`` table gives them to ``sandgym train``; sampling fields are TRL's business and unused.
            ``code_action`` must be "none": under TRL the model acts through tool calls only.
        n, seed, difficulty: passed to the suite loader (``load_suite``) when ``suite`` is a spec.
        record: append each graded episode to this JSONL file as a sandgym ``Trajectory``.
    """

    def __init__(self, suite: str | Sequence[Task], *, rollout: RolloutSpec | None = None, n: int | None = None,
                 seed: int = 0, difficulty: int | None = None, record: str | os.PathLike[str] | None = None) -> None:
        rollout = rollout or RolloutSpec(code_action="none")
        if rollout.code_action != "none":
            raise ConfigError(f"rollout.code_action={rollout.code_action!r}: under TRL the model acts through tool "
                              "calls only (its text never reaches the env); use code_action='none'")
        tasks = load_tasks(suite, n=n, seed=seed, difficulty=difficulty) if isinstance(suite, str) else list(suite)
        if not tasks:
            raise ConfigError(f"suite {suite!r} has no tasks; check it with `sandgym tasks list`")
        probe = rollout.env_factory()()
        try:
            _, info = probe.reset(options={"task": tasks[0]})
            tools = tuple(json.loads(json.dumps(t)) for t in info.get("tools") or [])
        finally:
            probe.close()
        if not tools:
            raise ConfigError(f"env {rollout.env or 'sandgym ToolEnv'!r} offers no tools; TRL's environments act "
                              "only through tools (set rollout.tools)")
        environment_class(tools)  # bad tool names fail here, not in the trainer
        self.suite = suite if isinstance(suite, str) else f"{len(tasks)} tasks"
        self.rollout = rollout
        self.record = _rank_path(Path(record)) if record is not None else None
        if self.record is not None:
            self.record.parent.mkdir(parents=True, exist_ok=True)
        self._settings = _Settings(rollout, tuple(tasks), tools, str(self.record) if self.record else None, seed)

    @property
    def tasks(self) -> tuple[Task, ...]:
        return self._settings.tasks

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tools' JSON schemas (what TRL renders into the prompt)."""
        return [json.loads(json.dumps(t)) for t in self._settings.tools]

    @property
    def environment_factory(self) -> partial[SandgymEnvironment]:
        """Zero-argument callable making one :class:`SandgymEnvironment` (TRL's ``environment_factory=``)."""
        return partial(new_environment, self._settings)

    @cached_property
    def train_dataset(self) -> Dataset:
        """One row per task: ``prompt`` (the env's system and user messages) and ``task_id`` (TRL's
        ``train_dataset=``; each row's columns reach ``reset``)."""
        env = self._settings.rollout.env_factory()()
        rows = []
        try:
            for task in self.tasks:
                _, info = env.reset(options={"task": task})
                rows.append({"prompt": [{"role": m["role"], "content": m["content"]} for m in info["messages"]],
                             "task_id": task.id})
        finally:
            env.close()
        return Dataset.from_list(rows)

    def trajectories(self) -> list[Trajectory]:
        """The episodes recorded so far (``record``'s file), oldest first."""
        return load_jsonl(self.record) if self.record is not None and self.record.exists() else []

    def close(self) -> None:
        """Close every environment this spec's factory made (their sandboxes with them)."""
        opened, self._settings.opened[:] = list(self._settings.opened), []
        for env in opened:
            env._close()

    def __enter__(self) -> SandgymSpec:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _rank_path(path: Path) -> Path:
    """``path`` itself in a single process; ``NAME.rankR.jsonl`` in process R of several (accelerate, torchrun)."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return path
    return path.with_name(f"{path.stem}.rank{int(os.environ.get('RANK', '0'))}{path.suffix}")


CHATML_TOKENS = ("<|im_start|>", "<|im_end|>")


def tool_calling_tokenizer(tokenizer: Any) -> Any:
    """``tokenizer``, ready for TRL's tool loop: kept as it is when its chat template renders a tool-calling
    conversation (TRL's ``supports_tool_calling``); else, when it has ChatML's ``<|im_start|>``/``<|im_end|>`` tokens
    (SmolLM2, Qwen, the test models), given TRL's copy of the Qwen2.5 template, which renders the tools into the
    system message and calls as ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``: sandgym's own call
    format, which TRL parses back. Changes the tokenizer in place and returns it."""
    if supports_tool_calling(tokenizer):
        return tokenizer
    vocab = tokenizer.get_vocab()
    missing = [t for t in CHATML_TOKENS if t not in vocab]
    if missing:
        raise ConfigError(f"the tokenizer's chat template cannot render tool calls and it lacks ChatML's {missing}; "
                          "give it a chat template that renders `tools`, assistant `tool_calls` and `tool` messages "
                          "(tokenizer.chat_template = ...), e.g. its model family's tool-calling template")
    tokenizer.chat_template = qwen2_5_chat_template
    return tokenizer
