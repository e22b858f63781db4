"""What the grading boundary costs: hidden tests graded with the solution in its own sandbox (``process``, the
default) against the solution imported into the grader (``in-process``, the old path), alternating in one run.

    python bench/grading_cost.py              # 20 repeats of each, on one coding task per family
    python bench/grading_cost.py --reps 5     # quicker

Prints a Markdown table (docs/BENCHMARKS.md, "Grading cost") with median ms per run_tests call.
"""

from __future__ import annotations

import argparse
import statistics
import time

from honest import load_line, spread  # bench/honest.py

from sandgym.sandbox import LocalSandbox
from sandgym.tasks.registry import load_suite

FAMILIES = ("strings", "lists", "class_spec", "repo_fix", "service_queue")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    print(load_line("start") + f"; {args.reps} repeats per isolation, alternating", flush=True)
    rows = []
    with LocalSandbox() as sb:
        for fam in FAMILIES:
            task = load_suite(f"coding/{fam}:train@1", seed=3)[0]
            for path, text in {**task.files, **task.reference.files}.items():
                sb.write_file(path, text)
            v = task.verifier
            times: dict[str, list[float]] = {"process": [], "in-process": []}
            for i in range(args.reps * 2):
                iso = ("process", "in-process")[i % 2]
                t0 = time.perf_counter()
                rep = sb.run_tests(v.tests, expected=v.expected_tests, timeout=120, isolation=iso)
                times[iso].append((time.perf_counter() - t0) * 1000)
                assert rep.all_passed, (fam, iso, [o for o in rep.outcomes if o.outcome != "passed"][:1])
            p, q = statistics.median(times["process"]), statistics.median(times["in-process"])
            rows.append((fam, v.expected_tests, p, q))
            print(f"{fam}: process {spread(times['process'], '.0f')} ms, in-process "
                  f"{spread(times['in-process'], '.0f')} ms", flush=True)
    print(load_line("end") + "\n")
    print("| family | tests | process (ms) | in-process (ms) | ratio |")
    print("|---|---:|---:|---:|---:|")
    for fam, n, p, q in rows:
        print(f"| {fam} | {n} | {p:.0f} | {q:.0f} | {p / q:.2f} |")


if __name__ == "__main__":
    main()
