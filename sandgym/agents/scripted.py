"""Scripted agents for tests, baselines and smoke runs: ``OracleAgent``, ``NoopAgent``, ``RandomAgent``.

Each speaks only through the environment's text interface (``<tool_call>`` JSON), like a model would:
``reset(task)`` then ``act(observation, info) -> str`` once per turn. ``run_episode`` drives one episode.
"""

from __future__ import annotations

import json
import posixpath
import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from sandgym.envs.parsing import parse_turn
from sandgym.tasks.definitions import definition_source
from sandgym.tasks.mutations import bug_mutations, find_targets
from sandgym.tasks.task import Task

__all__ = ["ScriptedAgent", "OracleAgent", "ContinuationAgent", "NoopAgent", "RandomAgent", "EpisodeResult",
           "run_episode", "AGENTS", "make_agent", "call"]


def call(name: str, **arguments: Any) -> str:
    """One ``<tool_call>`` line."""
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


class ScriptedAgent(Protocol):
    def reset(self, task: Task) -> None: ...

    def act(self, observation: str, info: Mapping[str, Any]) -> str: ...


class _PlanAgent:
    """Plays a list of turns computed from the task at reset; repeats the last turn if the env asks for more."""

    def __init__(self) -> None:
        self._plan: list[str] = []
        self._i = 0

    def plan(self, task: Task) -> list[str]:
        raise NotImplementedError

    def reset(self, task: Task) -> None:
        self._plan = self.plan(task) or [call("submit", answer="done")]
        self._i = 0

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        turn = self._plan[min(self._i, len(self._plan) - 1)]
        self._i += 1
        return turn


class OracleAgent(_PlanAgent):
    """Solves a task from its reference through the tools: look around, write the reference, test, submit.

    Coding: ``list_files`` + ``read_file`` of the entry file, ``write_file`` of every reference file (one turn),
    ``run_tests`` when visible tests exist, ``submit("done")``. Questions: for documents placed in files, the
    searches of :func:`search_plan` (for what the question names, never the answer); then ``submit(answer)``.
    """

    STYLES = ("tools", "code", "fix")

    def __init__(self, style: str = "tools", compute: str = "expression") -> None:
        super().__init__()
        self._task: Task | None = None
        if style not in self.STYLES:
            raise ValueError(f"OracleAgent style={style!r}; use one of {list(self.STYLES)}")
        if compute not in COMPUTE_MODES:
            raise ValueError(f"OracleAgent compute={compute!r}; use one of {list(COMPUTE_MODES)}")
        self.style = style
        """"tools": the multi-turn tool-call plan; "code": for single-file coding tasks, one turn that is only a
        fenced python block of the reference (what an env with ``code_action="submit"`` accepts); "fix": the
        test-and-fix plan of ``code_action="test"`` (see :func:`fix_plan`)."""
        self.compute = compute
        """How a sum is worked out with ``python`` (:data:`COMPUTE_MODES`, :func:`compute_turn`)."""

    def reset(self, task: Task) -> None:
        super().reset(task)
        self._task = task

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        """As planned; on the first turn, when the env offers ``python``, a sum or count the answer needs is worked
        out with it (:func:`compute_turn`) before submitting, as a reader without mental arithmetic would."""
        if self._i == 0 and self._task is not None:
            add_compute_turn(self._plan, self._task, info, self.compute)
        return super().act(observation, info)

    def plan(self, task: Task) -> list[str]:
        ref = task.reference
        if ref is None:
            raise ValueError(f"task {task.id} has no reference; the oracle needs reference files or an answer")
        entry = str(task.metadata.get("entry_file", "solution.py"))
        if self.style == "code" and task.metadata.get("answer_block") and ref.answer is not None:
            return [fenced(ref.answer)]  # a name the task asks for, in the block the env submits
        definition = task.metadata.get("definition")
        if self.style in ("code", "fix") and definition and entry in ref.files:  # one function of a module
            block = fenced(definition_source(ref.files[entry], str(definition), docstring=False))
            return [block] if self.style == "code" else [block, "SUBMIT"]
        if self.style == "code" and set(ref.files) == {entry}:
            return [fenced(ref.files[entry])]
        if self.style == "fix" and set(ref.files) == {entry}:
            return fix_plan(task, ref.files[entry])
        turns: list[str] = []
        edit = task.metadata.get("edit")
        if ref.files and isinstance(edit, Mapping):
            source = task.files.get(str(edit.get("path", "")))
            return edit_plan(edit, task.metadata.get("search"), function=str(task.metadata.get("function", "")),
                             source=source if isinstance(source, str) else "")
        if ref.files:
            entry = str(task.metadata.get("entry_file", "solution.py"))
            look = call("list_files")
            if entry in task.files:
                look += "\n" + call("read_file", path=entry, end_line=40)
            turns.append(look)
            turns.append("\n".join(call("write_file", path=p, content=c) for p, c in ref.files.items()))
            if task.visible_tests:
                turns.append(call("run_tests"))
        if ref.answer is not None and task.files and task.metadata.get("placement", "file") == "file":
            turns += search_plan(task)
        turns.append(call("submit", answer=ref.answer if ref.answer is not None else "done"))
        return turns


