"""A sandgym env as a ``verifiers`` environment: ``load_environment(env_id=..., suite=..., n=...)``.

Targets the classic ``verifiers`` API (``vf.MultiTurnEnv`` + ``vf.Rubric``; ``verifiers>=0.3,<0.4``, where it
lives in ``verifiers.legacy`` and answers at ``import verifiers as vf``). ``verifiers`` 0.4 removed that stack
(its ``verifiers.v1`` is harness/taskset based) and is not supported here.

- dataset: one row per task: ``prompt`` = the env's ``[system, user]`` messages from ``reset``, ``answer`` = "",
  ``info`` = ``{"task_id": ..., "env_id": ...}`` (JSON);
- a rollout: ``setup_state`` builds a fresh sandgym env and resets it on the row's task; every assistant
  message is one ``env.step(text)`` (``env_response`` returns the env's reply as a user message); when the
  sandgym episode ends (submit or a budget) the reply becomes ``final_env_response`` and the rollout stops;
- reward: the rubric's ``sandgym_reward`` is sandgym's own episode reward (weighted components), with the
  metrics ``sandgym_correctness`` and ``sandgym_success``; an episode that never ended scores 0.

The other way, ``register_verifiers_env(env_or_id, name)`` (or ``verifiers_suite(env_id)`` for a plugin's
``sandgym.tasks`` entry point) turns a verifiers environment's dataset into sandgym Tasks, scored by its rubric as
the host-side verifier ``verifiers.<name>@v1`` (``sandgym.envs.host_verifiers``):

- a row becomes a Task: ``prompt`` = the row's prompt messages as text (system first), ``verifier`` =
  ``Verifier(kind="host", host="verifiers.<name>@vN", answer=row["answer"])``, ``reference.answer`` = the
  answer (so the oracle and ``--check-references`` work), ``metadata["verifiers"]["row"]`` = the whole row;
- grading: the submitted answer is the rollout's completion (one assistant message); the rubric scores it with
  ``score_rollout`` on a ``vf.State`` built from the row as ``init_state`` builds it; the rubric's reward
  (clipped to [0, 1]) is the episode's ``correctness@v1`` and each reward function / metric is a component
  ``verifiers.<name>@vN/<function>`` (clipped to [0, 1]). A reward function that raises (verifiers logs it and
  scores 0) is a task error here, not the agent's 0. Group reward functions are not supported.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from copy import deepcopy
from typing import Any

import gymnasium as gym
import verifiers as vf
from datasets import Dataset
from verifiers.types import flatten_task_input
from verifiers.utils.message_utils import normalize_messages

import sandgym  # noqa: F401  (registers sandgym/* ids and plugins)
from sandgym.envs.host_verifiers import HOST_VERIFIERS, FinalState, VerifierScore, register_verifier
from sandgym.tasks.task import Reference, Split, Task, TaskLimits, Verifier

__all__ = ["RubricVerifier", "SandgymVerifiersEnv", "load_environment", "register_verifiers_env", "verifiers_suite"]


def _text(message: Any) -> str:
    content = message.get("content") if isinstance(message, Mapping) else getattr(message, "content", None)
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):  # content parts
        parts = [p.get("text", "") if isinstance(p, Mapping) else getattr(p, "text", "") for p in content]
        return "".join(str(p or "") for p in parts)
    return "" if content is None else str(content)


def _role(message: Any) -> str:
    return str(message.get("role") if isinstance(message, Mapping) else getattr(message, "role", ""))


async def sandgym_reward(state: Any, **kwargs: Any) -> float:
    """sandgym's episode reward (0.0 when the episode did not end)."""
    return float((state.get("sandgym") or {}).get("reward", 0.0))


async def sandgym_correctness(state: Any, **kwargs: Any) -> float:
    return float(((state.get("sandgym") or {}).get("reward_components") or {}).get("correctness@v1", 0.0))


async def sandgym_success(state: Any, **kwargs: Any) -> float:
    return float((state.get("sandgym") or {}).get("failure_mode") == "success")


