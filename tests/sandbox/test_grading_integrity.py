"""Regression tests for reward forgeries: each one scored full reward on the old grading path.

The solution now runs in a sandbox of its own (``solution_host.py``) and reaches the tests only as plain data
(``grader_link.py``); the worker is pid 1 and non-dumpable; a reused sandbox is reset to nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from sandgym.sandbox import LocalSandbox

TESTS = {"test_hidden.py": "from solution import add\n\n"
         "def test_one():\n    assert add(1, 2) == 3\n\n"
         "def test_two():\n    assert add(-1, 1) == 0\n\n"
         "def test_truthy():\n    assert add(2, 2)\n"}

ALWAYS_EQUAL = """
class Anything:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __bool__(self): return True
    def __call__(self, *a, **k): return self
    def __hash__(self): return 0
def __getattr__(name): return Anything()
def add(a, b): return Anything()
"""

PATCH_PYTEST = """
import sys
try:
    import _pytest.python, _pytest.runner
    _pytest.python.Function.runtest = lambda self: None
    _pytest.runner.pytest_runtest_makereport = lambda item, call: None
except ImportError:
    pass
for mod in list(sys.modules.values()):
    rep = getattr(mod, "_Reporter", None)
    if rep is not None:
        rep.pytest_runtest_logreport = lambda self, report: None
def add(a, b): return None
"""

FORGE_REPORT = """
import gc, json, os
nonces = [o for o in gc.get_objects() if isinstance(o, str) and len(o) == 32]
names = ["test_hidden.py::test_one", "test_hidden.py::test_two", "test_hidden.py::test_truthy"]
for nonce in nonces[:200] or [""]:
    line = json.dumps({"done": True, "nonce": nonce, "exitstatus": 0,
                       "outcomes": [{"name": n, "outcome": "passed", "message": ""} for n in names]}) + "\\n"
    for fd in range(3, 64):
        try:
            os.write(fd, line.encode())
        except OSError:
            pass
    for path in ["/proc/1/fd/1", "/proc/1/fd/3", "/proc/self/fd/1"]:
        try:
            with open(path, "w") as f:
                f.write(line)
        except OSError:
            pass
def add(a, b): return None
"""

PATCH_BUILTINS = """
import builtins, operator
builtins.isinstance = lambda *a: True
builtins.len = lambda *a: 0
operator.eq = lambda a, b: True
builtins.AssertionError = type("Nope", (Exception,), {})
def add(a, b): return None
"""

READ_HIDDEN = """
import glob, re
SRC = "".join(open(p).read() for p in glob.glob("/.grader/*.py") + glob.glob("/*/test_hidden*.py"))
def add(a, b):
    m = re.search(r"add\\(%r, %r\\) == (.+)" % (a, b), SRC)
    return eval(m.group(1)) if m else None
