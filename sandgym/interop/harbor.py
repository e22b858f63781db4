"""Harbor task directories -> sandgym Tasks (``sandgym tasks import --format harbor DIR``).

A Harbor task (Terminal-Bench 2 uses the format) is a directory::

    task.toml              [verifier] timeout_sec, env; [agent] timeout_sec; [environment] docker_image, ...
    instruction.md         the prompt
    environment/           Dockerfile (+ its build context) the agent works in, WORKDIR usually /app
    tests/test.sh          run as ``bash /tests/test.sh`` from WORKDIR after the agent; writes a reward to
                           /logs/verifier/reward.txt (one number) or /logs/verifier/reward.json ({name: number};
                           its "reward" key, else reward.txt, is the score)
    solution/solve.sh      the oracle, run as ``bash /solution/solve.sh`` from WORKDIR

Mapping (the sandbox has no Docker, no root and no /app, /tests, /logs):

- prompt: instruction.md, with the WORKDIR prefix rewritten to the sandbox workspace ``/workspace``;
- files: the build-context files the Dockerfile ``COPY``/``ADD``s into WORKDIR (relative paths kept);
- requirements: packages of ``RUN pip install ...`` / ``uv pip install ...`` lines, and the requirements file
  they name when it is in the build context;
- verifier: ``kind="script"``: at grading time the check script writes tests/ to a fresh private directory,
  maps ``/tests``, ``/logs`` and WORKDIR to it and to the workspace, runs ``bash test.sh`` from the workspace
  (``[verifier] env`` set, ``timeout_sec`` as its timeout; ``python`` and ``pytest`` on PATH as in Harbor's images)
  and prints the reward it wrote as ``{"score": x}``;
- reference: the workspace files that ``solution/solve.sh`` creates or changes, found by running it once in
  the sandbox at import time (``run_solution=False`` skips it; the task then has no reference);
- limits: ``[agent] timeout_sec`` -> ``episode_timeout_s``, ``[verifier] timeout_sec`` -> ``exec_timeout_s``.

Everything the sandbox cannot reproduce (base image, ``apt-get``, ``ENV``, ``COPY`` outside WORKDIR,
``docker_image``, docker-compose, network use in test.sh) is listed in ``metadata["harbor"]["dropped"]`` and
logged as a warning naming the task. ``harbor`` (the PyPI package) needs Python >= 3.12 and is not imported:
task.toml is read with tomllib against Harbor's documented ``TaskConfig`` schema (sections ``task``, ``metadata``,
``verifier``, ``agent``, ``environment``, ``solution``; unknown top-level keys are reported).
"""

from __future__ import annotations

import json
import logging
import re
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from sandgym.errors import SandboxError, TaskError
from sandgym.interop.harbor_export import GRADE, HIDDEN, TEST_SH
from sandgym.interop.harbor_pytest import GRADER_DIR, PytestPlan, hidden_tests, pytest_plan, remap_paths
from sandgym.sandbox import Limits, make_sandbox
from sandgym.sandbox.protocol import Sandbox
from sandgym.tasks.importers.common import task_id
from sandgym.tasks.task import Reference, Task, TaskLimits, Verifier
from sandgym.tasks.validate import Problem, raise_problems

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["HarborTaskDir", "import_harbor", "is_harbor_task", "parse_harbor_dir", "verifier_script",
           "WORKSPACE", "TOML_SECTIONS"]

log = logging.getLogger(__name__)

WORKSPACE = "/workspace"
"""The sandbox's working directory (``sandgym.sandbox.bwrap_host.IN_WORK``): Harbor's WORKDIR maps here."""
TOML_SECTIONS = ("schema_version", "version", "task", "metadata", "verifier", "agent", "environment", "solution",
                 "source")
"""Top-level keys of Harbor's ``TaskConfig`` (harbor.models.task.config)."""
MAX_REFERENCE_FILES = 200
MAX_REFERENCE_BYTES = 2_000_000
_VALUE_OPTIONS = {"-i", "--index-url", "--extra-index-url", "-c", "--constraint", "-f", "--find-links", "-t",
                  "--target", "--prefix", "--root", "--python", "-p"}
