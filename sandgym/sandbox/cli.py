"""``sandgym sandbox ...`` commands (heavy imports stay inside the handlers)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from sandgym.sandbox.check import run_check


def add_commands(subparsers: Any) -> None:
    p = subparsers.add_parser("sandbox", help="inspect the code-execution sandbox")
    sub = p.add_subparsers(dest="sandbox_command", metavar="SUBCOMMAND")
    check = sub.add_parser("check", help="run isolation probes and measure latency; non-zero exit if any leaks")
    check.add_argument("--backend", default="local", help="local | unsafe-local | e2b | auto (default: local)")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.add_argument("--no-latency", action="store_true", help="skip the latency measurements")
    check.set_defaults(func=_check)
    p.set_defaults(func=lambda args: (p.print_help(), 0)[1])


def _check(args: argparse.Namespace) -> int:
    report = run_check(args.backend, latency=not args.no_latency)
    if args.json:
        print(json.dumps({"backend": report.backend, "contained": report.contained, "probes": dict(report.probes),
                          "latency_ms": dict(report.latency_ms), "notes": list(report.notes)}, indent=2))
    else:
        print(f"backend: {report.backend}")
        for name, ok in report.probes.items():
            print(f"  {'contained' if ok else 'LEAKED   '}  {name}")
        for name, ms in report.latency_ms.items():
            print(f"  latency {name}: {ms:.1f} ms")
        for note in report.notes:
            print(f"  note: {note}")
        print("isolation: OK" if report.contained else "isolation: NOT CONTAINED")
    return 0 if report.contained else 1
