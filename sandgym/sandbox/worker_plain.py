"""Run plain hidden test files without pytest (``plain_tests.py`` decided they are plain), in the worker's child.

Runs INSIDE the sandbox, in the child the worker forked for a ``pytest`` request marked ``plain``: after the same
limits, ``sys.path`` order and grader link as a pytest run. Each file is imported as its module (the grader dir
first on the path, as pytest's ``prepend`` import mode puts it), then each module-level ``test*`` function is
called in definition order. Outcomes and the report line on fd 3 have the pytest run's shape:
``file.py::test_name`` passed or failed (any exception), ``file.py`` an error when the module cannot be imported.
"""

import os
import sys


def _message(exc, path):
    """A failure as pytest reports it: the failing line of the test file (``>``) and the error (``E``), then the
    whole traceback (chained exceptions and notes included: "raised in the solution's process" among them)."""
    import linecache
    import traceback

    tb, frame_line = exc.__traceback__, None
    while tb is not None:  # the deepest frame in the test file: the test's own failing line
        if tb.tb_frame.f_code.co_filename == path:
            frame_line = (tb.tb_lineno, tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    text = str(exc)
    head = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    lines = []
    if frame_line is not None:
        lineno, func = frame_line
        lines.append(f"{os.path.basename(path)}:{lineno}: in {func}")
        lines.append(">       " + linecache.getline(path, lineno).strip())
    lines += ["E       " + ln for ln in head.splitlines() or [head]]
    header = "\n".join(lines)[:1000]
    full = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return header + "\n\n" + full[-(2000 - len(header)):]


def _load(name, path):
    """The module of a test file, its asserts rewritten as pytest rewrites them (same failure messages)."""
    import ast
    import importlib.util

    from _pytest.assertion.rewrite import rewrite_asserts  # pytest is imported in the warm worker already

    with open(path, "rb") as f:
        source = f.read()
    tree = ast.parse(source, filename=path)
    rewrite_asserts(tree, source, path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    exec(compile(tree, path, "exec", dont_inherit=True), module.__dict__)
    return module


def run_plain(grader, files, nonce):
    """Import and run every file; the report line goes to fd 3. Returns the pytest-like exit status."""
    import json

    sys.path.insert(0, grader)
    results, failed = [], False
    for name in files:
        path = os.path.join(grader, name)
        module_name = name[:-3].replace("/", ".")
        try:
            module = _load(module_name, path)
        except BaseException as exc:  # noqa: BLE001 - any failure at import is this file's collection error
            if isinstance(exc, KeyboardInterrupt):
                raise
            results.append({"name": name, "outcome": "error", "message": _message(exc, path)})
            failed = True
            continue
        tests = [(k, v) for k, v in vars(module).items()
                 if k.startswith("test") and callable(v) and getattr(v, "__module__", None) == module_name]
        for test_name, fn in tests:
            try:
                fn()
                results.append({"name": f"{name}::{test_name}", "outcome": "passed", "message": ""})
            except BaseException as exc:  # noqa: BLE001 - pytest fails a test on any exception
                if isinstance(exc, KeyboardInterrupt):
                    raise
                results.append({"name": f"{name}::{test_name}", "outcome": "failed",
                                "message": _message(exc, path)})
                failed = True
    data = json.dumps({"done": True, "nonce": nonce, "exitstatus": 1 if failed else 0, "outcomes": results}) + "\n"
    fd = os.dup(3)
    try:
        os.write(fd, data.encode())
    finally:
        os.close(fd)
    return 1 if failed else 0
