"""``E2BSandbox``: the ``Sandbox`` protocol on an E2B cloud VM, through the real ``e2b`` SDK.

Each sandbox is one Firecracker VM that lives ``lifetime_s`` seconds at most. Commands run as
``python3 <init> ... -- timeout -k 1 T bash -c CMD`` inside the VM: the init (``e2b_init.py``) caps output and
measures CPU time and peak RSS like the local backend's, and ``timeout`` kills the command even when the SDK's
stream gives up first. The VM belongs to the agent (E2B's default user may ``sudo``), so it holds nothing of ours
but the hidden tests, which appear only while ``run_tests`` runs. See docs/SANDBOX.md, "E2B backend".
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import secrets
import shlex
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from sandgym.errors import SandboxError
from sandgym.sandbox.e2b_errors import (
    HAVE_E2B,
    INSTALL_HINT,
    CommandExitException,
    FileNotFoundException,
    NotEnoughSpaceException,
    TimeoutException,
    cap_text,
    infra_error,
    is_sandbox_gone,
    looks_oom,
)
from sandgym.sandbox.e2b_init import INIT_PATH, INIT_SOURCE, split_report
from sandgym.sandbox.e2b_session import E2BCodeSession
from sandgym.sandbox.protocol import ExecResult, Limits, TestOutcome, TestReport
from sandgym.sandbox.pyenv import env_key

__all__ = ["E2BSandbox", "E2BCodeSession", "parse_junit"]

WORKDIR = "/home/user/workspace"
"""The agent's workspace inside the VM (its own folder, so the home directory's dotfiles stay out of listings)."""

_SCRATCH = posixpath.dirname(INIT_PATH)
_ENV_SCRUB = ("PYTEST_ADDOPTS", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONSAFEPATH")


def _default_factory(code_interpreter: bool) -> Callable[..., Any]:
    if not HAVE_E2B:
        raise SandboxError(f"E2BSandbox needs the e2b SDK, which is not installed; {INSTALL_HINT}")
    if code_interpreter:
        try:
            from e2b_code_interpreter import Sandbox as CodeInterpreterSandbox
        except ImportError as e:
            raise SandboxError(f"code_interpreter=True needs e2b-code-interpreter; {INSTALL_HINT}") from e
        return CodeInterpreterSandbox.create
    from e2b import Sandbox as E2BSdkSandbox

    return E2BSdkSandbox.create


class E2BSandbox:
    """An E2B VM behind the ``Sandbox`` protocol.

    Args:
        limits: per-command limits; ``memory_mb``, ``max_file_mb`` and ``max_procs`` become rlimits in the VM.
        template: E2B template (default ``base``, or ``code-interpreter-v1`` with ``code_interpreter=True``);
            it needs ``python3`` (and ``pytest`` for ``run_tests``).
        api_key: E2B key; defaults to ``E2B_API_KEY``.
        lifetime_s: the VM is killed by E2B this many seconds after creation even if ``close`` never runs.
        factory: callable taking the ``Sandbox.create`` keywords and returning an SDK-sandbox-like object
            (tests inject fakes here); defaults to the SDK's ``Sandbox.create``.
        code_interpreter: create the VM from the code-interpreter SDK so that ``session()`` works.
        allow_internet: let the VM reach the internet (off by default; needed to ``pip install`` at runtime).

    Raises:
        SandboxError: the SDK is missing, the key is missing or rejected, E2B is rate-limited or unreachable,
            or the template cannot be started. The message says which and what to do.
    """

    rpc_grace_s: float = 5.0
    """Seconds the SDK waits for a command beyond its in-VM timeout before reporting a timeout itself."""

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        template: str | None = None,
        api_key: str | None = None,
        lifetime_s: int = 600,
        factory: Callable[..., Any] | None = None,
        code_interpreter: bool = False,
        allow_internet: bool = False,
        requirements: Sequence[str] = (),
    ) -> None:
        self.limits = limits or Limits()
        self.requirements = tuple(requirements)
        self.workdir = WORKDIR
        self.code_interpreter = code_interpreter
        self._closed = False
        self._measured = True
        self._session: E2BCodeSession | None = None
        if factory is None:
            factory = _default_factory(code_interpreter)
            if not (api_key or os.environ.get("E2B_API_KEY")):
                raise SandboxError(
                    "E2BSandbox needs an API key and none was given; set E2B_API_KEY (or pass api_key=) "
                    "to a key from https://e2b.dev/dashboard, or use the local backend"
                )
        kwargs: dict[str, Any] = {"template": template, "timeout": lifetime_s}
        kwargs["allow_internet_access"] = allow_internet
        if api_key:
            kwargs["api_key"] = api_key
        try:
            self._sbx = factory(**kwargs)
        except Exception as e:
            raise infra_error(e, f"creating a sandbox from template {template or 'default'!r}") from e
        try:
            self._sbx.files.write(INIT_PATH, INIT_SOURCE)
            self._sbx.files.make_dir(self.workdir)
        except Exception as e:
            self.close()
            raise infra_error(e, "preparing the new sandbox") from e
        if self.requirements:
            self._install(self.requirements)

    @staticmethod
    def install_command(reqs: Sequence[str]) -> str:
        """The shell command that builds the task environment for ``reqs`` in an E2B VM, once per cache key.

        The key is the local backend's hash of the sorted requirements (``sandgym.sandbox.pyenv.env_key``, with the
        VM's Python in place of the host's); the command leaves ``~/.sandgym/envs/<key>.complete`` behind and does
        nothing when that marker exists. Run it in an E2B template's build (``RUN`` it in the template's Dockerfile)
        and every sandbox of that template starts with the environment: the per-sandbox install becomes a check."""
        marker = f"$HOME/.sandgym/envs/{env_key(reqs, 'e2b', None)}.complete"
        pip = shlex.join(["python3", "-m", "pip", "install", "--quiet", "--user", "--disable-pip-version-check",
                          *sorted({r.strip() for r in reqs if r.strip()})])
        return f'test -f "{marker}" || {{ {pip} && mkdir -p "$HOME/.sandgym/envs" && touch "{marker}"; }}'

    def _install(self, reqs: Sequence[str]) -> None:
        """The task's packages (``Task.requirements``), installed for the sandbox user before any agent code; a
        template built with :meth:`install_command` already has them and this is a marker check. Installing
        needs network from the VM (``allow_internet=True``) or a mirror."""
        result = self.exec(self.install_command(reqs), timeout=600)
        if not result.ok:
            self.close()
            raise SandboxError(f"cannot install the task's requirements {list(reqs)} in the E2B sandbox: "
                               f"{(result.stderr or result.stdout).strip()[-600:]}; build an E2B template with them "
                               "(RUN the command of E2BSandbox.install_command(reqs) in it, then template=...) or "
                               "create the sandbox with allow_internet=True")

    @property
    def sandbox_id(self) -> str:
        """E2B's id of the VM (for its dashboard and logs)."""
        return str(getattr(self._sbx, "sandbox_id", ""))

    # ---- running commands -------------------------------------------------------------------------------

    def exec(
        self,
        cmd: str | Sequence[str],
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        stdin: str | bytes | None = None,
    ) -> ExecResult:
        """Run ``cmd`` in the workspace (``str`` under ``bash -c``, a sequence as argv).

        Raises:
            SandboxError: the VM is closed, gone or unreachable (never because the command failed).
        """
        self._check_open()
        limit = float(timeout if timeout is not None else self.limits.timeout_s)
        if limit <= 0:
            raise ValueError(f"timeout={timeout!r} must be > 0 seconds")
        shell = cmd if isinstance(cmd, str) else shlex.join(list(cmd))
        nonce = secrets.token_hex(12)
        stdin_path = ""
        if stdin is not None:
            stdin_path = f"{_SCRATCH}/stdin-{nonce}"
            self._write_abs(stdin_path, stdin, "uploading stdin")
        return self._run(shell, limit, nonce, stdin_path, env)

    def run_python(self, code: str, *, timeout: float | None = None) -> ExecResult:
        """Run ``code`` as a fresh ``python3`` process on a temporary file outside the workspace.

        The program runs as ``__main__`` with the workspace (its working directory) first on ``sys.path``, as in
        the local backend, so it can import the agent's modules; the file itself never enters the workspace.
        """
        self._check_open()
        path = f"{_SCRATCH}/run-{secrets.token_hex(8)}.py"
        self._write_abs(path, code, "uploading the program")
        q = shlex.quote(path)
        run = shlex.quote("import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
        return self.exec(f"python3 -c {run} {q}; s=$?; rm -f {q}; exit $s", timeout=timeout)

    def _wrap(self, shell: str, limit: float, nonce: str, stdin_path: str) -> str:
        inner = f"timeout -k 1 {_seconds(limit)} bash -c {shlex.quote(shell)}"
        if not self._measured:
            redirect = f" < {shlex.quote(stdin_path)}" if stdin_path else " < /dev/null"
            return f"mkdir -p {self.workdir} && cd {self.workdir} && {inner}{redirect}"
        lim = self.limits
        args = [str(lim.max_output_bytes), nonce, self.workdir, stdin_path]
        args += [str(lim.memory_mb), str(lim.max_file_mb), str(lim.max_procs)]
        return f"python3 {INIT_PATH} {shlex.join(args)} -- {inner}"

    def _run(
        self, shell: str, limit: float, nonce: str, stdin_path: str, env: Mapping[str, str] | None
    ) -> ExecResult:
        full = self._wrap(shell, limit, nonce, stdin_path)
        start = time.monotonic()
        try:
            res = self._sbx.commands.run(
                full, envs=dict(env) if env else None, timeout=limit + self.rpc_grace_s
            )
        except CommandExitException as e:
            res = e
        except TimeoutException as e:
            if is_sandbox_gone(e):
                raise infra_error(e, "running a command") from e
            return ExecResult(
                exit_code=None,
                stdout="",
                stderr=f"sandgym: the E2B sandbox gave no answer within {limit + self.rpc_grace_s:g}s; "
                "the command was stopped as a timeout\n",
                timed_out=True,
                wall_s=time.monotonic() - start,
            )
        except Exception as e:
            raise infra_error(e, "running a command") from e
        elapsed = time.monotonic() - start
        code, stdout, stderr = res.exit_code, res.stdout or "", res.stderr or ""
        stderr, report = split_report(stderr, nonce)
        if report is None and self._measured and code == 127 and "python3" in stderr:
            self._measured = False  # the template has no python3: run unmeasured from now on
            return self._run(shell, limit, nonce, stdin_path, env)
        wall = report.wall_s if report else elapsed
        stdout, cut_out = cap_text(stdout, self.limits.max_output_bytes)
        stderr, cut_err = cap_text(stderr, self.limits.max_output_bytes)
        timed_out = code in (124, 137) and wall >= limit
        oom = (code == 137 and not timed_out) or (not timed_out and looks_oom(code, stderr))
        return ExecResult(
            exit_code=None if timed_out else code,
            stdout=stdout,
            stderr=stderr,
            timed_out=timed_out,
            oom=oom,
            wall_s=wall,
            cpu_s=report.cpu_s if report else 0.0,
            peak_rss_mb=report.peak_rss_mb if report else 0.0,
            output_truncated=cut_out or cut_err or bool(report and report.truncated),
        )

    # ---- grading ----------------------------------------------------------------------------------------

    def run_tests(
        self, tests: Mapping[str, str | bytes], *, expected: int, timeout: float | None = None, isolation: str = "process"
    ) -> TestReport:
        """Run the hidden ``tests`` (name -> source) with pytest against the workspace; see ``Sandbox``.

        The tests and the JUnit report live in a fresh random folder under ``/tmp/.sandgym`` (outside the
        workspace) only while this call runs. Only the report counts, never the exit code. ``isolation`` is
        accepted for the protocol's sake: E2B runs the tests in the solution's process either way (the microVM
        is the boundary; docs/SANDBOX.md says what that leaves open).
        """
        self._check_open()
        grade = f"{_SCRATCH}/grade-{secrets.token_hex(12)}"
        entries = [{"path": f"{grade}/tests/{_checked(name)}", "data": src} for name, src in tests.items()]
        try:
            self._sbx.files.write_files(entries)
        except Exception as e:
            raise infra_error(e, "uploading hidden tests") from e
        report_path = f"{grade}/report.xml"
        argv = ["env", *(f"-u{name}" for name in _ENV_SCRUB), "python3", "-m", "pytest", "-q"]
        # the task's own pytest.ini and conftest files (hidden, trusted) apply; none from the workspace ever does
        ini = f"{grade}/tests/pytest.ini" if "pytest.ini" in tests else "/dev/null"
        conftest = any(name.split("/")[-1] == "conftest.py" for name in tests)
        argv += ["-p", "no:cacheprovider", *([] if conftest else ["--noconftest"]), "-c", ini,
                 "--rootdir", f"{grade}/tests", "--confcutdir", f"{grade}/tests"]
        argv += ["-o", "junit_family=xunit1"]  # each testcase names its file: outcomes read `file.py::test`
        argv += [f"--junitxml={report_path}", f"{grade}/tests"]
        try:
            result = self.exec(argv, timeout=timeout)
            try:
                raw = bytes(self._sbx.files.read(report_path, format="bytes"))
            except FileNotFoundException:
                raw = b""
            except Exception as e:
                raise infra_error(e, "reading the test report") from e
        finally:
            self._quiet(f"rm -rf {shlex.quote(grade)}")
        outcomes = parse_junit(raw) if raw else None
        return TestReport(
            expected=expected,
            outcomes=tuple(outcomes or ()),
            exec=result,
            report_found=outcomes is not None,
        )

    # ---- files ------------------------------------------------------------------------------------------

    def write_file(self, path: str, data: str | bytes) -> None:
        """Write a workspace file (parents created). ValueError for ``..`` or absolute paths."""
        self._check_open()
        self._write_abs(self._abs(path), data, f"writing {path!r}")

    def read_bytes(self, path: str) -> bytes:
        """A workspace file's bytes. FileNotFoundError if missing."""
        self._check_open()
        target = self._abs(path)
        try:
            return bytes(self._sbx.files.read(target, format="bytes"))
        except FileNotFoundException as e:
            raise FileNotFoundError(f"no file {path!r} in the sandbox workspace ({target})") from e
        except Exception as e:
            raise infra_error(e, f"reading {path!r}") from e

    def read_file(self, path: str) -> str:
        """A workspace file as UTF-8 (undecodable bytes replaced). FileNotFoundError if missing."""
        return self.read_bytes(path).decode("utf-8", "replace")

    def list_files(self, path: str = ".") -> list[str]:
        """Regular files under ``path``, recursively, sorted, relative to the workspace. FileNotFoundError if
        ``path`` does not exist."""
        self._check_open()
        target = self._abs(path)
        try:
            entries = self._sbx.files.list(target, depth=64)
        except FileNotFoundException as e:
            raise FileNotFoundError(f"no folder {path!r} in the sandbox workspace ({target})") from e
        except Exception as e:
            raise infra_error(e, f"listing {path!r}") from e
        out = []
        for entry in entries:
            kind = getattr(getattr(entry, "type", None), "value", getattr(entry, "type", None))
            if kind == "file":
                out.append(posixpath.relpath(entry.path, self.workdir))
        return sorted(out)

    def _abs(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.workdir, _checked(path, allow_dot=True)))

    def _write_abs(self, target: str, data: str | bytes, doing: str) -> None:
        try:
            self._sbx.files.write(target, data)
        except NotEnoughSpaceException as e:
            raise OSError(f"no space left in the sandbox while {doing}: {e}") from e
        except Exception as e:
            raise infra_error(e, doing) from e

    # ---- lifecycle --------------------------------------------------------------------------------------

    def session(self) -> E2BCodeSession:
        """The stateful interpreter of this VM (one per sandbox). Needs ``code_interpreter=True``."""
        self._check_open()
        if not self.code_interpreter:
            raise ValueError(
                "E2BSandbox.session() needs the code interpreter; create it with code_interpreter=True"
            )
        if self._session is None:
            self._session = E2BCodeSession(self._sbx, self.limits, workdir=self.workdir)
        return self._session

    def close(self) -> None:
        """Kill the VM (errors swallowed). Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        if self._session is not None:
            self._session._closed = True  # its kernel dies with the VM
        sbx = getattr(self, "_sbx", None)
        if sbx is not None:
            with contextlib.suppress(Exception):
                sbx.kill()

    def __enter__(self) -> E2BSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("this E2BSandbox is closed; create a new one")

    def _quiet(self, shell: str) -> None:
        with contextlib.suppress(Exception):
            self._sbx.commands.run(shell, timeout=10)


def _seconds(value: float) -> str:
    """A duration as GNU ``timeout`` reads it: plain decimal, never exponent notation (``1e+06``)."""
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _checked(path: str, *, allow_dot: bool = False) -> str:
    """``path`` normalised, or ValueError when it is empty, absolute or climbs out with ``..``."""
    if not path or "\x00" in path:
        raise ValueError(f"path {path!r} is empty or has a NUL byte; give a path relative to the workspace")
    if path.startswith("/"):
        raise ValueError(f"path {path!r} is absolute; give a path relative to the workspace, like 'sol.py'")
    if ".." in path.split("/"):
        raise ValueError(f"path {path!r} contains '..'; paths must stay inside the workspace")
    norm = posixpath.normpath(path)
    if norm == "." and not allow_dot:
        raise ValueError(f"path {path!r} names the workspace itself; give a file name")
    return norm


_JUNIT_KINDS: tuple[tuple[str, Literal["error", "failed", "skipped"]], ...] = (
    ("error", "error"),
    ("failure", "failed"),
    ("skipped", "skipped"),
)


def _junit_name(file: str | None, classname: str, name: str) -> str:
    """``file.py[::Class]::name`` when the report names the file, else ``classname::name``."""
    if not file:
        return f"{classname}::{name}" if classname else name
    module = file.removesuffix(".py").replace("/", ".")
    rest = classname[len(module):].lstrip(".") if classname.startswith(module) else ""
    return "::".join([file, *(rest.split(".") if rest else []), name])


def parse_junit(raw: bytes) -> list[TestOutcome] | None:
    """The test outcomes of a pytest JUnit XML report, or None when it is not a readable report.

    >>> xml = b'<testsuites><testsuite><testcase classname="t" name="a"/>' \\
    ...       b'<testcase classname="t" name="b"><failure message="no"/></testcase></testsuite></testsuites>'
    >>> [(o.name, o.outcome) for o in parse_junit(xml)]
    [('t::a', 'passed'), ('t::b', 'failed')]

    With ``junit_family=xunit1`` a testcase also names its file; outcomes are then named as the local backend
    names them, ``file.py[::Class]::test``:

    >>> xml = b'<testsuite><testcase classname="sub.test_x.TestA" name="b" file="sub/test_x.py"/></testsuite>'
    >>> [o.name for o in parse_junit(xml)]
    ['sub/test_x.py::TestA::b']
    """
    try:
        root = ET.fromstring(raw)
    except ET.ParseError:
        return None
    if root.tag not in ("testsuites", "testsuite"):
        return None
    outcomes = []
    for case in root.iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        outcome: Literal["passed", "failed", "error", "skipped"] = "passed"
        message = ""
        for child, kind in _JUNIT_KINDS:
            node = case.find(child)
            if node is not None:
                outcome, message = kind, (node.get("message") or "")[:500]
                break
        outcomes.append(TestOutcome(name=_junit_name(case.get("file"), classname, name), outcome=outcome,
                                    message=message))
    return outcomes