READ_WINDOW = 30
"""Lines a repository demonstration reads per ``read_file`` (a 135M model's window holds a few of them)."""


def edit_plan(edit: Mapping[str, Any], search: Any = None, *, function: str = "", source: str = "") -> list[str]:
    """A repository task (from-repo's ``metadata["edit"]``): find the definition with a grep (``metadata["search"]``
    across the project for a bug report; ``def <function>`` in the file the prompt names otherwise), read from the
    line the grep shows, :data:`READ_WINDOW` lines at a time until the changed lines are in view, undo the change
    with one ``edit_file``, submit. Every argument comes from the prompt or an earlier observation, so a model that
    imitates the demonstration can choose them. Never a whole-file write: a model's window may not hold the file.
    Without the definition in ``source`` (the workspace's copy of the file) it lists the files and reads around
    the change."""
    path, line = str(edit["path"]), int(edit["line"])
    fix = [call("edit_file", path=path, old=str(edit["old"]), new=str(edit["new"])), call("submit", answer="done")]
    pattern, where = ((str(search["grep"]), ".") if isinstance(search, Mapping) and search.get("grep")
                      else (rf"def {re.escape(function.rsplit('.', 1)[-1])}\b", path) if function else ("", path))
    old, at = str(edit["old"]), source.find(str(edit["old"])) if source else -1
    first = source.count("\n", 0, at) + 1 if at >= 0 else line  # the lines the edit's old text spans
    last = first + old.rstrip("\n").count("\n")
    start = _match_before(source, pattern, first)
    if start is None or last - start >= MAX_READ_WINDOWS * READ_WINDOW:
        read = call("read_file", path=path, start_line=max(1, line - 12), end_line=line + 12)
        look = call("grep", pattern=pattern, path=where) if where == "." else call("list_files")
        return [look, read, *fix] if where == "." else [look + "\n" + read, *fix]
    reads = [call("read_file", path=path, start_line=n, end_line=n + READ_WINDOW - 1)
             for n in range(start, last + 1, READ_WINDOW)]
    return [call("grep", pattern=pattern, path=where), *reads, *fix]


MAX_READ_WINDOWS = 3
"""A definition further above the change than this many windows is read around the change instead (a grep, three
reads, the edit and the submit fit the recipe's 6 turns)."""


def _match_before(source: str, pattern: str, line: int) -> int | None:
    """The last 1-based line at or before ``line`` where ``pattern`` (as ``grep -E`` reads it) matches ``source``."""
    if not source or not pattern:
        return None
    rx = re.compile(pattern)
    return max((n for n, text in enumerate(source.splitlines()[:line], 1) if rx.search(text)), default=None)


