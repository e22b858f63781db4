"""An OpenEnv server at a URL played as a sandgym text env: ``sandgym/OpenEnv-v0`` (``train`` and ``eval`` on
environments sandgym did not write).

Name it as ``rollout.env = "sandgym.interop.openenv_remote:sandgym/OpenEnv-v0"`` with ``env_kwargs = {url = ...}``
(or ``--env`` / ``--env-kwargs``). The server's ``/schema`` decides how a turn becomes an action:

- a server whose action has one required string field (sandgym's own ``text``, an echo env's ``message``, ...):
  the whole turn is that field;
- any other action: the agent calls the one tool ``act`` (``<tool_call>{"name": "act", "arguments": {...}}``),
  whose arguments are the action's fields (a call that does not parse is an observation saying why).

The observation text is the observation's ``text`` field (sandgym servers), else its only string field, else its
fields as JSON. Rewards are summed over the episode and paid on the last step (sandgym's convention); the episode
ends when the server says ``done`` or after ``max_turns`` turns. A sandgym server (its observations carry
``task_id``) is reset on the rollout's task id and reports its own system prompt, tools and reward components; the
outcome's score is its ``correctness@v1``. Any other server is reset with the seed only; its score is the summed
reward clipped to [0, 1]. One WebSocket session per env (openenv-core's ``GenericEnvClient``).
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import gymnasium as gym

from sandgym.envs.outcome import Actions, EpisodeOutcome, Grade
from sandgym.envs.parsing import parse_turn
from sandgym.envs.spaces import AnyText
from sandgym.errors import ConfigError, SandboxError
from sandgym.tasks.task import Task

TASK_REFUSED = "is not among this server's"
"""How a ``sandgym serve`` server's refusal of a task id it does not hold begins (``sandgym.interop.openenv``); that
error names the ``--task-seed`` that makes the client's tasks the server's."""

__all__ = ["ENV_ID", "OpenEnvRemoteEnv"]

ENV_ID = "sandgym/OpenEnv-v0"
TOOL = "act"


def _schema(url: str, timeout_s: float) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/schema", timeout=timeout_s) as resp:
            data = json.loads(resp.read())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"url={url!r}: no OpenEnv server answers GET /schema ({exc}); start it (e.g. `sandgym "
                          "serve ENV --port 8000`) or fix the url") from exc
    if not isinstance(data, dict) or not isinstance(data.get("action"), dict):
        raise ConfigError(f"url={url!r}: /schema has no action schema; is it an OpenEnv server?")
    return data


class OpenEnvRemoteEnv(gym.Env[str, str]):
    """A remote OpenEnv environment as a text env (see the module docstring)."""

    metadata = {"render_modes": []}

    def __init__(self, url: str, tasks: Any = None, max_turns: int = 8, timeout_s: float = 60.0) -> None:
        from openenv.core.generic_client import GenericEnvClient

        self.url, self.max_turns, self.tasks = url, int(max_turns), tasks
        schema = _schema(url, timeout_s)
        props = {k: v for k, v in schema["action"].get("properties", {}).items() if k != "metadata"}
        required = [k for k in schema["action"].get("required", []) if k in props]
        strings = [k for k in (required or list(props)) if props[k].get("type") == "string"]
        self.text_field = strings[0] if len(props) == 1 or (len(required) == 1 and strings == required) else None
        self.action_properties = props
        self.sandgym_server = "task_id" in schema.get("observation", {}).get("properties", {})
        self.observation_space = AnyText()
        self.action_space = AnyText()
        self._make_client = lambda: GenericEnvClient(base_url=url, message_timeout_s=timeout_s).sync()
        self._client = self._make_client()
        self._client.connect()
        self._turns, self._total, self._task_id, self._done = 0, 0.0, "", True

    # ---- prompts ---------------------------------------------------------------------------------------------
    def _tool_schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": TOOL, "description": "Send one action to the environment.",
            "parameters": {"type": "object", "properties": self.action_properties,
                           "required": [k for k in self.action_properties]}}}

    def _system_prompt(self) -> str:
        if self.text_field is not None:
            return (f"You act in a remote environment. Each reply of yours is sent as the action's "
                    f"`{self.text_field}`; the environment's answer comes back as the next message.")
        return ("You act in a remote environment through one tool. Call it as <tool_call>{\"name\": \"act\", "
                "\"arguments\": {...}}</tool_call> with these arguments: "
                + json.dumps(self._tool_schema()["function"]["parameters"]))

    @staticmethod
    def _text(obs: dict[str, Any]) -> str:
        if isinstance(obs.get("text"), str):
            return str(obs["text"])
        fields = {k: v for k, v in obs.items() if k not in ("metadata", "reward", "done")}
        strings = [v for v in fields.values() if isinstance(v, str)]
        return strings[0] if len(strings) == 1 else json.dumps(fields, default=str)

    # ---- gymnasium ---------------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        task = (options or {}).get("task")
        task_id = task.id if isinstance(task, Task) else (str(task) if task else "")
        kwargs: dict[str, Any] = {"seed": seed}
        if self.sandgym_server and task_id:
            kwargs["task_id"] = task_id
        try:
            result = self._client.reset(**kwargs)
        except Exception as exc:  # the server closes the session after an error: reconnect once and retry
            self._client.close()
            self._client = self._make_client()
            self._client.connect()
            if TASK_REFUSED in str(exc):  # a sandgym server without this task: the tasks differ, retrying won't help
                raise ConfigError(f"OpenEnv server {self.url}: {exc}") from exc
            try:
                result = self._client.reset(**kwargs)
            except Exception as exc:
                raise SandboxError(f"OpenEnv server {self.url} refused reset({kwargs}): {exc}; a closed connection "
                                   "can be the server's session limit (`sandgym serve --max-sessions`, at least the "
                                   "episodes run at once); with a sandgym server the tasks must be the server's "
                                   "(same suite and seed)") from exc
        obs = dict(result.observation or {})
        self._turns, self._total, self._done = 0, 0.0, False
        self._task_id = str(obs.get("task_id") or task_id)
        text = self._text(obs)
        if self.sandgym_server and obs.get("messages"):
            messages, tools = list(obs["messages"]), list(obs.get("tools") or [])
        else:
            messages = [{"role": "system", "content": self._system_prompt()}, {"role": "user", "content": text}]
            tools = [] if self.text_field is not None else [self._tool_schema()]
        info = {"messages": messages, "tools": tools, "system_prompt": messages[0]["content"],
                "task": task if isinstance(task, Task) else None, "task_id": self._task_id,
                "max_turns": self.max_turns}
        return text, info

    def _action(self, text: str) -> tuple[dict[str, Any] | None, str]:
        if self.text_field is not None:
            return {self.text_field: text}, ""
        parsed = parse_turn(text)
        calls = [c for c in parsed.calls if c.name == TOOL]
        if not calls:
            why = "; ".join(e.message for e in parsed.errors) or f"no call of the tool {TOOL!r}"
            return None, f"{why}. {self._system_prompt()}"
        return dict(calls[0].arguments), ""

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._done:
            raise gym.error.ResetNeeded("the episode ended; call reset() first")
        self._turns += 1
        payload, error = self._action(action)
        info: dict[str, Any] = {}
        obs: dict[str, Any] = {}
        done, format_error = False, payload is None
        if payload is None:
            text = error
        else:
            try:
                result = self._client.step(payload)
            except Exception as exc:  # a server that fails mid-episode is infra, never the agent's fault
                raise SandboxError(f"OpenEnv server {self.url} failed on step: {exc}") from exc
            obs = dict(result.observation or {})
            self._total += float(result.reward or 0.0)
            done, text = bool(result.done), self._text(obs)
        truncated = not done and self._turns >= self.max_turns
        info["messages"] = [{"role": "user" if format_error else "tool", "content": text}]
        if done or truncated:
            self._done = True
            components = {str(k): float(v) for k, v in (obs.get("reward_components") or {}).items()}
            score = components.get("correctness@v1", min(1.0, max(0.0, self._total)))
            outcome = EpisodeOutcome(task_id=self._task_id, domain="openenv", family=self.url,
                                     grade=Grade(kind="script", script_score=score),
                                     actions=Actions(turns=self._turns, submitted=done),
                                     truncation=None if done else "max_turns")
            info.update(outcome=outcome, reward_components={**components, "openenv/reward": self._total},
                        failure_mode=outcome.failure_mode, truncation=outcome.truncation, infra_failure=False)
            return text, self._total, done, truncated, info
        return text, 0.0, False, False, info

    def close(self) -> None:
        self._client.close()
        super().close()


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point="sandgym.interop.openenv_remote:OpenEnvRemoteEnv", disable_env_checker=True)