_NETWORK = re.compile(r"\b(curl|wget|apt-get|apt|uvx|uv\s+(?:pip|run|tool|sync|add)|pip3?\s+install|npm|git\s+clone)\b")


@dataclass
class HarborTaskDir:
    """What a Harbor task directory holds, read without running anything; ``dropped`` says what cannot map."""

    path: Path
    name: str
    instruction: str
    config: dict[str, Any]
    workdir: str = "/app"
    files: dict[str, str] = field(default_factory=dict)
    requirements: list[str] = field(default_factory=list)
    tests: dict[str, str] = field(default_factory=dict)
    solution: dict[str, str] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)


def is_harbor_task(path: Path) -> bool:
    return (path / "task.toml").is_file() and (path / "instruction.md").is_file()


def _read_tree(root: Path, problems: list[Problem], what: str, skip: Callable[[str], bool] = lambda p: False
               ) -> tuple[dict[str, str], list[str]]:
    """Text files under ``root`` (relative posix path -> text); binary files are listed apart."""
    out: dict[str, str] = {}
    binary: list[str] = []
    if not root.is_dir():
        return out, binary
    for p in sorted(root.rglob("*")):
        if not p.is_file():
            continue
        rel = p.relative_to(root).as_posix()
        if skip(rel):
            continue
        try:
            out[rel] = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            binary.append(f"{what}/{rel}")
    return out, binary


def _dockerfile_lines(text: str) -> list[str]:
    """Logical Dockerfile instructions (continuations joined, comments dropped)."""
    out, cur = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not cur and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        out.append((cur + line).strip())
        cur = ""
    if cur.strip():
        out.append(cur.strip())
    return out


def _pip_packages(command: str, context: Mapping[str, str], dropped: list[str]) -> list[str]:
    """Requirement specifiers of the ``pip install`` parts of one RUN command (``-r file`` read from context)."""
    reqs: list[str] = []
    for part in re.split(r"&&|;|\|\|", command):
        try:
            words = shlex.split(part)
        except ValueError:
            continue
        for i in range(1, len(words)):
            if words[i] == "install" and words[i - 1] in ("pip", "pip3"):  # pip, pip3, python -m pip, uv pip
                args = words[i + 1:]
                j = 0
                while j < len(args):
                    a = args[j]
                    if a in ("-r", "--requirement") and j + 1 < len(args):
                        name = PurePosixPath(args[j + 1]).name
                        found = next((t for p, t in context.items() if PurePosixPath(p).name == name), None)
                        if found is None:
                            dropped.append(f"RUN pip install -r {args[j + 1]}: the file is not in environment/")
                        else:
                            reqs += [ln.split("#")[0].strip() for ln in found.splitlines()
                                     if ln.split("#")[0].strip() and not ln.strip().startswith("-")]
                        j += 2
                        continue
                    if a in _VALUE_OPTIONS:
                        j += 2
                        continue
                    if a.startswith("-"):
                        j += 1
                        continue
                    if a.lower() not in ("pip", "setuptools", "wheel", "uv", "pytest"):  # the sandbox has pytest
                        reqs.append(a)
                    j += 1
                break
    return reqs


