"""Sandbox latency, all measured in one run against the floor of a bare ``python3 -I -S -c pass``.

Run: ``python bench/sandbox_latency.py [--n 100] [--json out.json]`` (as root on the CI machine type).
Prints a markdown table for docs/BENCHMARKS.md ("## Sandbox latency").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable

from honest import load_line  # bench/honest.py

from sandgym.sandbox import Limits, LocalSandbox

FLOOR_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
TESTS = {"test_bench.py": "from solution import add\n\ndef test_a():\n    assert add(1, 2) == 3\n\n"
         "def test_b():\n    assert add(0, 0) == 0\n"}


CPU: dict[str, list[float]] = {}
"""In-sandbox CPU ms (user + sys of the sandboxed process, measured by the worker's wait4) per measurement."""


def timed(fn: Callable[[], object], n: int, warmup: int = 3, name: str = "") -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        r = fn()
        out.append((time.perf_counter() - t) * 1000)
        r = getattr(r, "exec", r)
        if name and hasattr(r, "cpu_s"):
            CPU.setdefault(name, []).append(r.cpu_s * 1000)
    return sorted(out)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def check(ok: bool, what: str) -> None:
    if not ok:
        raise SystemExit(f"benchmark run is wrong: {what}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=100, help="repetitions of the fast measurements")
    ap.add_argument("--json", help="also write the numbers to this file")
    ap.add_argument("--nice", type=int, default=0, help="run at this niceness (root may pass e.g. -10 on a busy host)")
    args = ap.parse_args()
    if args.nice:
        os.nice(args.nice)
    n, n_slow = args.n, max(10, args.n // 5)
    start_load = load_line("start")
    res: dict[str, list[float]] = {}

    def floor() -> None:
        p = subprocess.run([FLOOR_PYTHON, "-I", "-S", "-c", "pass"], capture_output=True)
        check(p.returncode == 0, "floor python failed")

    def measure(name: str, fn: Callable[[], object], reps: int, warmup: int = 3) -> None:
        res[name] = timed(fn, reps, warmup, name=name)

    measure("floor: bare python3 -I -S -c pass", floor, n)
    limits = Limits(timeout_s=30)
    with LocalSandbox(limits) as warm, LocalSandbox(limits, warm=False) as cold:
        for sb in (warm, cold):
            sb.write_file("solution.py", "def add(a, b):\n    return a + b\n")
        check(warm.run_python("print(1 + 1)").stdout == "2\n", "warm run_python")
        measure("warm step: run_python('print(1+1)')", lambda: warm.run_python("print(1 + 1)"), n)
        measure("warm step: exec(['true'])", lambda: warm.exec(["true"]), n)
        warm.exec("mkdir -p many && cd many && for i in $(seq 2000); do : > f$i; done")
        measure("warm step: exec(['true']), 2000 files in the workspace", lambda: warm.exec(["true"]), n)
        warm.exec("rm -rf many")
        limits_note = (f"workspace quota {'tmpfs (ENOSPC)' if warm.workspace_quota else 'checked after calls'}, "
                       f"memory {'cgroup ' + warm.memory_cgroup if warm.memory_cgroup else 'per process (RLIMIT_AS)'}")
        measure("warm step: exec('python3 -I -S -c pass')", lambda: warm.exec(["python3", "-I", "-S", "-c", "pass"]),
                n_slow)
        with warm.session() as s:
            measure("session cell: run_code('1+1')", lambda: s.run_code("1 + 1"), n)
        measure("one-shot isolated: run_python('pass')", lambda: cold.run_python("pass"), n_slow)
        measure("one-shot isolated: exec('python3 -I -S -c pass')",
                lambda: cold.exec(["python3", "-I", "-S", "-c", "pass"]), n_slow)
        check(warm.run_tests(TESTS, expected=2).all_passed, "warm pytest")
        check(cold.run_tests(TESTS, expected=2).all_passed, "cold pytest")
        measure("warm pytest: run_tests (2 tests)", lambda: warm.run_tests(TESTS, expected=2), n_slow, 2)
        measure("cold pytest: run_tests in a fresh one-shot bwrap", lambda: cold.run_tests(TESTS, expected=2),
                max(5, n_slow // 2), 1)
        def start() -> None:
            sb = LocalSandbox(limits)
            sb.wait_ready()
            sb.close()

        measure("sandbox start: LocalSandbox() + wait_ready() + close()", start, max(5, n_slow // 2), 1)
    t0 = pct(res["floor: bare python3 -I -S -c pass"], 0.5)
    print(f"# {start_load}; {load_line('end')}; {n} repeats of the fast measurements (p50, p90 and min below)")
    print(f"# {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, nice {args.nice}, "
          f"python {platform.python_version()}, floor python {FLOOR_PYTHON}")
    print(f"# limits per sandbox: {limits_note}")
    print("| measurement | p50 ms | p90 ms | min ms | p50 / floor | in-sandbox CPU p50 ms |")
    print("|---|---|---|---|---|---|")
    for name, xs in res.items():
        cpu = f"{pct(CPU[name], 0.5):.1f}" if CPU.get(name) else "-"
        print(f"| {name} | {pct(xs, 0.5):.1f} | {pct(xs, 0.9):.1f} | {xs[0]:.1f} | {pct(xs, 0.5) / t0:.2f}x | {cpu} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({k: {"p50": pct(v, 0.5), "p90": pct(v, 0.9), "min": v[0]} for k, v in res.items()}, f, indent=2)


if __name__ == "__main__":
    main()
