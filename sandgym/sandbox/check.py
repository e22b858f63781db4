"""``sandgym sandbox check``: which isolation probes a backend passes, and what a step costs."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from sandgym.sandbox.factory import make_sandbox, resolve_backend
from sandgym.sandbox.local import LocalSandbox
from sandgym.sandbox.probes import PROBES
from sandgym.sandbox.protocol import IsolationReport, Limits, Sandbox

CHECK_LIMITS = Limits(timeout_s=10, memory_mb=512, max_procs=32, max_file_mb=8, max_output_bytes=64 << 10)
"""Tight limits so that every bounded probe finishes in seconds."""


def _median_ms(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def measure_latency(sb: Sandbox, backend: str, n: int = 20) -> dict[str, float]:
    """Median ms of a warm step, a warm pytest check, and (local only) a one-shot isolated run."""
    test = {"test_check.py": "def test_ok():\n    assert 1 + 1 == 2\n"}
    sb.run_python("print(1)")
    out = {"warm_step": _median_ms(lambda: sb.run_python("print(1 + 1)"), n),
           "warm_exec": _median_ms(lambda: sb.exec(["true"]), n),
           "warm_pytest": _median_ms(lambda: sb.run_tests(test, expected=1), max(3, n // 4))}
    if backend in ("local", "unsafe-local"):
        with LocalSandbox(sb.limits, warm=False, allow_weak_isolation=backend == "unsafe-local") as cold:
            out["oneshot_python"] = _median_ms(lambda: cold.exec(["python3", "-I", "-S", "-c", "pass"]), 5)
    return out


def run_check(backend: str = "local", *, limits: Limits | None = None, latency: bool = True,
              only: Sequence[str] | None = None, **sandbox_kwargs: Any) -> IsolationReport:
    """Run every probe (or those named in ``only``) against a fresh sandbox of ``backend``.

    Raises SandboxError when the backend cannot start at all; ``sandbox_kwargs`` go to ``make_sandbox``.
    """

    name = resolve_backend(backend)
    notes: list[str] = []
    probes: dict[str, bool] = {}
    unknown = set(only or ()) - set(PROBES)
    if unknown:
        raise ValueError(f"unknown probes {sorted(unknown)}; choose from {sorted(PROBES)}")
    with make_sandbox(name, limits or CHECK_LIMITS, **sandbox_kwargs) as sb:
        if getattr(sb, "weak", False):
            notes.append("WEAK ISOLATION: bwrap could not create namespaces; only rlimits + uid drop apply")
        for probe_name, probe in PROBES.items():
            if only is not None and probe_name not in only:
                continue
            try:
                ok, detail = probe(sb)
            except Exception as exc:  # a probe that cannot run is not proof of containment
                ok, detail = False, f"probe failed to run: {exc!r}"
            probes[probe_name] = ok
            notes.append(f"{probe_name}: {detail.splitlines()[0] if detail else ''}")
        lat = measure_latency(sb, name) if latency else {}
    return IsolationReport(backend=name, probes=probes, latency_ms=lat, notes=tuple(notes))