def _map_dockerfile(text: str, context: dict[str, str], info: HarborTaskDir) -> None:
    """WORKDIR, the workspace files (COPY/ADD into WORKDIR) and pip requirements; the rest goes to dropped."""
    workdir = "/"
    copies: list[tuple[str, str]] = []
    for line in _dockerfile_lines(text):
        op, _, rest = line.partition(" ")
        op, rest = op.upper(), rest.strip()
        if op == "FROM":
            info.dropped.append(f"FROM {rest}: the base image is not used; tasks run on the sandbox's python3 "
                                "(standard library + pytest) with Task.requirements")
        elif op == "WORKDIR":
            workdir = rest if rest.startswith("/") else str(PurePosixPath(workdir) / rest)
        elif op in ("COPY", "ADD"):
            args = [a for a in shlex.split(rest) if not a.startswith("--")]
            if len(args) < 2:
                continue
            dest = args[-1]
            dest_abs = dest if dest.startswith("/") else str(PurePosixPath(workdir) / dest)
            copies += [(src, dest_abs) for src in args[:-1]]
        elif op == "RUN":
            pkgs = _pip_packages(rest, context, info.dropped)
            info.requirements += pkgs
            rest_cmd = re.sub(r"((uv|python3?\s+-m)\s+)?pip3?\s+install[^&;|]*", "", rest).strip(" &;")
            if rest_cmd and not re.fullmatch(r"[\s&;]*", rest_cmd):
                info.dropped.append(f"RUN {rest_cmd[:200]}: not run (the sandbox image is fixed; only pip "
                                    "packages become Task.requirements)")
        elif op in ("ENV", "USER", "SHELL", "VOLUME"):
            info.dropped.append(f"{op} {rest[:200]}: ignored")
    info.workdir = workdir.rstrip("/") or "/"
    for src, dest in copies:
        src = src.rstrip("/") if src not in (".", "./") else ""
        dest_dir = dest if dest.endswith("/") or len([s for s in copies if s[1] == dest]) > 1 else None
        matched = {p: t for p, t in context.items() if not src or p == src or p.startswith(src + "/")}
        if not matched:
            info.dropped.append(f"COPY {src or '.'} {dest}: no such text file in environment/")
        for p, t in matched.items():
            inner = p[len(src) + 1:] if src and p != src else (PurePosixPath(p).name if p == src else p)
            if p == src and not dest.endswith("/") and dest_dir is None:
                target = dest  # a file copied to a file name
            else:
                target = str(PurePosixPath(dest) / inner)
            wd = info.workdir
            if target == wd or not (wd == "/" or target.startswith(wd + "/")):
                info.dropped.append(f"COPY {p} -> {target}: outside WORKDIR {wd}; not in the workspace")
                continue
            info.files[target[len(wd):].lstrip("/")] = t