def search_plan(task: Task) -> list[str]:
    """The look-ups a reader of the question makes in a document placed in a file, one turn each: searches for
    what the question names (a transaction id, a service and each hop after it, a variable, a region, the policy
    and the options), never for the answer, so that a demonstration teaches how to find it. A task without the
    long-context metadata gets ``list_files`` and the first 40 lines of its document."""
    meta, doc = task.metadata, str(task.metadata.get("document") or next(iter(task.files), "."))
    if "needle" in meta:
        return [call("grep", pattern=str(meta["needle"]), path=doc, fixed_strings=True)]
    if "chain" in meta:
        chain = [str(c) for c in meta["chain"]]
        hops = [call("grep", pattern=f"service {name} forwards", path=doc, fixed_strings=True) for name in chain]
        return [*hops, call("grep", pattern=f"service {chain[-1]} stores", path=doc, fixed_strings=True)]
    if "variable" in meta:
        return [call("grep", pattern=f"^(SET|UPDATE) {meta['variable']} ", path=doc)]
    if "region" in meta:
        return [call("grep", pattern=f"region={meta['region']} ", path=doc, fixed_strings=True)]
    if "banned_region" in meta:
        return [call("grep", pattern="^(POLICY|OPTION)", path=doc)]
    return [call("list_files") + "\n" + call("read_file", path=doc, end_line=40)]


def add_compute_turn(plan: list[str], task: Task, info: Mapping[str, Any], mode: str = "expression") -> None:
    """Put :func:`compute_turn` (``mode``) before ``plan``'s final submit when the env's reset ``info`` offers
    ``python``."""
    turn = compute_turn(task, mode) if "python" in tool_names(info.get("tools") or ()) else None
    if turn is not None and len(plan) > 1:
        plan.insert(len(plan) - 1, turn)


def tool_names(schemas: Sequence[Any]) -> set[str]:
    """The names in a list of tool schemas (``{"type": "function", "function": {"name": ...}}`` or ``{"name": ...}``)."""
    names = set()
    for s in schemas:
        if isinstance(s, Mapping):
            inner = s.get("function", s)
            names.add(str(inner.get("name", "")) if isinstance(inner, Mapping) else "")
    return names - {""}


_UPDATE = re.compile(r"(SET|UPDATE) (\S+) (=|\+=|-=) (-?\d+)")
_RECORD = re.compile(r"RECORD order #(\d+) region=(\S+) amount=(\d+) status=(\S+)")


COMPUTE_MODES = ("expression", "program")
"""How :func:`compute_turn` works a sum out: "expression" copies the numbers the search showed into one print
(``print(10 - 5 + 7)``); "program" runs a short loop over the document file itself that applies each line it needs
(the same code at every document length: only the file's path and the name the question gives change)."""


def compute_turn(task: Task, mode: str = "expression") -> str | None:
    """A ``python`` call that prints the task's answer, for the families whose answer is arithmetic over many
    lines: ``tracking`` (the variable's SET value, then each update in order) and ``aggregation`` (the paid orders'
    amounts summed, or their order numbers counted). ``mode`` (:data:`COMPUTE_MODES`): "expression" prints the sum
    of the numbers a search shows (``print(10 - 5 + 7)``, ``print(sum([12, 40]))``); "program" reads the document
    file and applies each of the variable's lines (``exec('v' + '+= 7')``) or sums the region's paid amounts.
    None for any other task, a document not in a file, or when the code would not print the answer."""
    if mode not in COMPUTE_MODES:
        raise ValueError(f"compute mode {mode!r}; use one of {list(COMPUTE_MODES)}")
    meta = task.metadata
    ref = task.reference
    doc = str(meta.get("document") or next(iter(task.files), "."))
    text = task.files.get(doc)
    if ref is None or ref.answer is None or text is None:
        return None
    answer = str(ref.answer).strip()
    code, value = (_program if mode == "program" else _expression)(meta, doc, text, answer)
    if code is None or str(value) != answer:
        return None
    return call("python", code=code)


def _expression(meta: Mapping[str, Any], doc: str, text: str, answer: str) -> tuple[str | None, Any]:
    if "variable" in meta:
        terms: list[str] = []
        for line in text.splitlines():
            m = _UPDATE.fullmatch(line.strip())
            if m and m.group(2) == meta["variable"]:
                terms = [m.group(4)] if m.group(3) == "=" else [*terms, ("+ " if m.group(3) == "+=" else "- ") + m.group(4)]
        return f"print({' '.join(terms)})", _evaluate(terms)
    if "region" in meta:
        paid = [m for m in (_RECORD.fullmatch(x.strip()) for x in text.splitlines())
                if m and m.group(2) == meta["region"] and m.group(4) == "paid"]
        total = sum(int(m.group(3)) for m in paid)
        if answer == str(total):
            return f"print(sum([{', '.join(m.group(3) for m in paid)}]))", total
        return f"print(len([{', '.join(m.group(1) for m in paid)}]))", len(paid)
    return None, None