"""


@pytest.fixture(scope="module")
def sb() -> Iterator[LocalSandbox]:
    box = LocalSandbox()
    yield box
    box.close()


@pytest.mark.parametrize("source", [ALWAYS_EQUAL, PATCH_PYTEST, FORGE_REPORT, PATCH_BUILTINS, READ_HIDDEN],
                         ids=["always-equal", "patched-pytest", "forged-report", "patched-builtins", "read-hidden"])
def test_forgery_earns_nothing(sb: LocalSandbox, source: str) -> None:
    sb.write_file("solution.py", source)
    rep = sb.run_tests(TESTS, expected=3)
    assert rep.passed == 0, [(o.name, o.outcome) for o in rep.outcomes]


def test_honest_solution_still_passes_and_failures_are_explained(sb: LocalSandbox) -> None:
    sb.write_file("solution.py", "def add(a, b):\n    return a + b\n")
    assert sb.run_tests(TESTS, expected=3).passed == 3
    sb.write_file("solution.py", "def add(a, b):\n    return [a, b]\n")  # plain data compares as itself
    rep = sb.run_tests(TESTS, expected=3)
    assert rep.passed == 1 and "assert [1, 2] == 3" in rep.outcomes[0].message


def test_always_equal_object_never_equals_and_has_no_truth_value(sb: LocalSandbox) -> None:
    sb.write_file("solution.py", ALWAYS_EQUAL)
    rep = sb.run_tests(TESTS, expected=3)
    by_name = {o.name.rsplit("::", 1)[-1]: o for o in rep.outcomes}
    assert "truth value" in by_name["test_truthy"].message


def test_semantics_survive_the_boundary(sb: LocalSandbox) -> None:
    """Exceptions (builtin and the solution's own), mutation of arguments, aliasing, classes with state,
    iteration and containment behave as if the test had imported the module itself."""
    sb.write_file("solution.py", """
class Empty(LookupError):
    pass
class Stack:
    def __init__(self): self.items = []
    def push(self, x): self.items.append(x)
    def pop(self):
        if not self.items: raise Empty("empty")
        return self.items.pop()
    def __len__(self): return len(self.items)
    def __iter__(self): return iter(list(self.items))
    def __contains__(self, x): return x in self.items
def drop_negatives(xs):
    xs[:] = [x for x in xs if x >= 0]
    return xs
def pure(xs): return [x for x in xs if x >= 0]
def boom(): raise ValueError("bad value", 3)
""")
    tests = {"test_sem.py": """
import pytest
import solution
from solution import Stack, Empty, drop_negatives, pure, boom

def test_stack():
    s = Stack()
    s.push(1); s.push((2, "x"))
    assert len(s) == 2 and list(s) == [1, (2, "x")] and (2, "x") in s and 5 not in s
    assert s.pop() == (2, "x") and s.items == [1]
    s.pop()
    with pytest.raises(Empty):
        s.pop()
    with pytest.raises(LookupError, match="empty"):
        s.pop()

def test_mutation_and_identity():
    xs = [3, -1, 2]
    out = drop_negatives(xs)
    assert out is xs and xs == [3, 2]
    ys = [1, -2]
    out = pure(ys)
    assert out == [1] and out is not ys and ys == [1, -2]

def test_exception_args():
    with pytest.raises(ValueError) as info:
        boom()
    assert info.value.args == ("bad value", 3)

def test_module_attribute():
    solution.LIMIT = 7
    assert solution.LIMIT == 7
"""}
    rep = sb.run_tests(tests, expected=4)
    assert rep.passed == 4, [(o.name, o.message[-400:]) for o in rep.outcomes if o.outcome != "passed"]


def test_solution_that_exits_or_hangs_keeps_the_report(sb: LocalSandbox) -> None:
    sb.write_file("solution.py", "import os\ndef add(a, b):\n    if a < 0:\n        os._exit(0)\n    return a + b\n")
    rep = sb.run_tests(TESTS, expected=3)
    assert rep.report_found and rep.passed == 1  # test_one passed before the exit; the rest did not
    sb.write_file("solution.py", "import time\ndef add(a, b):\n    if a < 0:\n        time.sleep(60)\n    return a + b\n")
    t0 = time.monotonic()
    rep = sb.run_tests(TESTS, expected=3, timeout=6)
    assert rep.report_found and rep.passed == 1 and time.monotonic() - t0 < 15


def test_ptrace_of_every_process_fails(sb: LocalSandbox) -> None:
    code = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nok = []\n"
            "for p in os.listdir('/proc'):\n    if p.isdigit() and int(p) != os.getpid():\n"
            "        if libc.ptrace(16, int(p), 0, 0) == 0: ok.append(p)\nprint('attached', ok)")
    out = sb.run_python(code).stdout
    assert "attached []" in out, out


def test_reset_leaves_nothing_for_the_next_episode() -> None:
    box = LocalSandbox()
    try:
        box.write_file("solution.py", "x = 1\n")
        assert box.exec("echo leak > /tmp/leak; echo leak > $HOME/leak2; (setsid sleep 300 &); true").exit_code == 0
        sess = box.session()
        sess.run_code("import threading, time\nthreading.Thread(target=lambda: time.sleep(300), daemon=True).start()")
        box.reset()
        assert box.list_files() == []
        r = box.exec("ls -A /tmp $HOME; ps -eo pid,comm --no-headers")
        assert "leak" not in r.stdout and "sleep" not in r.stdout, r
        assert box.run_tests(TESTS, expected=3).passed == 0  # still a working sandbox
    finally:
        box.close()


PLANT = ("import os\nfor d in ['/', '/dev', '/dev/shm', '/tmp', '/opt', '/workspace']:\n"
         "    open(d.rstrip('/') + '/planted', 'w').write('x')\n"
         "os.makedirs('/tmp/a/b', exist_ok=True); os.chmod('/tmp/a', 0); os.chmod('/tmp', 0o777)\n"
         "os.mkdir('/dev/shm/d'); os.symlink('/etc/passwd', '/opt/link')\nprint('planted')")
LOOK = ("import os\nprint(sorted(p for d in ['/', '/dev', '/dev/shm', '/tmp', '/opt', '/workspace']\n"
        "             for p in os.listdir(d) if p in ('planted', 'a', 'd', 'link')), oct(os.stat('/tmp').st_mode))")


def test_in_place_reset_puts_every_writable_file_system_back() -> None:
    """Keeping the warm worker between episodes (no new bwrap) must leave nothing the agent wrote anywhere."""
    with LocalSandbox() as box:
        if box.uid is None:
            pytest.skip("the in-place reset needs the slot uid (root)")
        assert box.run_python(PLANT).stdout == "planted\n"
        box.reset()
        assert box.in_place_resets == 1  # the worker was kept
        assert box.run_python(LOOK).stdout == "[] 0o40755\n"  # nothing planted left, /tmp's mode as it was
        assert box.run_tests(TESTS, expected=3).passed == 0  # still a working sandbox


def test_a_replaced_system_entry_makes_the_reset_start_a_fresh_worker() -> None:
    """What an unprivileged wipe cannot put back (a swapped /lib link) is never carried over: full reset."""
    with LocalSandbox() as box:
        if box.uid is None:
            pytest.skip("the in-place reset needs the slot uid (root)")
        swap = "import os; os.unlink('/lib'); os.symlink('/tmp', '/lib'); print('swapped')"
        assert box.run_python(swap).stdout == "swapped\n"
        box.reset()
        assert box.in_place_resets == 0
        assert box.exec("readlink /lib").stdout == "usr/lib\n"


def test_the_solutions_namespace_is_put_back_between_episodes_too() -> None:
    """The solution's zygote (one fork per grading) outlives an episode: what the agent's code planted there while
    it was graded is gone after an in-place reset, and no process of it survives."""
    plant = ("import os, subprocess\n"
             "for d in ['/', '/tmp', '/dev/shm']:\n"
             "    open(d.rstrip('/') + '/planted_by_solution', 'w').write('x')\n"
             "subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
             "def add(a, b):\n    return a + b\n")
    look = ("import os\nFOUND = [d for d in ['/', '/tmp', '/dev/shm'] if os.path.exists(d.rstrip('/') + "
            "'/planted_by_solution')]\ndef add(a, b):\n    if FOUND:\n        raise RuntimeError(f'leak {FOUND}')\n"
            "    return a + b\n")
    with LocalSandbox() as box:
        if box.uid is None:
            pytest.skip("the in-place reset needs the slot uid (root)")
        box.write_file("solution.py", plant)
        assert box.run_tests(TESTS, expected=3).passed == 3
        box.reset()
        assert box.in_place_resets == 1
        box.write_file("solution.py", look)
        report = box.run_tests(TESTS, expected=3)
        assert report.passed == 3, [o.message[-200:] for o in report.outcomes]


IPC = '''
import ctypes, ctypes.util, os
libc = ctypes.CDLL(None, use_errno=True)
rt = ctypes.CDLL(ctypes.util.find_library("rt") or "librt.so.1", use_errno=True)
def plant(kind):
    if kind == "shm":
        assert libc.shmget(0x5A17, 4096, 0o1600) >= 0
    else:
        assert rt.mq_open(b"/sandgym_probe", os.O_CREAT | os.O_RDWR, 0o600, None) >= 0
def found():
    return [k for k, ok in (("shm", libc.shmget(0x5A17, 0, 0) >= 0),
                            ("mq", rt.mq_open(b"/sandgym_probe", os.O_RDWR, 0o600, None) >= 0)) if ok]
'''


@pytest.mark.parametrize("which", ["shm", "mq"])
def test_ipc_objects_do_not_outlive_the_episode(which: str) -> None:
    """An exploit regression: System V shared memory and POSIX message queues live in the sandbox's IPC namespace,
    not in any file system, so an in-place reset kept them and one episode could leave data for the next (in the
    agent's namespace and in the solution's). Now a queue is wiped with the rest and a System V object makes the
    reset start fresh: the next episode finds neither."""
    with LocalSandbox() as box:
        box.write_file("ipc.py", IPC + f"plant({which!r})\nprint(found())\n")
        assert box.exec("python3 ipc.py").stdout == f"[{which!r}]\n"
        box.reset()
        box.write_file("ipc.py", IPC + "print(found())\n")
        assert box.exec("python3 ipc.py").stdout == "[]\n"
        # the solution's own namespace, planted while it is graded
        box.write_file("solution.py", IPC + f"plant({which!r})\ndef add(a, b):\n    return a + b\n")
        assert box.run_tests(TESTS, expected=3).passed == 3
        box.reset()
        box.write_file("solution.py", IPC + "LEFT = found()\ndef add(a, b):\n    if LEFT:\n"
                       "        raise RuntimeError(f'left from the last episode: {LEFT}')\n    return a + b\n")
        report = box.run_tests(TESTS, expected=3)
        assert report.passed == 3, [o.message[-200:] for o in report.outcomes]
