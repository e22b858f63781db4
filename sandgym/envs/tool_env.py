"""``ToolEnv``: a Gymnasium environment where the action is the model's text for one turn and tools run in a sandbox.

Reading order = execution order: ``reset`` picks a task and builds the prompt; ``step`` parses the turn, runs the
calls, checks the budgets and, when the episode ends, grades it and computes the reward. See docs/ENVIRONMENTS.md.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import gymnasium as gym

from sandgym.envs.builtin_tools import builtin_tools
from sandgym.envs.context import ToolContext
from sandgym.envs.definitions import WRITE_DEFINITION
from sandgym.envs.evidence import declared_evidence, evidence_turn_v1
from sandgym.envs.grading import grade
from sandgym.envs.mcp_tools import McpServer, McpTools, parse_servers
from sandgym.envs.outcome import Actions, EpisodeOutcome, Grade
from sandgym.envs.parsing import FORMAT_EXAMPLE, ParseError, ToolCall, parse_turn
from sandgym.envs.rewards import INTERMEDIATE_DEFAULT_WEIGHT, REWARDS, RewardConfig, compute_rewards
from sandgym.envs.spaces import AnyText
from sandgym.envs.tasksource import TaskSource
from sandgym.envs.tools import Tool, ToolSet
from sandgym.envs.turn_terms import TURN_TERMS, Turn, TurnTermName, repeated_calls
from sandgym.errors import ConfigError, SandboxError
from sandgym.sandbox.factory import make_sandbox
from sandgym.sandbox.protocol import Limits, Sandbox
from sandgym.tasks.task import Task

__all__ = ["ToolEnv", "CodeAction", "DOMAIN_DESCRIPTIONS", "CHANGING_TOOLS", "SUBMIT_WORD"]

log = logging.getLogger(__name__)
CodeAction = Literal["python", "submit", "test"] | None
CHANGING_TOOLS = frozenset({"write_file", "edit_file", "write_definition", "python", "bash"})
"""Tools that may change the workspace: after one, the code is untested until the next ``run_tests``."""
SUBMIT_WORD = re.compile(r"^\W*submit\W*$", re.IGNORECASE | re.MULTILINE)
"""In ``code_action="test"``, a turn with no code block and no tool call with a line that is just ``SUBMIT``
(any case, punctuation around it allowed) submits; "I should not submit yet" does not."""

DOMAIN_DESCRIPTIONS: Mapping[str, str] = {
    "coding": "You are a software engineer. Write or fix Python code in the workspace; hidden tests decide.",
    "long_context": "You answer questions about long documents. Find the facts you need, then submit the answer.",
}


@dataclass
class _Counts:
    """The running counts that become the outcome's ``Actions`` (with ``turns`` and ``submitted``)."""

    malformed_calls: int = 0
    unknown_tools: int = 0
    bad_args: int = 0
    no_call_turns: int = 0
    tool_calls: int = 0
    code_actions: int = 0
    tool_errors: int = 0
    test_runs: int = 0
    first_test_passed: bool | None = None
    last_test_passed: bool | None = None
    tested_before_submit: bool = False
    evidence_declared: int = 0
    evidence_found: int = 0
    repeated_calls: int = 0


TEST_HINTS = {True: "All visible tests pass. Reply SUBMIT to submit.",
              False: "Not all visible tests pass: reply with the whole corrected ```python block."}
"""The line a test run ends with in ``code_action="test"`` when ``test_hints`` is on, by whether every visible
test passed: the next step the result calls for, so that a small model's choice between revising and submitting
can rest on one salient line instead of on reading the counts (docs/BENCHMARKS.md, the test-and-fix track)."""

_ERROR_FIELD = {"malformed": "malformed_calls", "unknown_tool": "unknown_tools", "bad_args": "bad_args",
                "no_call": "no_call_turns"}