class SandgymVerifiersEnv(vf.MultiTurnEnv):
    """Rollouts step a sandgym env (``gym.make(env_id, tasks=tasks, **env_kwargs)``), one per rollout."""

    def __init__(self, env_id: str, tasks: Sequence[Task], env_kwargs: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> None:
        self.sandgym_env_id = env_id
        self.sandgym_tasks = list(tasks)
        self.sandgym_env_kwargs = dict(env_kwargs or {})
        self._envs: dict[str, Any] = {}
        probe = self._make_env()
        rows = []
        try:
            for task in self.sandgym_tasks:
                _, info = probe.reset(options={"task": task})
                rows.append({"prompt": [{"role": m["role"], "content": m["content"]} for m in info["messages"]],
                             "answer": "", "info": json.dumps({"task_id": task.id, "env_id": env_id})})
        finally:
            probe.close()
        rubric = vf.Rubric(funcs=[sandgym_reward], weights=[1.0])
        rubric.add_metric(sandgym_correctness)
        rubric.add_metric(sandgym_success)
        max_turns = max((t.limits.max_turns for t in self.sandgym_tasks), default=8) + 1
        kwargs.setdefault("max_turns", max_turns)
        super().__init__(dataset=Dataset.from_list(rows), rubric=rubric, env_id=env_id, **kwargs)

    def _make_env(self) -> Any:
        return gym.make(self.sandgym_env_id, tasks=self.sandgym_tasks, **self.sandgym_env_kwargs)

    async def setup_state(self, state: Any) -> Any:
        info = state["info"]
        task_id = (json.loads(info) if isinstance(info, str) else info)["task_id"]
        env = self._make_env()
        env.reset(options={"task": task_id})
        self._envs[state["trajectory_id"]] = env
        state["sandgym"] = {"task_id": task_id, "done": False, "reward": 0.0, "reward_components": {},
                            "failure_mode": None}
        return state

    async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> Any:
        env = self._envs.get(state["trajectory_id"])
        if env is None or state["sandgym"]["done"]:
            reply = [{"role": "user", "content": "The episode is over."}]
            state["final_env_response"] = reply
            return reply
        last = next((m for m in reversed(list(messages)) if _role(m) == "assistant"), None)
        text, reward, terminated, truncated, info = env.step(_text(last) if last is not None else "")
        reply = [{"role": "user", "content": text or "(no output)"}]
        if terminated or truncated:
            state["sandgym"].update(done=True, reward=float(reward), failure_mode=info.get("failure_mode"),
                                    reward_components={k: float(v) for k, v in
                                                       info.get("reward_components", {}).items()},
                                    infra_failure=bool(info.get("infra_failure")))
            state["final_env_response"] = reply
            self._close(state)
        return reply

    def _close(self, state: Any) -> None:
        env = self._envs.pop(state["trajectory_id"], None)
        if env is not None:
            env.close()

    @vf.cleanup
    async def close_sandgym_env(self, state: Any) -> None:
        self._close(state)


def load_environment(env_id: str = "sandgym/Coding-v0", suite: str | Sequence[Task] | None = None,
                     n: int | None = None, seed: int = 0, env_kwargs: Mapping[str, Any] | None = None,
                     **kwargs: Any) -> SandgymVerifiersEnv:
    """A verifiers environment over ``env_id`` with the tasks of ``suite`` (a ``load_suite`` spec, a task file,
    or Tasks; default: the env's own suite), ``n`` of them, generated with ``seed``. ``kwargs`` go to
    ``vf.MultiTurnEnv`` (e.g. ``max_turns``, ``timeout_seconds``)."""
    kw = dict(env_kwargs or {})
    make_kw: dict[str, Any] = {**kw, "suite_seed": seed}
    if suite is not None:
        make_kw["tasks"] = list(suite) if not isinstance(suite, str) else suite
    if n is not None and (suite is None or isinstance(suite, str)):
        make_kw["suite_n"] = n
    probe = gym.make(env_id, **make_kw)
    try:
        tasks = list(probe.unwrapped.task_source.tasks)  # type: ignore[attr-defined]
    finally:
        probe.close()
    if n is not None:
        tasks = tasks[:n]
    return SandgymVerifiersEnv(env_id, tasks, kw, **kwargs)


# --- the other way: a verifiers environment as sandgym tasks, its rubric as a host-side verifier ---------------

def _run_sync(coro: Any) -> Any:
    """Run a coroutine to completion from sync code, also when this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _clip(value: Any) -> float:
    x = float(value or 0.0)
    return min(1.0, max(0.0, x)) if x == x else 0.0  # NaN -> 0


def _prompt_text(prompt: Any) -> str:
    """A row's prompt (a string, or messages) as one text: system and user contents in order, other roles
    labelled (few-shot turns)."""
    if isinstance(prompt, str):
        return prompt
    parts = []
    for m in prompt or []:
        role, text = _role(m), _text(m)
        parts.append(text if role in ("system", "user") else f"[{role}] {text}")
    return "\n\n".join(p for p in parts if p.strip())


class _Errors(logging.Handler):
    """Collects the ERROR records a rubric logs while scoring (verifiers turns a raising reward function into
    a logged error and a 0)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


class RubricVerifier:
    """The host-side verifier of an imported verifiers env: its rubric scores the submitted answer."""

    def __init__(self, env: Any, name: str) -> None:
        self.env = env
        self.name = name
        self._lock = threading.Lock()

    def state(self, row: Mapping[str, Any], answer: str | None) -> Any:
        """The ``vf.State`` a rollout of ``row`` ending in ``answer`` has when it is scored (as ``init_state``
        builds it, with the completion one assistant message)."""
        data = deepcopy(dict(row))
        if isinstance(data.get("info"), str):
            data["info"] = json.loads(data["info"])
        fields = flatten_task_input(data)
        state = vf.State(input=fields)
        state["task"] = fields
        state["prompt"] = normalize_messages(data.get("prompt") or [], field_name="input.prompt")
        completion = [{"role": "assistant", "content": answer or ""}]
        state["completion"] = normalize_messages(completion, field_name="completion")
        state.update(trajectory=[{"prompt": data.get("prompt") or [], "completion": completion}],
                     is_completed=True, is_truncated=False, reward=None, metrics=None, error=None,
                     final_env_response=None, tool_defs=[])
        return state

    def rubrics(self) -> list[Any]:
        """The env's rubrics that score the task: a ``RubricGroup``'s members, less the monitor rubrics the env
        adds itself (``MultiTurnMonitorRubric`` & co.: turns, tool calls, sandbox time, which sandgym reports)."""
        rubric = self.env.rubric
        members = list(getattr(rubric, "rubrics", None) or [rubric])
        return [r for r in members if not type(r).__name__.endswith("MonitorRubric")]

    def __call__(self, final: FinalState) -> VerifierScore:
        meta = final.metadata.get("verifiers") or {}
        if "row" not in meta:
            raise ValueError(f"task {final.task_id} has no metadata['verifiers']['row']; make it with "
                             "sandgym.interop.verifiers.register_verifiers_env")
        reward = 0.0
        metrics: dict[str, Any] = {}
        errors = _Errors()
        with self._lock:  # the handler sees this scoring's records only
            for rubric in self.rubrics():
                state = self.state(meta["row"], final.submitted)
                logger = rubric.logger
                logger.addHandler(errors)
                try:
                    _run_sync(rubric.score_rollout(state))
                finally:
                    logger.removeHandler(errors)
                reward += float(state.get("reward") or 0.0)
                metrics.update(state.get("metrics") or {})
        if errors.messages:
            raise RuntimeError(f"the rubric of verifiers env {self.name!r} failed: {'; '.join(errors.messages)}")
        return VerifierScore(_clip(reward), {str(k): _clip(v) for k, v in metrics.items()})


def register_verifiers_env(env: Any, name: str | None = None, *, version: int = 1, split: Split = "train",
                           n: int | None = None, seed: int | None = None, max_turns: int = 4,
                           **env_args: Any) -> list[Task]:
    """Tasks from a verifiers environment's dataset (``split="heldout"``: its eval dataset), scored on the host by
    its rubric, registered as the host-side verifier ``verifiers.<name>@v<version>``.

    ``env``: a ``vf.Environment``, or the id of an installed environment package for ``vf.load_environment``
    (with ``env_args``). ``name`` defaults to the env id's module name. ``n`` / ``seed``: how many rows, shuffled
    with ``seed`` (verifiers' ``get_dataset(n, seed)``). Play the tasks with any tool env that has ``submit``,
    e.g. ``gym.make("sandgym/Coding-v0", tasks=tasks)``; the verifier is registered in this process only.
    """
    if isinstance(env, str):
        name = name or env.replace("-", "_").split("/")[-1]
        env = vf.load_environment(env, **env_args)
    elif env_args:
        raise TypeError(f"env_args {sorted(env_args)} are for vf.load_environment; pass an env id, not an env")
    if not name:
        raise ValueError("name the imported env (its verifier is 'verifiers.<name>@vN'), e.g. name='gsm8k'")
    host = f"verifiers.{name}@v{version}"
    existing = HOST_VERIFIERS.get(host)
    if existing is None or getattr(existing.fn, "env", None) is not env:
        register_verifier(host)(RubricVerifier(env, name))
    dataset = env.get_eval_dataset(n or -1, seed) if split == "heldout" else env.get_dataset(n or -1, seed)
    tasks = []
    for i, row in enumerate(dataset):
        row = dict(row)
        answer = row.get("answer")
        answer = None if answer is None else str(answer)
        example = row.get("example_id", i)
        tasks.append(Task(
            id=f"verifiers/{name}/{split}-{example}", domain="verifiers", family=name, split=split,
            prompt=_prompt_text(row.get("prompt")) or f"(empty prompt in row {example})",
            verifier=Verifier(kind="host", host=host, answer=answer),
            reference=Reference(answer=answer) if answer else None,
            limits=TaskLimits(max_turns=max_turns),
            metadata={"verifiers": {"env": name, "env_id": getattr(env, "env_id", None) or name,
                                    "example_id": example, "row": row}},
        ))
    return tasks


def verifiers_suite(env_id: str, name: str | None = None, *, version: int = 1, max_turns: int = 4,
                    **env_args: Any) -> Callable[..., list[Task]]:
    """A suite callable ``(split, n, seed, difficulty)`` over the installed verifiers env ``env_id`` (loaded
    once, on first use), for a plugin's ``sandgym.tasks`` entry point: ``{"verifiers/gsm8k":
    verifiers_suite("gsm8k")}``. ``train`` is its dataset, ``heldout`` its eval dataset."""
    loaded: dict[str, Any] = {}

    def suite(split: str, n: int, seed: int, difficulty: int | None = None) -> list[Task]:
        if "env" not in loaded:
            loaded["env"] = vf.load_environment(env_id, **env_args)
        if n <= 0:
            return []
        return register_verifiers_env(loaded["env"], name or env_id.replace("-", "_").split("/")[-1],
                                      version=version, split=split, n=n, seed=seed,  # type: ignore[arg-type]
                                      max_turns=max_turns)

    suite.__doc__ = f"the verifiers environment {env_id!r} (its rubric as the host-side verifier)"
    return suite