def _program(meta: Mapping[str, Any], doc: str, text: str, answer: str) -> tuple[str | None, Any]:
    """The program and the value it prints, worked out here with the program's own selection rule (the document
    is task data: it is parsed, never executed, in this process); None when a line it would run is not a plain
    assignment or update."""
    if "variable" in meta:
        var, value = str(meta["variable"]), 0
        for line in text.splitlines():
            words = line.split(None, 2)  # the program's own test: the line's second word is the variable
            if words[1:2] != [var]:
                continue
            m = re.fullmatch(r"(=|\+=|-=) ?(-?\d+)\s*", words[2] if len(words) > 2 else "")
            if m is None:
                return None, None
            value = int(m.group(2)) if m.group(1) == "=" else value + int(m.group(2)) * (1 if m.group(1) == "+=" else -1)
        code = (f"v=0\nfor l in open({doc!r}):\n if l.split()[1:2]==[{var!r}]:exec('v'+l.split(None,2)[2])\n"
                "print(v)")
        return code, value
    if "region" in meta:
        selected = [x for x in text.splitlines() if f"region={meta['region']} " in x and "status=paid" in x]
        records = [_RECORD.search(x) for x in selected]
        if not all(records):
            return None, None
        total = sum(int(m.group(3)) for m in records if m)
        rows = f"for l in open({doc!r}) if 'region={meta['region']} ' in l and 'status=paid' in l"
        if answer == str(total):
            return f"print(sum(int(l.split('amount=')[1].split()[0]) {rows}))", total
        return f"print(sum(1 {rows}))", len(selected)
    return None, None


def _evaluate(terms: Sequence[str]) -> int | None:
    """The value of ``["10", "- 5", "+ 7"]`` (None when empty)."""
    if not terms:
        return None
    return int(terms[0]) + sum(int(t[2:]) * (1 if t[0] == "+" else -1) for t in terms[1:])


def fenced(code: str) -> str:
    return "```python\n" + code.rstrip("\n") + "\n```"


def fix_plan(task: Task, reference: str) -> list[str]:
    """Test-and-fix turns for ``code_action="test"``: for half of the tasks (by a hash of the id) a first attempt
    with one small bug (a mutation of the reference, e.g. a flipped comparison), then the reference; for the
    others the reference at once; then ``SUBMIT``. Every block is tested by the env before the next turn, so a
    demonstration shows the failing test output, the fix and the passing run. Whether the bug fails the visible
    tests is up to them: a caller keeps the demonstrations whose first run failed or whose first block passed.
    A task whose spec is only in its visible tests (``metadata["guess"]``, the ``by_example`` family) always starts
    with that guess: the failing run shows the expected output that the fix copies."""
    turns = [fenced(reference), "SUBMIT"]
    guess = task.metadata.get("guess")
    if isinstance(guess, str) and task.visible_tests:
        return [fenced(guess), *turns]
    key = zlib.crc32(task.id.encode())
    if key % 2 or not task.visible_tests:  # a bug no test would show is not a lesson
        return turns
    targets = find_targets(reference)
    bugs = bug_mutations(reference, targets[0], seed=key) if targets else []
    return [fenced(bugs[0].source), *turns] if bugs else turns


def grep_arguments(turn: str) -> Mapping[str, Any] | None:
    """The arguments of a turn that is exactly one ``grep`` call, else None."""
    m = re.fullmatch(r"<tool_call>(.*)</tool_call>", turn.strip(), re.S)
    try:
        c = json.loads(m.group(1)) if m else None
    except json.JSONDecodeError:
        return None
    if not isinstance(c, dict) or c.get("name") != "grep" or not isinstance(c.get("arguments"), dict):
        return None
    return c["arguments"]


