"""The stack families checked over many tasks, and what their grading costs: for every task, the untouched workspace
(noop), the reference (oracle) and the naive fix graded in one local sandbox, in that order.

    python bench/stack_families.py              # 8 tasks per family and split (levels 1-4 twice)
    python bench/stack_families.py --per-split 2 --families service_leak

A task counts as solved when every hidden test passes; the naive fix counts as caught when it passes every probe
(what the visible tests check) and fails one of the tests its task names (``metadata["caught_by"]``). Prints a
Markdown table (docs/TASKS.md counts, docs/BENCHMARKS.md grading cost) and the load before and after.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from honest import load_line, spread  # bench/honest.py

from sandgym.sandbox import LocalSandbox
from sandgym.tasks.stack import measured_signals
from sandgym.tasks.suites import get_family, suite_members


def grade(sb: LocalSandbox, task, files: dict[str, str]) -> tuple[dict[str, str], float, dict[str, float]]:
    sb.exec("find . -mindepth 1 -delete")
    for path, text in {**task.files, **files}.items():
        sb.write_file(path, text)
    v = task.verifier
    t0 = time.perf_counter()
    report = sb.run_tests(v.tests, expected=v.expected_tests, timeout=120, isolation=v.isolation)
    seconds = time.perf_counter() - t0
    by_name = {o.name.rsplit("::", 1)[-1]: o.outcome for o in report.outcomes if o.outcome != "skipped"}
    if report.passed < v.expected_tests:  # a short report: the missing tests failed
        by_name["<missing>"] = "failed"
    return by_name, seconds, measured_signals(report)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-split", type=int, default=8)
    ap.add_argument("--families", default=",".join(f.name for f in suite_members()["coding/stack"]))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    print(load_line("start"), flush=True)
    rows, raw = [], {}
    with LocalSandbox() as sb:
        for name in args.families.split(","):
            fam = get_family("coding", name)
            tasks = [t for split in ("train", "heldout") for t in fam.make(split, args.per_split, args.seed, None)]
            solved = noop = caught = 0
            oracle_s: list[float] = []
            for task in tasks:
                start, _, _ = grade(sb, task, {})
                ref, seconds, m = grade(sb, task, dict(task.reference.files))
                naive, _, _ = grade(sb, task, dict(task.metadata["naive"]))
                noop += all(o == "passed" for o in start.values())
                ok = all(o == "passed" for o in ref.values())
                solved += ok
                oracle_s.append(seconds)
                probes_pass = all(o == "passed" for n, o in naive.items() if n.startswith("test_probe_"))
                caught += probes_pass and any(naive.get(n) != "passed" for n in task.metadata["caught_by"])
                raw[task.id] = {"reference": ref, "naive": naive, "oracle_s": seconds, "measured": m}
                if not ok:
                    print(f"  {task.id}: reference failed {[n for n, o in ref.items() if o != 'passed']} {m}")
            rows.append((name, len(tasks), solved, noop, caught, oracle_s))
            print(f"{name}: oracle {solved}/{len(tasks)}, noop {noop}/{len(tasks)}, naive caught {caught}/{len(tasks)}, "
                  f"oracle grading {spread(oracle_s, '.2f')} s", flush=True)
    print(load_line("end") + "\n")
    print("| family | tasks | oracle solves | noop solves | naive fix caught | oracle grading, s/episode (median, max) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, n, solved, noop, caught, secs in rows:
        print(f"| {name} | {n} | {solved} | {noop} | {caught} | {statistics.median(secs):.2f}, {max(secs):.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(raw, f, indent=1)


if __name__ == "__main__":
    main()