def parse_harbor_dir(path: str | Path, problems: list[Problem] | None = None) -> HarborTaskDir | None:
    """Read one Harbor task directory (no code runs); problems are appended, None when it cannot map."""
    root = Path(path)
    problems = problems if problems is not None else []
    file = str(root / "task.toml")
    try:
        config = tomllib.loads((root / "task.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        problems.append(Problem(file, None, "", f"cannot read task.toml: {exc}", "write valid TOML"))
        return None
    for section in ("verifier", "agent", "environment", "solution", "task", "metadata"):
        if section in config and not isinstance(config[section], dict):
            problems.append(Problem(file, None, section, f"[{section}] must be a table",
                                    f"write it as a [{section}] section"))
            return None
    name = str((config.get("task") or {}).get("name") or root.name)
    try:
        instruction = (root / "instruction.md").read_text(encoding="utf-8")
    except OSError as exc:
        problems.append(Problem(str(root / "instruction.md"), None, "", f"cannot read: {exc}",
                                "add instruction.md (the task prompt)"))
        return None
    info = HarborTaskDir(root, name, instruction, config)
    unknown = sorted(set(config) - set(TOML_SECTIONS))
    if unknown:
        info.dropped.append(f"task.toml keys {unknown}: not part of Harbor's TaskConfig; ignored")
    env = config.get("environment") or {}
    if env.get("docker_image"):
        info.dropped.append(f"[environment] docker_image = {env['docker_image']!r}: prebuilt images are not "
                            "used; the task runs on the sandbox's python3")
    for key in ("gpus", "mcp_servers", "skills_dir", "healthcheck"):
        if env.get(key):
            info.dropped.append(f"[environment] {key}: not supported")
    context, binary = _read_tree(root / "environment", problems, "environment")
    info.dropped += [f"{b}: binary file, not carried" for b in binary]
    dockerfile = context.pop("Dockerfile", None)
    for compose in [p for p in context if PurePosixPath(p).name in ("docker-compose.yaml", "docker-compose.yml")]:
        context.pop(compose)
        info.dropped.append(f"environment/{compose}: multi-container environments are not supported")
    if dockerfile is not None:
        _map_dockerfile(dockerfile, context, info)
    else:
        info.files = dict(context)  # no Dockerfile: the environment folder is the workspace
    info.tests, tbin = _read_tree(root / "tests", problems, "tests")
    info.dropped += [f"{b}: binary test file, not carried" for b in tbin]
    if "test.sh" not in info.tests:
        problems.append(Problem(str(root / "tests"), None, "test.sh", "tests/test.sh is missing",
                                "add tests/test.sh writing the reward to /logs/verifier/reward.txt"))
        return None
    if _NETWORK.search(info.tests["test.sh"]) and isinstance(_plan(info), str):
        info.dropped.append("tests/test.sh installs or downloads tools (curl/apt/uv/pip...): the sandbox has no "
                            "network, so those lines fail there; call pytest (or python3 -m pytest) instead")
    info.solution, _ = _read_tree(root / "solution", problems, "solution")
    return info


_PATH_TOKEN = r"(?<![\w.\-/]){}(?=/|\b|$)"


def _remap_prompt(text: str, workdir: str) -> str:
    if workdir in ("/", ""):
        return text
    return re.sub(_PATH_TOKEN.format(re.escape(workdir)), WORKSPACE, text)


_COMMANDS = '''def commands(root, path):
    """PATH with ``python`` and ``pytest`` commands (this interpreter) where the sandbox has none: Harbor's images
    have both, and test.sh / solve.sh call them by name."""
    import shlex, shutil
    bindir = os.path.join(root, "bin")
    os.makedirs(bindir, exist_ok=True)
    for name, argv in (("python", [sys.executable]), ("pytest", [sys.executable, "-m", "pytest"])):
        if shutil.which(name, path=path) is None:
            with open(os.path.join(bindir, name), "w") as f:
                f.write("#!/bin/sh\\nexec " + shlex.join(argv) + ' "$@"\\n')
            os.chmod(os.path.join(bindir, name), 0o755)
    return bindir + os.pathsep + path
'''


def verifier_script(tests: Mapping[str, str], workdir: str, env: Mapping[str, str], timeout_s: float) -> str:
    """The check script: run Harbor's test.sh in a fresh private directory and print the reward it wrote."""
    data = json.dumps({"tests": dict(tests), "workdir": workdir, "env": dict(env), "timeout": timeout_s})
    return f'''import json, os, re, subprocess, sys, tempfile
SPEC = json.loads({data!r})
root = tempfile.mkdtemp(prefix="harbor-")
cwd = os.getcwd()
{_COMMANDS}def remap(text):
    pairs = [("/tests", root + "/tests"), ("/logs", root + "/logs"), ("/solution", root + "/solution")]
    if SPEC["workdir"] not in ("/", ""):
        pairs.append((SPEC["workdir"], cwd))
    for old, new in pairs:
        text = re.sub(r"(?<![\\w.\\-/])" + re.escape(old) + r"(?=/|\\b|$)", lambda m: new, text)
    return text
for rel, text in SPEC["tests"].items():
    p = os.path.join(root, "tests", rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(remap(text))
for d in ("verifier", "agent", "artifacts"):
    os.makedirs(os.path.join(root, "logs", d), exist_ok=True)
envv = dict(os.environ, **SPEC["env"])
# the sandbox's own packages (pytest, the task's requirements) stay importable for test.sh's python3
extra = [p for p in sys.path if p and os.path.isdir(p) and p != cwd and not p.startswith(sys.base_prefix + "/lib")]
envv["PYTHONPATH"] = os.pathsep.join(extra + [p for p in [envv.get("PYTHONPATH", "")] if p])
envv["PATH"] = commands(root, envv.get("PATH") or os.defpath)
try:
    r = subprocess.run(["bash", os.path.join(root, "tests", "test.sh")], cwd=cwd, env=envv, capture_output=True,
                       text=True, timeout=SPEC["timeout"])
    out = (r.stdout + r.stderr)[-2000:]
except subprocess.TimeoutExpired:
    out = "test.sh timed out"
vdir = os.path.join(root, "logs", "verifier")
score, how = 0.0, "no reward file written"
try:
    rewards = json.load(open(os.path.join(vdir, "reward.json")))
    nums = {{k: v for k, v in rewards.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}}
    if "reward" in nums:
        score, how = float(nums["reward"]), "reward.json"
    elif os.path.exists(os.path.join(vdir, "reward.txt")):
        score, how = float(open(os.path.join(vdir, "reward.txt")).read()), "reward.txt"
    elif nums:
        score, how = sum(nums.values()) / len(nums), "reward.json (mean)"
except FileNotFoundError:
    try:
        score, how = float(open(os.path.join(vdir, "reward.txt")).read()), "reward.txt"
    except (FileNotFoundError, ValueError):
        pass
except (ValueError, AttributeError):
    how = "unreadable reward.json"
print(out)
print(json.dumps({{"score": max(0.0, min(1.0, score)), "source": how}}))
'''


_SNAPSHOT = '''import json, os
out = {}
for base, dirs, files in os.walk("."):
    dirs[:] = [d for d in dirs if d not in ("__pycache__", ".pytest_cache")]
    for f in files:
        p = os.path.relpath(os.path.join(base, f), ".")
        try:
            out[p] = open(p, encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            out[p] = None
print(json.dumps(out))
'''


def _run_solution(info: HarborTaskDir, sandbox: Sandbox, timeout_s: float) -> tuple[dict[str, str], str]:
    """The workspace files ``solve.sh`` creates or changes (binary ones are reported), or ({}, why)."""
    sandbox.exec("find . -mindepth 1 -delete")
    for p, t in info.files.items():
        sandbox.write_file(p, t)
    sol_env = {str(k): str(v) for k, v in ((info.config.get("solution") or {}).get("env") or {}).items()}
    solution = dict(info.solution)
    runner = f'''import json, os, re, subprocess, sys, tempfile
files = json.loads({json.dumps(solution)!r}); workdir = {info.workdir!r}; cwd = os.getcwd()
root = tempfile.mkdtemp(prefix="harbor-solution-")
{_COMMANDS}def remap(text):
    pairs = [("/solution", root + "/solution")] + ([(workdir, cwd)] if workdir not in ("/", "") else [])
    for old, new in pairs:
        text = re.sub(r"(?<![\\w.\\-/])" + re.escape(old) + r"(?=/|\\b|$)", lambda m: new, text)
    return text
for rel, text in files.items():
    p = os.path.join(root, "solution", rel); os.makedirs(os.path.dirname(p), exist_ok=True)
    open(p, "w").write(remap(text))
env = dict(os.environ, **json.loads({json.dumps(sol_env)!r}))
env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p) and p != cwd
                                    and not p.startswith(sys.base_prefix + "/lib"))
env["PATH"] = commands(root, env.get("PATH") or os.defpath)
r = subprocess.run(["bash", os.path.join(root, "solution", "solve.sh")], cwd=cwd, env=env, capture_output=True,
                   text=True)
print(r.returncode); print((r.stdout + r.stderr)[-1500:])
'''
    res = sandbox.run_python(runner, timeout=timeout_s)
    first = res.stdout.strip().splitlines()[:1]
    if not res.ok or first != ["0"]:
        return {}, f"solution/solve.sh failed in the sandbox: {(res.stdout + res.stderr).strip()[-600:]}"
    snap = sandbox.run_python(_SNAPSHOT, timeout=60)
    try:
        after = json.loads(snap.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {}, f"could not read the workspace after solve.sh: {snap.stderr[-300:]}"
    changed = {p: t for p, t in after.items() if info.files.get(p) != t}
    binary = sorted(p for p, t in changed.items() if t is None)
    if binary:
        info.dropped.append(f"solve.sh wrote binary files {binary[:5]}: not part of the reference")
    ref = {p: t for p, t in changed.items() if t is not None}
    if len(ref) > MAX_REFERENCE_FILES or sum(len(t) for t in ref.values()) > MAX_REFERENCE_BYTES:
        return {}, f"solve.sh changed {len(ref)} files ({sum(len(t) for t in ref.values())} chars): too big " \
                   "for a reference"
    gone = sorted(set(info.files) - set(after))
    if gone:
        info.dropped.append(f"solve.sh deleted {gone[:5]}: deletions are not part of the reference")
    return ref, ""


def _plan(info: HarborTaskDir) -> PytestPlan | str:
    return pytest_plan(info.tests["test.sh"], info.tests, info.workdir)


def _exported_tests(info: HarborTaskDir) -> Verifier | None:
    """The ``tests`` verifier of a task ``sandgym tasks export --format harbor`` wrote, when test.sh and grade.py
    are exactly the exported ones (tests/hidden/ back to the grader's folder, /app to the workspace)."""
    if info.tests.get("test.sh") != TEST_SH or info.tests.get("grade.py") != GRADE:
        return None
    try:
        spec = json.loads(info.tests.get("spec.json", ""))
    except ValueError:
        return None
    prefix = HIDDEN + "/"
    hidden = {p[len(prefix):]: remap_paths(t, [(f"/tests/{HIDDEN}", GRADER_DIR), (info.workdir, WORKSPACE)])
              for p, t in info.tests.items() if p.startswith(prefix)}
    if not isinstance(spec, dict) or spec.get("kind") != "tests" or not hidden:
        return None
    expected = spec.get("expected")
    if isinstance(expected, bool) or not isinstance(expected, int) or expected <= 0:
        return None
    return Verifier(kind="tests", tests=hidden, expected_tests=expected)


def _verifier(info: HarborTaskDir, env: Mapping[str, str], timeout_s: float
              ) -> tuple[Verifier, str, list[str]]:
    """sandgym's own ``tests`` verifier when test.sh only runs pytest on its test files, else the ``script``
    verifier running test.sh; why (one line, for the import report); packages the tests need beyond pytest."""
    exported = _exported_tests(info)
    if exported is not None:
        return exported, ("tests: a sandgym export (tests/grade.py, kind 'tests'): its hidden tests go back to "
                          "sandgym's grader"), []
    plan = _plan(info)
    if isinstance(plan, PytestPlan) and env:
        plan = f"[verifier] env {sorted(env)} would have to reach the tests"
    hidden = hidden_tests(plan, info.tests, info.workdir, WORKSPACE) if isinstance(plan, PytestPlan) else plan
    if isinstance(hidden, str):
        return (Verifier(kind="script", script=verifier_script(info.tests, info.workdir, env, timeout_s)),
                f"script: test.sh runs in the agent's trust domain, as in Harbor ({hidden})", [])
    assert isinstance(plan, PytestPlan)
    files, expected = hidden
    runs = ", ".join(f"tests/{f}" for f in plan.files)
    return (Verifier(kind="tests", tests=files, expected_tests=expected),
            f"tests: test.sh only runs pytest on {runs}; sandgym's grader runs them ({expected} test cases, reward "
            "= the share that pass) out of the agent's reach", plan.requirements)


def to_task(info: HarborTaskDir, *, split: str = "heldout", reference_files: Mapping[str, str] | None = None,
            ) -> Task:
    """The sandgym Task of a parsed Harbor directory (reference from already-captured solve.sh files)."""
    cfg = info.config
    verifier_cfg = cfg.get("verifier") or {}
    agent_cfg = cfg.get("agent") or {}
    meta = cfg.get("metadata") or {}
    test_timeout = float(verifier_cfg.get("timeout_sec") or 600.0)
    limits = TaskLimits(
        max_turns=32,
        exec_timeout_s=min(3600.0, test_timeout + 30.0),
        episode_timeout_s=float(agent_cfg.get("timeout_sec") or 1800.0),
        max_observation_chars=16000,
    )
    prompt = _remap_prompt(info.instruction, info.workdir).strip()
    if info.workdir not in ("/", "") and info.workdir != WORKSPACE:
        prompt += (f"\n\n(Paths under {info.workdir} in this task are in your working directory {WORKSPACE}.)")
    env = {str(k): str(v) for k, v in (verifier_cfg.get("env") or {}).items()}
    verifier, why, test_reqs = _verifier(info, env, test_timeout)
    difficulty = {"easy": 1, "medium": 2, "hard": 3}.get(str(meta.get("difficulty", "")).lower(), 1)
    return Task(
        id=task_id("harbor", info.name), domain="coding", family="harbor", split=split,  # type: ignore[arg-type]
        prompt=prompt,
        verifier=verifier,
        files=dict(info.files),
        reference=Reference(files=dict(reference_files)) if reference_files else None,
        limits=limits, difficulty=difficulty,
        requirements=tuple(dict.fromkeys(info.requirements + test_reqs)),
        metadata={"format": "harbor", "source_id": info.name, "source_dir": str(info.path),
                  "harbor": {"workdir": info.workdir, "dropped": list(info.dropped),
                             "verifier": {"kind": verifier.kind, "why": why},
                             "solution": info.solution.get("solve.sh"), "config": json.loads(json.dumps(
                                 cfg, default=str))}},
    )


def _task_dirs(path: Path) -> list[Path]:
    if is_harbor_task(path):
        return [path]
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.is_dir() and is_harbor_task(p))
    return []


def import_harbor(path: str | Path, *, split: str = "heldout", run_solution: bool = True,
                  sandbox_factory: Callable[..., Sandbox] | None = None, timeout_s: float = 300.0) -> list[Task]:
    """Tasks from a Harbor task directory or a directory of them.

    ``run_solution``: run each ``solution/solve.sh`` once in a sandbox (``sandbox_factory(requirements=...)``,
    default ``make_sandbox("local")``) and keep the workspace files it writes as the reference. What cannot be
    mapped is in each task's ``metadata["harbor"]["dropped"]`` and logged; a TaskError lists broken directories.
    """
    root = Path(path)
    dirs = _task_dirs(root)
    problems: list[Problem] = []
    if not dirs:
        raise TaskError(f"{root}: no Harbor task here (a directory with task.toml and instruction.md, or a "
                        "directory of such directories)")
    infos = [i for i in (parse_harbor_dir(d, problems) for d in dirs) if i is not None]
    raise_problems(problems)
    tasks = []
    for info in infos:
        ref: dict[str, str] = {}
        if run_solution and "solve.sh" in info.solution:
            ref, why = _capture_reference(info, sandbox_factory, timeout_s)
            if why:
                info.dropped.append(f"no reference: {why}")
        elif "solve.sh" not in info.solution:
            info.dropped.append("no solution/solve.sh: the task has no reference")
        task = to_task(info, split=split, reference_files=ref)
        for item in info.dropped:
            log.warning("harbor task %s: %s", info.name, item)
        log.warning("harbor task %s: verifier %s", info.name, task.metadata["harbor"]["verifier"]["why"])
        tasks.append(task)
    return tasks


def _capture_reference(info: HarborTaskDir, sandbox_factory: Callable[..., Sandbox] | None, timeout_s: float
                       ) -> tuple[dict[str, str], str]:

    if sandbox_factory is None:
        def sandbox_factory(**kw: Any) -> Sandbox:
            return make_sandbox("local", limits=Limits(timeout_s=timeout_s), **kw)
    reqs = tuple(dict.fromkeys(info.requirements))
    try:
        sandbox = sandbox_factory(requirements=reqs) if reqs else sandbox_factory()
    except SandboxError as exc:
        return {}, f"no sandbox to run solve.sh in: {exc}"
    try:
        return _run_solution(info, sandbox, timeout_s)
    except SandboxError as exc:
        return {}, f"the sandbox failed while running solve.sh: {exc}"
    finally:
        sandbox.close()