class ToolEnv(gym.Env[str, str]):
    """A multi-turn tool-calling environment over a list of tasks (see docs/ARCHITECTURE.md for the contract).

    Args:
        tasks: the tasks to draw from, a suite spec for ``load_suite`` (``"coding:train"``), or None for the
            class's ``default_suite``.
        suite_n, suite_seed, difficulty, suite_kwargs: passed to ``load_suite`` when ``tasks`` is a spec.
        backend: sandbox backend for the default factory (``"local"``, ``"e2b"``, ``"auto"``).
        sandbox_factory: ``task -> Sandbox``, called once per episode on first tool use (overrides ``backend``).
        tools: tools offered to the agent (default: every built-in tool).
        code_action: what a fenced python block in a turn without ``<tool_call>`` does: ``"python"`` runs it,
            ``"submit"`` writes it to the task's entry file and submits, ``"test"`` writes it to the entry file and
            runs the visible tests (test-and-fix: a later turn that says ``SUBMIT`` submits), None counts a
            no-call turn.
        reward_weights: ``name[@vN]`` -> weight (default: ``RewardConfig()``'s).
        max_turns, max_total_observation_chars, episode_timeout_s: budgets (a task's own limits can only be
            tightened); running out truncates the episode, which is still graded.
        reuse_sandbox: keep the sandbox for the next episode instead of starting a fresh one, when its backend can
            ``reset()`` (local: every process killed, workspace, /tmp and grader dir wiped, checked empty); other
            backends get a fresh sandbox anyway.
        system_prompt: replaces the generated system prompt (``{entry_file}``/``{domain}`` are filled in).
        turn_rewards: pay the per-turn term ``turn_term`` (see ``sandgym.envs.turn_terms``): every step's info
            carries ``turn_reward`` (the term's weight in the reward weights, default
            ``INTERMEDIATE_DEFAULT_WEIGHT``, times that turn's credit), the final ``reward_components`` the episode
            total under the term's name, and the system prompt of a task the term applies to the term's hint line
            (if it has one). The step reward itself never includes it. Off by default: then nothing changes.
        turn_term: which registered per-turn term (``TURN_TERMS``): ``"intermediate@v1"`` (stating a tracked
            variable's checkpoints), ``"evidence@v1"`` (a narrow search that shows the question's evidence lines) or
            ``"evidence_norepeat@v1"`` (``evidence@v1`` minus a cost per call that repeats one already run in the
            episode: a turn's credit can be negative).
        test_hints: in ``code_action="test"``, end each test run's result with the next step it calls for
            (:data:`TEST_HINTS`: SUBMIT when every visible test passed, a corrected block otherwise). The hint
            says what the result means, never what the code should be; ``False`` leaves the bare summary.
        require_submit: grade only a submitted episode; one that a budget ends without ``submit`` fails
            (``budget``) whatever its workspace holds. Off by default (the final state is graded). RL on the JSON
            track without it learned to write the solution and let the turns run out instead of testing and
            submitting (docs/BENCHMARKS.md, docs/results/json_tools-2026-12-04/).
        mcp_servers: MCP servers (``McpServer`` or its dict: ``name``, ``command``, ...) started inside each
            episode's sandbox at reset; their tools join ``tools`` for the episode (``sandgym.envs.mcp_tools``). A
            task's own ``metadata["mcp_servers"]`` are added to them.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}
    default_suite: str | None = None
    DOMAIN_DESCRIPTIONS: Mapping[str, str] = DOMAIN_DESCRIPTIONS
    """First line of the generated system prompt per task domain (a subclass may replace it)."""
    description: str = ""

    def __init__(
        self,
        tasks: Sequence[Task] | str | None = None,
        *,
        suite_n: int | None = None,
        suite_seed: int = 0,
        difficulty: int | None = None,
        suite_kwargs: Mapping[str, Any] | None = None,
        backend: str = "local",
        sandbox_factory: Callable[[Task], Sandbox] | None = None,
        tools: Sequence[Tool | Callable[..., str]] | None = None,
        code_action: CodeAction = "python",
        reward_weights: Mapping[str, float] | None = None,
        reward_config: RewardConfig | None = None,
        max_turns: int | None = None,
        max_total_observation_chars: int | None = None,
        episode_timeout_s: float | None = None,
        reuse_sandbox: bool = False,
        render_mode: str | None = None,
        system_prompt: str | None = None,
        turn_rewards: bool = False,
        turn_term: TurnTermName = "intermediate@v1",
        test_hints: bool = True,
        require_submit: bool = False,
        mcp_servers: Sequence[McpServer | Mapping[str, Any]] = (),
    ) -> None:
        if code_action not in ("python", "submit", "test", None):
            raise ConfigError(f"code_action={code_action!r} is not one of 'python', 'submit', 'test', None")
        if render_mode not in (None, "ansi"):
            raise ConfigError(f"render_mode={render_mode!r} is not supported; use 'ansi' or None")
        for name, value in (("max_turns", max_turns), ("max_total_observation_chars", max_total_observation_chars),
                            ("episode_timeout_s", episode_timeout_s)):
            if value is not None and value <= 0:
                raise ConfigError(f"{name}={value} must be > 0 (or None for the task's own limit)")
        spec = tasks if tasks is not None else self.default_suite
        self.task_source = TaskSource(spec, n=suite_n, seed=suite_seed, difficulty=difficulty,
                                      filter=self.task_filter, suite_kwargs=suite_kwargs)
        self.backend = backend
        self.sandbox_factory = sandbox_factory or self._default_factory
        self.reuse_sandbox = reuse_sandbox
        self._spare: Sandbox | None = None
        self._spare_requirements: tuple[str, ...] = ()
        self.toolset = ToolSet(tools if tools is not None else builtin_tools())
        self.base_toolset = self.toolset
        """The env's own tools; ``toolset`` is the episode's (these plus its MCP servers' tools)."""
        self.mcp_servers = parse_servers(mcp_servers, "mcp_servers")
        self._mcp: McpTools | None = None
        # Code actions run through these built-ins even when the agent is not offered them as tools.
        self._code_action_tools = ToolSet([*builtin_tools(["python", "write_file", "run_tests", "submit"]),
                                           WRITE_DEFINITION])
        self.code_action: CodeAction = code_action
        if reward_config is None:
            reward_config = RewardConfig(weights=reward_weights) if reward_weights else RewardConfig()
        self.reward_config = reward_config
        self.max_turns = max_turns
        self.max_total_observation_chars = max_total_observation_chars
        self.episode_timeout_s = episode_timeout_s
        self.render_mode = render_mode
        self.custom_system_prompt = system_prompt
        if turn_term not in TURN_TERMS:
            raise ConfigError(f"turn_term={turn_term!r} is not a registered per-turn term; use one of "
                              f"{sorted(TURN_TERMS)}")
        self.turn_rewards = bool(turn_rewards)
        self.turn_term: str = turn_term
        self._turn_spec = TURN_TERMS[turn_term]
        self._ran: list[tuple[str, dict[str, Any], str]] = []
        self._episode_calls: list[tuple[str, dict[str, Any], str]] = []
        """The calls that ran in this episode's earlier turns (``Turn.earlier``)."""
        self.test_hints = bool(test_hints)
        self.require_submit = bool(require_submit)
        self._decided: dict[int, bool] = {}
        self._seen: dict[int, bool] = {}
        self.observation_space = AnyText()
        self.action_space = AnyText()
        self.messages: list[dict[str, Any]] = []
        self._ctx: ToolContext | None = None
        self._done = False
        self._counts = _Counts()
        self._turns = 0
        self._obs_chars = 0
        self._start = 0.0

    # ---------------------------------------------------------------------------------------------- hooks
    def task_filter(self, task: Task) -> bool:
        """Which tasks of the suite this env serves (subclasses narrow it)."""
        return True

    def _default_factory(self, task: Task) -> Sandbox:
        limits = Limits(timeout_s=task.limits.exec_timeout_s)
        return make_sandbox(self.backend, limits=limits, requirements=task.requirements)

    def system_prompt(self, task: Task) -> str:
        """Domain, how to call tools (one short example), the tool schemas: short, the model may have 8K context.

        A ``system_prompt`` given to the constructor replaces it (``{entry_file}`` and ``{domain}`` are filled in),
        e.g. a one-line instruction for small models that answer with a code block.
        """
        if self.custom_system_prompt is not None:
            return self.custom_system_prompt.format(
                entry_file=task.metadata.get("entry_file", "solution.py"), domain=task.domain
            )
        domain = self.DOMAIN_DESCRIPTIONS.get(task.domain, "You are an agent working in a sandboxed workspace.")
        lines = [
            domain,
            "Act by calling tools. Write each call on its own line as",
            '<tool_call>{"name": "<tool>", "arguments": {<JSON arguments>}}</tool_call>',
            f"Example: {FORMAT_EXAMPLE}",
        ]
        if self.code_action == "python":
            lines.append("A reply with only a ```python code block runs that code with the python tool.")
        elif self.code_action in ("submit", "test"):
            entry = task.metadata.get("entry_file", "solution.py")
            definition, answer = task.metadata.get("definition"), task.metadata.get("answer_block")
            then = " and submits." if self.code_action == "submit" else " and runs the visible tests; a reply SUBMIT submits."
            does = ("is submitted as your answer." if answer else
                    f"replaces `{definition}` in {entry} with the definition of that name in it{then}" if definition
                    else f"saves it as {entry}{then}")
            lines.append(f"A reply with only a ```python code block {does}")
        lines.append("When finished, call submit (the answer to a question, or \"done\" after coding).")
        lines.append("Tools:\n" + self.toolset.render())
        return "\n".join(lines)

    # ---------------------------------------------------------------------------------------------- API
    @property
    def task(self) -> Task | None:
        return self._ctx.task if self._ctx is not None else None

    @property
    def tools(self) -> list[dict[str, Any]]:
        return self.toolset.schemas

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode on ``options["task"]`` (a Task or task id) or on a task drawn with ``np_random``."""
        super().reset(seed=seed)
        self._close_episode()
        choice = (options or {}).get("task")
        if isinstance(choice, Task):
            task = choice
        elif isinstance(choice, str):
            task = self.task_source.get(choice)
        elif choice is None:
            tasks = self.task_source.tasks
            task = tasks[int(self.np_random.integers(len(tasks)))]
        else:
            raise ConfigError(f"options['task']={choice!r} must be a Task or a task id string")
        self._ctx = ToolContext(task, self._sandbox_for)
        self.toolset = self._episode_toolset(self._ctx)
        self._done = False
        self._counts = _Counts()
        self._untested_change = False
        self._changed = False
        self._turns = 0
        self._obs_chars = 0
        self._env_s = 0.0
        self._start = time.monotonic()
        self._decided = {}
        self._ran = []
        self._episode_calls = []
        self._seen = {}
        self._counts.evidence_declared = declared_evidence(task.metadata)
        system = self.system_prompt(task)
        if self.turn_rewards and self._turn_spec.hint is not None and self._turn_spec.items(task.metadata):
            system += "\n" + self._turn_spec.hint(task.metadata)
        self.messages = [{"role": "system", "content": system}, {"role": "user", "content": task.prompt}]
        info = {
            "messages": [dict(m) for m in self.messages],
            "tools": self.toolset.schemas,
            "task": task,
            "task_id": task.id,
            "system_prompt": system,
            "max_turns": self._max_turns(task),
        }
        return task.prompt, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Run one turn. Never raises for anything the agent wrote; a sandbox failure ends it as ``infra_failure``."""
        if self._ctx is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if self._done:
            msg = {"role": "user", "content": "The episode is over; call reset() to start a new one."}
            return msg["content"], 0.0, True, False, {"messages": [msg], "tool_calls": [], "parse_errors": []}
        ctx = self._ctx
        self._turns += 1
        action = action if isinstance(action, str) else str(action)
        self.messages.append({"role": "assistant", "content": action})
        new: list[dict[str, Any]] = []
        calls: list[ToolCall] = []
        errors: list[ParseError] = []
        infra: str | None = None
        began = time.monotonic()
        try:
            calls, errors = self._run_turn(ctx, action, new)
        except SandboxError as exc:
            infra = f"sandbox failed: {exc}"
        except Exception as exc:  # a bug must not kill a rollout worker; flagged as infra, logged
            log.exception("ToolEnv.step failed on task %s", ctx.task.id)
            infra = f"internal error: {type(exc).__name__}: {exc}"
        self._env_s += time.monotonic() - began
        self._count_evidence(ctx.task)
        self._counts.repeated_calls += repeated_calls(self._ran, self._episode_calls)
        self._obs_chars += sum(len(m["content"]) for m in new)
        truncation = "infra" if infra else self._budget_exhausted(ctx)
        terminated = infra is None and ctx.submitted is not None
        info: dict[str, Any] = {"tool_calls": calls, "parse_errors": errors, "actions": self._actions(ctx)}
        if self.turn_rewards:
            info["turn_reward"] = 0.0 if infra else self._turn_credit(ctx.task, action)
        self._episode_calls.extend(self._ran)
        self._ran = []
        reward = 0.0
        if terminated or truncation:
            if truncation and truncation != "infra":
                new.append({"role": "user", "content": f"[episode ended: budget {truncation} ran out]"})
            reward = self._finish(ctx, truncation, infra, info)
        self.messages.extend(new)
        info["messages"] = [dict(m) for m in new]
        return self._render_obs(new), reward, terminated, truncation is not None, info

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return "\n".join(f"[{m['role']}] {m['content']}" for m in self.messages[-4:])

    # ---------------------------------------------------------------------------------------------- internals
    def _max_turns(self, task: Task) -> int:
        return min(task.limits.max_turns, self.max_turns or task.limits.max_turns)

    def _sandbox_for(self, task: Task) -> Sandbox:
        spare, self._spare = self._spare, None
        if spare is not None and self._spare_requirements != task.requirements:  # another task environment
            with contextlib.suppress(Exception):
                spare.close()
            spare = None
        self._spare_requirements = task.requirements
        return spare if spare is not None else self.sandbox_factory(task)

    def _episode_toolset(self, ctx: ToolContext) -> ToolSet:
        """The env's tools plus those of the episode's MCP servers (the env's and the task's), started now."""
        task = ctx.task
        servers = self.mcp_servers + parse_servers(task.metadata.get("mcp_servers"),
                                                   f"task {task.id!r} metadata['mcp_servers']")
        if not servers:
            return self.base_toolset
        self._mcp = McpTools.open(ctx, servers, taken=self.base_toolset.names)
        return ToolSet([*self.base_toolset.tools.values(), *self._mcp.tools])

    def _stop_mcp(self) -> None:
        mcp, self._mcp = self._mcp, None
        if mcp is not None:
            mcp.close()

    def _close_episode(self, keep: bool = False) -> None:
        """End the episode's sandbox use: close it, or (``reuse_sandbox`` and healthy) wipe it for the next one."""
        self._stop_mcp()
        if self._ctx is None:
            return
        if not (keep and self.reuse_sandbox):
            self._ctx.close()
            return
        sandbox = self._ctx.detach()
        if sandbox is None:
            return
        reset = getattr(sandbox, "reset", None)  # only a backend that can prove itself clean is reused
        try:
            if reset is not None:
                reset()
            wiped = reset is not None
        except Exception:  # noqa: BLE001 - a sandbox that cannot be wiped is replaced
            wiped = False
        if wiped and self._spare is None:
            self._spare = sandbox
        else:
            with contextlib.suppress(Exception):
                sandbox.close()

    def close(self) -> None:
        self._close_episode()
        if self._spare is not None:
            self._spare.close()
            self._spare = None
        super().close()

    def _run_turn(self, ctx: ToolContext, text: str, new: list[dict[str, Any]]) -> tuple[list[ToolCall], list[ParseError]]:
        parsed = parse_turn(text)
        calls = list(parsed.calls)
        errors = list(parsed.errors)
        if not calls and not errors:
            if parsed.code_blocks and self.code_action is not None:
                calls = self._code_action_calls(ctx, parsed.code_blocks[-1])
                self._counts.code_actions += 1
            elif self.code_action == "test" and SUBMIT_WORD.search(text):
                calls = [ToolCall("submit", {"answer": "done"}, raw=text, code_action=True)]
                self._counts.code_actions += 1
            else:
                hint = " Or reply with a ```python code block." if self.code_action else ""
                errors.append(ParseError(
                    "no_call", f"No tool call found in your message. Call a tool, e.g. {FORMAT_EXAMPLE}.{hint}"))
        for call in calls:
            if ctx.submitted is not None:
                break  # the episode ended with submit; later calls do not run
            toolset = self._code_action_tools if call.code_action else self.toolset
            error = toolset.check(call)
            if error is not None:
                errors.append(error)
                continue
            if not call.code_action:
                self._counts.tool_calls += 1
            result = toolset.call(ctx, call)
            if not result.ok:
                self._counts.tool_errors += 1
            elif not call.code_action:
                self._ran.append((call.name, dict(call.arguments), result.content))
            self._track_testing(ctx, call.name)
            content = result.content
            if self.test_hints and call.code_action and call.name == "run_tests" and ctx.visible_results:
                content += "\n" + TEST_HINTS[ctx.visible_results[-1]]
            new.append({"role": "tool", "name": call.name, "content": content})
        for e in errors:
            setattr(self._counts, _ERROR_FIELD[e.kind], getattr(self._counts, _ERROR_FIELD[e.kind]) + 1)
        if errors:
            new.append({"role": "user", "content": "\n".join(f"Error: {e.message}" for e in errors)})
        return calls, errors

    def _count_evidence(self, task: Task) -> None:
        """``Actions.evidence_found``: the evidence lines this turn's calls showed, by ``evidence@v1``'s rules."""
        if self._counts.evidence_declared:
            _, new = evidence_turn_v1(self._ran, task.metadata, task.files, self._seen)
            self._seen.update(new)
            self._counts.evidence_found = len(self._seen)

    def _turn_weight(self) -> float:
        return float(self.reward_config.weights.get(self.turn_term, INTERMEDIATE_DEFAULT_WEIGHT))

    def _turn_credit(self, task: Task, text: str) -> float:
        """Weighted per-turn credit of this turn (the pure term over the turn's text, the calls that ran in it and
        in the episode's earlier turns, with the items decided so far); negative when the term charges (e.g.
        ``evidence_norepeat@v1`` for a repeated call)."""
        turn = Turn(text, tuple(self._ran), task.metadata, task.files, tuple(self._episode_calls))
        credit, new = self._turn_spec.credit(turn, self._decided)
        self._decided.update(new)
        return self._turn_weight() * float(credit)

    def _actions(self, ctx: ToolContext) -> Actions:
        """The agent's actions so far (every step's ``info["actions"]``; the outcome's when the episode ends)."""
        return Actions(turns=self._turns, submitted=ctx.submitted is not None, **vars(self._counts))

    def _track_testing(self, ctx: ToolContext, tool: str) -> None:
        """Keep ``test_runs``, ``first_test_passed``, ``last_test_passed`` and ``tested_before_submit`` (the
        test-and-fix behaviours) after ``tool`` ran."""
        c = self._counts
        if tool == "run_tests" and len(ctx.visible_results) > c.test_runs:
            c.test_runs = len(ctx.visible_results)
            c.last_test_passed = ctx.visible_results[-1]
            if c.first_test_passed is None and self._changed:  # a run on the untouched starting code is not an attempt
                c.first_test_passed = c.last_test_passed
            self._untested_change = False
        elif tool in CHANGING_TOOLS:
            self._untested_change = self._changed = True
        elif tool == "submit" and ctx.submitted is not None:
            c.tested_before_submit = c.test_runs > 0 and not self._untested_change

    def _code_action_calls(self, ctx: ToolContext, code: str) -> list[ToolCall]:
        if self.code_action == "python":
            return [ToolCall("python", {"code": code}, raw=code, code_action=True)]
        if ctx.task.metadata.get("answer_block"):  # the block is the answer (a name the task asks for)
            return [ToolCall("submit", {"answer": code.strip()}, raw=code, code_action=True)]
        last = "run_tests" if self.code_action == "test" else "submit"
        definition = ctx.task.metadata.get("definition")
        write = (ToolCall("write_definition", {"path": ctx.entry_file, "name": str(definition), "code": code},
                          raw=code, code_action=True) if definition
                 else ToolCall("write_file", {"path": ctx.entry_file, "content": code + "\n"}, raw=code,
                               code_action=True))
        return [
            write,
            ToolCall(last, {} if last == "run_tests" else {"answer": "done"}, raw=code, code_action=True),
        ]

    def _budget_exhausted(self, ctx: ToolContext) -> str | None:
        if ctx.submitted is not None:
            return None
        task = ctx.task
        if self._turns >= self._max_turns(task):
            return "max_turns"
        obs_budget = self.max_total_observation_chars or 3 * task.limits.max_observation_chars
        if self._obs_chars > obs_budget:
            return "observation_budget"
        timeout = min(task.limits.episode_timeout_s, self.episode_timeout_s or task.limits.episode_timeout_s)
        if self._env_s > timeout:  # the environment's own time: the agent's thinking (generation) is not counted
            return "wall_time"
        return None

    def _finish(self, ctx: ToolContext, truncation: str | None, infra: str | None, info: dict[str, Any]) -> float:
        """Grade the episode, build its one ``EpisodeOutcome``, fill the terminal ``info``, return the reward.

        The outcome decides ``success`` and ``failure_mode``; everything downstream (the rollout engine, training,
        evaluation, the rewards) reads them from it. The reward is 0.0 on infra failure.
        """
        self._done = True
        self._stop_mcp()  # no MCP server runs while the episode is graded
        task, stats = ctx.task, ctx.stats
        g = Grade(kind=task.verifier.kind)
        if infra is None and (ctx.submitted is not None or not self.require_submit):
            try:
                g = grade(ctx, self._actions(ctx))
            except SandboxError as exc:
                infra, truncation = f"sandbox failed while grading: {exc}", "infra"
            except Exception as exc:
                log.exception("grading failed on task %s", task.id)
                infra, truncation = f"internal error while grading: {type(exc).__name__}: {exc}", "infra"
            if g.task_error:  # the verifier itself could not run: excluded like infra, counted apart
                infra = f"task error (the task's verifier failed, not the agent): {g.task_error}"
        items = self._turn_spec.items(task.metadata) if self.turn_rewards else 0
        outcome = EpisodeOutcome(
            task_id=task.id, domain=task.domain, family=task.family, grade=g,
            actions=self._actions(ctx),
            runtime=stats.snapshot(), truncation=truncation, infra_failure=infra is not None,
            intermediate_matched=sum(self._decided.values()) if items else 0,
            intermediate_expected=items,
        )
        config = self.reward_config
        if set(TURN_TERMS) & set(config.weights):  # paid per turn (info["turn_reward"]), never in the final reward
            config = replace(config, weights={k: v for k, v in config.weights.items() if k not in TURN_TERMS})
        reward, components = compute_rewards(outcome, config)
        components.update({f"{task.verifier.host}/{k}": v for k, v in g.components.items()})  # metrics
        if self.turn_rewards or self.turn_term in self.reward_config.weights:
            components[self.turn_term] = float(REWARDS[self.turn_term](outcome, config))
        info.update(
            reward_components=components,
            outcome=outcome,
            runtime={**asdict(outcome.runtime), "grade_wall_s": round(g.wall_s, 4),
                     "episode_s": round(time.monotonic() - self._start, 4), "env_s": round(self._env_s, 4)},
            infra_failure=outcome.infra_failure,
            truncation=truncation,
            failure_mode=outcome.failure_mode,
        )
        if infra:
            info["error"] = infra
        self._close_episode(keep=infra is None)
        return reward

    @staticmethod
    def _render_obs(messages: list[dict[str, Any]]) -> str:
        parts = []
        for m in messages:
            if m["role"] == "tool":
                parts.append(f"<tool_response>\n{m['content']}\n</tool_response>")
            else:
                parts.append(m["content"])
        return "\n".join(parts)