def literal(arguments: Mapping[str, Any]) -> str | None:
    """A grep's pattern when it matches as plain text (``fixed_strings``, or no regex metacharacter), else None."""
    pattern = str(arguments.get("pattern", ""))
    plain = arguments.get("fixed_strings") is True or re.escape(pattern) == pattern.replace(" ", "\\ ")
    return pattern if pattern and plain and not arguments.get("ignore_case") else None


def search_hits(task: Task, turn: str) -> list[int] | None:
    """The 1-based numbers of the document lines a plan turn that is one ``grep`` call shows (``[]`` when it matches
    none), or None for any other turn. Extended regular expressions are read as Python's, which agree on the plans'
    patterns."""
    args = grep_arguments(turn)
    document = task.files.get(str(args.get("path", ""))) if args is not None else None
    if args is None or document is None:
        return None
    pattern = str(args.get("pattern", ""))
    hit: Callable[[str], bool] = ((lambda line: pattern in line) if args.get("fixed_strings")
                                  else (lambda line: re.search(pattern, line) is not None))
    return [n for n, line in enumerate(document.splitlines(), 1) if line.strip() and hit(line)]


def _workspace_path(path: Any) -> str:
    return posixpath.normpath(str(path)).removeprefix("./")


_READ_LINE = re.compile(r"\s*(\d+)\| (.*)")
_GREP_LINE = re.compile(r"(\d+):(.*)")


