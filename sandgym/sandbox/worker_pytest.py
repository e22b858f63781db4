"""The pytest side of the in-sandbox worker: the reporting plugin, the grading run, the warm-up collection.

Imported by ``worker.py`` inside the sandbox (stdlib + the runtime dir's copy of pytest, imported lazily).
"""

import os
import sys

import worker_plain  # sibling in the runtime dir: plain test files run without pytest (os, sys only)

# json, signal and pytest are imported inside the functions: a one-shot `exec` must not pay for them.


class _Reporter:
    """pytest plugin: per-test outcomes, sent as one JSON line on fd 3 when the session finishes."""

    def __init__(self, nonce):
        self.results = {}
        self.nonce = nonce

    def _put(self, name, outcome, message):
        old = self.results.get(name)
        if old is not None and old[0] in ("failed", "error"):
            return  # a failing teardown after a pass is an error; nothing overrides a failure
        self.results[name] = (outcome, message)

    def pytest_runtest_logreport(self, report):
        msg = str(report.longrepr)[-2000:] if report.longrepr else ""
        if report.when == "call":
            self._put(report.nodeid, report.outcome, msg)
        elif report.failed:
            self._put(report.nodeid, "error", msg)
        elif report.when == "setup" and report.skipped:
            self._put(report.nodeid, "skipped", msg)

    def pytest_collectreport(self, report):
        if report.failed:
            self._put(report.nodeid or "<collection>", "error", str(report.longrepr)[-2000:])

    def pytest_sessionfinish(self, session, exitstatus):
        outcomes = [{"name": n, "outcome": o, "message": m} for n, (o, m) in self.results.items()]
        import json

        data = json.dumps({"done": True, "nonce": self.nonce, "exitstatus": int(exitstatus), "outcomes": outcomes}) + "\n"
        fd = os.dup(3)  # fd 3 is the report pipe (a copy, so closing sys-level fds in tests does not lose it)
        try:
            os.write(fd, data.encode())
        finally:
            os.close(fd)


# Plugins a grading run never needs (~12% of a warm run's CPU, measured); fixtures such as tmp_path, tmpdir, capsys,
# caplog and monkeypatch, unittest-style tests and warnings capture stay available.
_SLIM = ("doctest", "junitxml", "pastebin", "faulthandler", "stepwise", "setuponly", "setupplan",
         "unraisableexception", "threadexception")


def pytest_args(rootdir, paths, collect_only=False, conftest=False):
    """``conftest``: the hidden tests ship their own conftest.py files (trusted: only the grader dir is in their
    path, so a conftest.py the agent writes in the workspace is never loaded either way)."""
    # --continue-on-collection-errors: one hidden file that cannot be collected fails its own tests, not every file;
    # a task's own conftest files may use the doctest plugin's fixtures (doctest_namespace)
    slim = [x for name in _SLIM if not (conftest and name == "doctest") for x in ("-p", "no:" + name)]
    args = ["-p", "no:cacheprovider", *([] if conftest else ["--noconftest"]), *slim, "-q", "-rN",
            "--continue-on-collection-errors",
            "--rootdir", rootdir, "-c", os.path.join(rootdir, "pytest.ini")]
    if collect_only:
        args.append("--co")
    return args + list(paths)


def is_stdlib_path(path):
    """Whether a ``sys.path`` entry holds the standard library (not site-/dist-packages, not our runtime)."""
    base = os.path.realpath(sys.base_prefix)
    real = os.path.realpath(path) if path else ""
    return real.startswith(base + os.sep) and "-packages" not in real


def pytest_child(req, cfg, set_limits, finish, exit_code_of):
    """Run pytest on the hidden files (in a child forked by the worker); never returns."""
    import signal

    set_limits(req["limits"])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.argv = ["pytest"]
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # no pytest11 entry points (a planted *.dist-info)
    # the standard library first (a planted json.py never shadows it), then the workspace (the project under test
    # wins over a same-named package the sandbox's Python happens to have, e.g. six), then the rest
    rest = [p for p in sys.path if p not in ("", cfg["workspace"])]
    sys.path[:] = [p for p in rest if is_stdlib_path(p)] + [cfg["workspace"]] + [p for p in rest if not is_stdlib_path(p)]
    os.set_inheritable(3, False)  # the report pipe never reaches a process the tests start
    code = 3
    try:
        if req.get("link"):  # the agent's modules run in another sandbox; only plain data comes back
            import time

            sys.path.insert(0, cfg["rt"])
            import grader_link

            sys.path.remove(cfg["rt"])

            timeout = float(req.get("timeout", 10.0))
            grader_link.install(req["link"], cfg["workspace"], time.monotonic() + timeout - min(2.0, timeout / 5))
        if req.get("plain"):  # plain def test_*() files (decided on the host): import them and call the tests
            code = worker_plain.run_plain(cfg["grader"], req["files"], req.get("nonce"))
        else:
            import pytest

            paths = [os.path.join(cfg["grader"], f) for f in req["files"]]
            code = int(pytest.main(pytest_args(cfg["grader"], paths, conftest=bool(req.get("conftest"))),
                                   plugins=[_Reporter(req.get("nonce"))]))
    except SystemExit as exc:
        code = exit_code_of(exc)
    except BaseException:
        import traceback

        traceback.print_exc()
    finish(code)


def warm_pytest(cfg):
    """Import pytest and run one collection, so that later runs skip ~400 ms of imports."""
    import pytest

    warm = cfg["warm_dir"]
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    devnull = os.open(os.devnull, os.O_WRONLY)
    saved = os.dup(1), os.dup(2)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    try:
        pytest.main(pytest_args(warm, [warm], collect_only=True))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)
    for name in [m for m in sys.modules if m.startswith("test_sandgym_warmup")]:
        del sys.modules[name]
    sys.path[:] = [p for p in sys.path if p != warm]
