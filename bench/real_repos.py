"""``sandgym tasks from-repo`` on popular pure-Python packages from PyPI, then ``sandgym run`` oracle and noop.

    python bench/real_repos.py                       # every package below, into TMPDIR/sandgym-real-repos
    python bench/real_repos.py --only six,toolz      # some of them
    python bench/real_repos.py --work DIR --max-tasks 25

For each package: ``pip download --no-deps --no-binary :all: NAME==VERSION`` (the sdist, which holds the tests),
unpack, ``sandgym tasks from-repo`` with the package's test requirements (``-r``), then ``sandgym run --agent
oracle`` and ``--agent noop`` on the suite. Every command is printed before it runs. Results go to
``WORK/results.json`` and a markdown table (docs/PRIVATE_DATA.md) to ``WORK/table.md``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    style: str
    """What its tests look like (for the table)."""
    requirements: tuple[str, ...] = ()
    """What its tests import beyond the standard library and pytest (``-r``)."""
    max_file_kb: int = 64
    exclude_tests: tuple[str, ...] = ()
    """Test files too big to re-run per candidate (``--exclude-tests``)."""


PACKAGES = (
    Package("six", "1.16.0", "pytest functions, one module"),
    Package("inflection", "0.5.1", "pytest parametrize"),
    Package("toolz", "0.12.1", "pytest functions, doctests"),
    Package("itsdangerous", "2.2.0", "pytest classes, fixtures, src layout, test-module imports", ("freezegun",)),
    Package("cachetools", "8.0.2", "unittest classes, mixins, src layout"),
    Package("parse", "1.22.4", "pytest, doctests (README)"),
    Package("semver", "3.1.2", "pytest, parametrize, fixtures, src layout"),
    Package("markupsafe", "3.0.4", "pytest, parametrized conftest fixture, src layout, C speedups optional"),
    Package("python-slugify", "9.2.0", "unittest classes", ("text-unidecode",)),
    Package("humanize", "4.17.0", "pytest parametrize, src layout, [tool.pytest], locale data", ("freezegun",)),
    Package("packaging", "26.4", "pytest, parametrize, conftest, binary test data", ("pretend", "tomli_w"),
            exclude_tests=("tests/test_version.py", "tests/test_requirements.py")),
    # modules over 64 KB (source is kept whatever its size; only data files are capped)
    Package("tabulate", "0.9.0", "pytest functions, a 95 KB __init__.py, a 107 KB test module, rootdir imports"),
    Package("click", "8.1.8", "pytest, src layout, a 115 KB core.py, CliRunner"),
    Package("wcwidth", "0.2.13", "pytest, generated 359 KB / 101 KB table modules, a 252 KB text file the tests read"),
)
"""packaging's test_version.py (51,524 parametrised cases, 63 s a run) and test_requirements.py (5,417) are left out:
with them (64k cases) the baseline run ended after 90 s without a report. Not here: more-itertools 11.2.1 (unittest,
765 tests with 21k subtests): one run of its test_more.py takes ~60 s on 2 cores, and from-repo runs it about three
times per candidate."""


def sh(cmd: list[str], log: Path, timeout: float) -> tuple[int, str, float]:
    """Run ``cmd`` (printed first), its output appended to ``log``; (exit code, output, seconds)."""
    print("$", shlex.join(cmd), flush=True)
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        code, out = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as exc:
        code, out = 124, f"timed out after {timeout}s: {exc}"
    wall = time.perf_counter() - t
    with log.open("a", encoding="utf-8") as f:
        f.write(f"$ {shlex.join(cmd)}\n{out}\n[exit {code}, {wall:.1f}s]\n")
    return code, out, wall


def fetch(pkg: Package, work: Path) -> Path:
    """The unpacked sdist's root folder (downloaded once)."""
    sdists = work / "sdists"
    sdists.mkdir(parents=True, exist_ok=True)
    stem = f"{pkg.name.replace('-', '_')}-{pkg.version}".lower()
    found = [p for p in sdists.glob("*.tar.gz") if p.name.lower().replace("-", "_").startswith(stem.replace("-", "_"))]
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                        f"{pkg.name}=={pkg.version}", "-d", str(sdists)], check=True)
        found = [p for p in sdists.glob("*.tar.gz") if p.name.lower().replace("-", "_").startswith(stem.replace("-", "_"))]
    src = work / "src"
    with tarfile.open(found[0]) as tar:
        top = tar.getnames()[0].split("/")[0]
        if not (src / top).is_dir():
            tar.extractall(src, filter="data")
    return src / top


def episodes(path: Path) -> tuple[int, int, float]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    mean = sum(r["reward"] for r in rows) / len(rows) if rows else 0.0
    return sum(bool(r["success"]) for r in rows), len(rows), mean