class ContinuationAgent:
    """DAgger-style relabelling: replays a policy's own turns, then plays the oracle from the state they reached.

    ``prefixes`` maps a task id to the policy's turns. After them, each turn of the oracle's plan (``style`` as
    :class:`OracleAgent`) is played in order, except a ``grep`` of :func:`search_plan` whose result the episode
    already holds: every document line it would show (by line number: two equal lines are two lines) has been shown
    by a ``grep`` or ``read_file`` of the episode (however phrased), or it matches nothing and an earlier complete,
    successful plain-text search for a part of its pattern proved that (``service B`` showing no ``service B
    forwards`` line). Lines count as shown only in those tools' own results, checked against the document: text
    that merely echoes a line (an error, ``[no matches for '...']``, the prompt) shows nothing. Nothing is skipped
    on the oracle's knowledge alone, so each step of a continuation follows from what the episode has shown: it
    reads on from where the policy got to and submits once the evidence is in view (working a sum out with
    :func:`compute_turn` first when the env offers ``python``, as :class:`OracleAgent` does). In test-and-fix (style
    ``fix``) the continuation is the reference block then ``SUBMIT``, or ``SUBMIT`` at once when the episode's last
    block passed its visible tests (what the policy can know; a block that then fails the hidden tests makes the
    caller keep fewer of the policy's turns). A demonstration built this way
    teaches the step the policy's own state calls for (the caller trains only the continuation's turns), not a
    whole episode from a state the policy never reaches."""

    def __init__(self, prefixes: Mapping[str, Sequence[str]], style: str = "tools",
                 labels: dict[str, list[str]] | None = None, compute: str = "expression") -> None:
        self.prefixes = prefixes
        self.style = style
        self.compute = compute
        """As :class:`OracleAgent`'s."""
        self.labels = labels
        """When given, ``labels[task_id]`` gets the oracle's turn for each state the episode reaches, the policy's
        own included (what the oracle would have done instead of each of the policy's turns)."""
        self._task: Task | None = None
        self._prefix: list[str] = []
        self._plan: list[str] = []
        self._last = ""
        self._shown: set[tuple[str, int]] = set()
        """(path, line number) of the document lines the episode's grep and read_file results showed whole."""
        self._searched: list[tuple[str, str]] = []
        """(path, pattern) of the episode's plain-text greps whose whole result was shown."""
        self._passed = False
        """Test-and-fix: the episode's last code block passed every visible test."""
        self._first = True

    def reset(self, task: Task) -> None:
        self._task = task
        self._prefix = list(self.prefixes.get(task.id, ()))
        self._plan = OracleAgent(self.style).plan(task)
        if self.style == "fix" and self._plan[-1] == "SUBMIT":
            self._plan = self._plan[-2:]  # the reference, then SUBMIT: a continuation never shows the planted bug
        self._last, self._shown, self._searched, self._passed = "", set(), [], False
        self._first = True

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        if self._first:  # the reset info names the env's tools: the oracle's plan works sums out with python
            self._first = False
            if self._task is not None:
                add_compute_turn(self._plan, self._task, info, self.compute)
        if "```" in self._last:  # test-and-fix: a block was saved and its visible tests run
            m = re.search(r"Visible tests: (\d+) passed, 0 not passed \(of (\d+)\)", observation)
            self._passed = bool(m and m.group(1) == m.group(2))
        self._read(observation)
        if self.labels is not None and self._task is not None:
            self.labels.setdefault(self._task.id, []).append(self._peek())
        self._last = self._prefix.pop(0) if self._prefix else self._next()
        return self._last

    def _read(self, observation: str) -> None:
        """Note what the last turn's calls showed. Each call that runs gets one ``<tool_response>`` block, in order
        (a call the env rejects gets none): the blocks are paired with the calls only when every call got one."""
        if not self._last or self._task is None:
            return
        calls = parse_turn(self._last).calls
        blocks = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", observation, re.S)
        if len(blocks) != len(calls):
            return
        for c, block in zip(calls, blocks, strict=True):
            if c.name == "grep":
                self._read_grep(c.arguments, block)
            elif c.name == "read_file":
                self._read_page(c.arguments, block)

    def _read_grep(self, args: Mapping[str, Any], block: str) -> None:
        assert self._task is not None
        complete = True
        empty = block.startswith("[no matches for ") and "\n" not in block
        for line in () if empty else block.split("\n"):
            path = next((p for p in self._task.files if line.startswith(p + ":")), None)
            m = _GREP_LINE.fullmatch(line[len(path) + 1:]) if path is not None else None
            if path is not None and m is not None and self._shows(path, int(m.group(1)), m.group(2)):
                continue
            complete = False  # an error, a cut line or note, the "more matches" footer: not all was shown
        pattern = literal(args)
        if complete and pattern is not None:
            self._searched.append((_workspace_path(args.get("path", ".")), pattern))

    def _read_page(self, args: Mapping[str, Any], block: str) -> None:
        assert self._task is not None
        path = _workspace_path(args.get("path", ""))
        if path not in self._task.files or not block.startswith(f"[{args.get('path')}: lines "):
            return
        for line in block.split("\n")[1:]:
            m = _READ_LINE.fullmatch(line)
            if m is not None:
                self._shows(path, int(m.group(1)), m.group(2))

    def _shows(self, path: str, n: int, text: str) -> bool:
        """Note line ``n`` of ``path`` as shown when ``text`` is that line, whole; whether it is."""
        assert self._task is not None
        lines = self._task.files[path].splitlines()
        if 1 <= n <= len(lines) and lines[n - 1] == text:
            self._shown.add((path, n))
            return True
        return False

    def _next(self) -> str:
        while len(self._plan) > 1 and self._known(self._plan[0]):
            self._plan.pop(0)
        return self._plan.pop(0) if len(self._plan) > 1 else self._plan[0]

    def _peek(self) -> str:
        """The turn :meth:`_next` would play in this state, without playing it."""
        return next((turn for turn in self._plan[:-1] if not self._known(turn)), self._plan[-1])

    def _known(self, turn: str) -> bool:
        assert self._task is not None
        if turn.startswith("```python"):
            return self._passed  # the episode's last block passed its visible tests: SUBMIT it, do not rewrite it
        hits, args = search_hits(self._task, turn), grep_arguments(turn)
        if hits is None or args is None:
            return False
        path = _workspace_path(args.get("path", "."))
        if hits:
            return all((path, n) in self._shown for n in hits)
        pattern = str(args.get("pattern", ""))
        return args.get("fixed_strings") is True and any(p == path and q in pattern for p, q in self._searched)


class NoopAgent(_PlanAgent):
    """Submits straight away without changing anything (an empty answer for questions): scores 0."""

    def plan(self, task: Task) -> list[str]:
        return [call("submit", answer="" if task.verifier.kind != "tests" else "done")]