def bench(pkg: Package, work: Path, sandgym: str, max_tasks: int, seed: int) -> dict[str, Any]:
    root = fetch(pkg, work)
    out = work / "suites" / f"{pkg.name}-{pkg.version}"
    out.mkdir(parents=True, exist_ok=True)
    log = out / "log.txt"
    log.write_text("")
    cmd = [sandgym, "tasks", "from-repo", str(root), "--out", str(out), "--max-tasks", str(max_tasks),
           "--seed", str(seed), "--max-file-kb", str(pkg.max_file_kb)]
    for req in pkg.requirements:
        cmd += ["-r", req]
    for pattern in pkg.exclude_tests:
        cmd += ["--exclude-tests", pattern]
    code, text, wall = sh(cmd, log, timeout=3600)
    commit = subprocess.run(["git", "-C", str(Path(__file__).parent), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    row: dict[str, Any] = {"package": f"{pkg.name} {pkg.version}", "style": pkg.style, "commit": commit,
                           "requirements": list(pkg.requirements), "from_repo_exit": code, "from_repo_s": round(wall),
                           "commands": [shlex.join(cmd)]}
    report_path = out / "from_repo_report.json"
    if not report_path.exists():
        row["error"] = text.strip().splitlines()[-1] if text.strip() else "no output"
        return row
    report = json.loads(report_path.read_text())
    tasks = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines() if line.strip()]
    row.update(baseline={k: report["baseline"].get(k) for k in ("collected", "passed", "wall_s")},
               made=report["made"], made_by_kind=report["made_by_kind"], made_by_split=report["made_by_split"],
               discarded_by_reason=report["discarded_by_reason"],
               kinds_by_split=dict(Counter(f"{t['metadata']['kind']}:{t['split']}" for t in tasks)),
               pytest_config=(report["baseline"].get("pytest_config") or {}).get("source"),
               failures_by_reason=report["baseline"].get("failures_by_reason", {}),
               collection_errors=report["baseline"].get("collection_errors", []))
    for agent in ("oracle", "noop"):
        if not tasks:
            break
        rcmd = [sandgym, "run", "--tasks", str(out / "tasks.jsonl"), "--agent", agent, "--no-progress",
                "--out", str(out / f"{agent}.jsonl")]
        (out / f"{agent}.jsonl").unlink(missing_ok=True)
        _, _, rwall = sh(rcmd, log, timeout=3600)
        solved, n, mean = episodes(out / f"{agent}.jsonl")
        row[agent] = {"solved": solved, "episodes": n, "mean_reward": round(mean, 3), "wall_s": round(rwall)}
        row["commands"].append(shlex.join(rcmd))
    return row


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| package | tests (style, -r) | baseline passed/collected | made (re-impl / bug fix) | train / heldout "
            "| discarded by reason | oracle | noop (mean reward) | from-repo time |\n|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        if "baseline" not in r:
            lines.append(f"| {r['package']} | {r['style']} | - | 0 | - | {r.get('error', '')} | - | - | - |")
            continue
        b, k, s = r["baseline"], r["made_by_kind"], r["made_by_split"]
        reasons = ", ".join(f"{n} {c}" for n, c in sorted(r["discarded_by_reason"].items(), key=lambda x: -x[1]))
        reqs = f"; -r {' '.join(r['requirements'])}" if r["requirements"] else ""
        o, n = r.get("oracle"), r.get("noop")
        oracle = f"{o['solved']}/{o['episodes']}" if o else "-"
        noop = f"{n['solved']}/{n['episodes']} ({n['mean_reward']:.2f})" if n else "-"
        lines.append(f"| {r['package']} | {r['style']}{reqs} | {b['passed']}/{b['collected']} | {r['made']} "
                     f"({k.get('reimplement', 0)} / {k.get('bugfix', 0)}) | {s.get('train', 0)} / "
                     f"{s.get('heldout', 0)} | {reasons} | {oracle} | {noop} | {r['from_repo_s']} s |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "sandgym-real-repos"),
                    help="downloads, suites, results (outside the repo)")
    ap.add_argument("--only", default="", help="comma list of package names (default: all)")
    ap.add_argument("--max-tasks", type=int, default=24, help="--max-tasks of each from-repo run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sandgym", default=str(Path(sys.executable).parent / "sandgym"), help="the sandgym command")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    only = {n.strip() for n in args.only.split(",") if n.strip()}
    results_path = work / "results.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    for pkg in PACKAGES:
        if only and pkg.name not in only:
            continue
        row = bench(pkg, work, args.sandgym, args.max_tasks, args.seed)
        results[pkg.name] = row
        results_path.write_text(json.dumps(results, indent=2) + "\n")
        print(json.dumps({k: row.get(k) for k in ("package", "baseline", "made", "made_by_kind",
                                                    "discarded_by_reason", "oracle", "noop")}), flush=True)
    ordered = [results[p.name] for p in PACKAGES if p.name in results]
    (work / "table.md").write_text(table(ordered))
    print(table(ordered))


if __name__ == "__main__":
    main()