class RandomAgent:
    """Random turns: valid and invalid tool calls, malformed JSON, prose and code blocks. Never submits on purpose
    in its first turn; ``submit_prob`` per later turn."""

    def __init__(self, seed: int | None = None, submit_prob: float = 0.2) -> None:
        self.rng = np.random.default_rng(seed)
        self.submit_prob = submit_prob
        self._task: Task | None = None
        self._turn = 0

    def reset(self, task: Task) -> None:
        self._task, self._turn = task, 0

    def act(self, observation: str, info: Mapping[str, Any]) -> str:
        self._turn += 1
        if self._turn > 1 and self.rng.random() < self.submit_prob:
            return call("submit", answer=str(int(self.rng.integers(100))))
        files = list(self._task.files) if self._task else []
        path = files[int(self.rng.integers(len(files)))] if files else "solution.py"
        choices: list[Callable[[], str]] = [
            lambda: call("list_files"),
            lambda: call("read_file", path=path, start_line=int(self.rng.integers(1, 5))),
            lambda: call("grep", pattern="def|return"),
            lambda: call("python", code=f"print({int(self.rng.integers(10))} * 2)"),
            lambda: call("edit_file", path=path, old="return", new="return"),
            lambda: call("read_file", path=3),
            lambda: call("rm_rf", path="/"),
            lambda: '<tool_call>{"name": "read_file", "arguments": {"path": </tool_call>',
            lambda: "I think the answer is probably 42.",
            lambda: "```python\nprint('hello')\n```",
        ]
        return choices[int(self.rng.integers(len(choices)))]()


AGENTS: dict[str, Callable[[], ScriptedAgent]] = {"oracle": OracleAgent, "noop": NoopAgent, "random": RandomAgent}


def make_agent(name: str, seed: int | None = None) -> ScriptedAgent:
    """An agent by name (``oracle``, ``noop``, ``random``)."""
    if name not in AGENTS:
        raise ValueError(f"unknown agent {name!r}; choose one of {sorted(AGENTS)}")
    return RandomAgent(seed=seed) if name == "random" else AGENTS[name]()


@dataclass(frozen=True)
class EpisodeResult:
    """One finished episode: the reward, its components, the outcome and the whole chat."""

    task_id: str
    domain: str
    family: str
    reward: float
    reward_components: dict[str, float]
    outcome: Any
    """The env's ``EpisodeOutcome`` (typed as Any so agents do not import envs)."""
    turns: int
    terminated: bool
    truncated: bool
    infra_failure: bool
    runtime: dict[str, Any] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return bool(getattr(self.outcome, "failure_mode", "") == "success")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (messages omitted)."""
        outcome = self.outcome.to_dict() if hasattr(self.outcome, "to_dict") else self.outcome
        return {
            "task_id": self.task_id, "domain": self.domain, "family": self.family, "reward": self.reward,
            "success": self.success, "reward_components": self.reward_components, "outcome": outcome,
            "turns": self.turns, "terminated": self.terminated, "truncated": self.truncated,
            "infra_failure": self.infra_failure, "runtime": self.runtime,
        }


def run_episode(env: gym.Env, agent: ScriptedAgent, task: Task | str | None = None, seed: int | None = None,
                max_steps: int = 1000) -> EpisodeResult:
    """Reset ``env`` on ``task`` and let ``agent`` act until the episode terminates or is truncated."""
    options = {"task": task} if task is not None else None
    obs, info = env.reset(seed=seed, options=options)
    the_task: Task = info["task"]
    agent.reset(the_task)
    reward, terminated, truncated, turns = 0.0, False, False, 0
    while not (terminated or truncated) and turns < max_steps:
        obs, r, terminated, truncated, info = env.step(agent.act(obs, info))
        reward, turns = float(r), turns + 1
    messages = list(getattr(env.unwrapped, "messages", []))
    return EpisodeResult(
        task_id=the_task.id, domain=the_task.domain, family=the_task.family, reward=reward,
        reward_components=dict(info.get("reward_components", {})), outcome=info.get("outcome"), turns=turns,
        terminated=bool(terminated), truncated=bool(truncated), infra_failure=bool(info.get("infra_failure")),
        runtime=dict(info.get("runtime", {})), messages=messages,
    )
