"""The import graph of ``sandgym`` follows the layering of docs/ARCHITECTURE.md.

Every import counts, including imports inside functions and under ``TYPE_CHECKING``. Fails on:

- an import from a lower layer to a higher one (the order is ``LAYERS``, bottom first);
- any import between ``train`` and ``evaluate`` (they sit side by side; what both need lives in ``rollout``);
- a cycle between files, or between subpackages (``sandgym.<pkg>``).

``private/`` is split by where its data belongs: task synthesis (``fromrepo``, ``mutations``, ``snapshot``,
``scrub``) with tasks; ``judge``, ``hybrid`` (the judged env wrapper) and ``feedback`` (policies, trajectories)
with agents; ``calibrate`` (loads
policies the way ``sandgym eval`` does) with evaluate; its command registration ``private.cli`` with the CLI.
The package root ``sandgym/__init__.py`` registers the env ids with Gymnasium, so it sits with envs.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "sandgym"

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("configs/errors", ("sandgym.configs", "sandgym.errors", "sandgym.pysyntax")),
    ("sandbox", ("sandgym.sandbox",)),
    ("tasks", ("sandgym.tasks", "sandgym.private.fromrepo", "sandgym.private.snapshot",
               "sandgym.private.scrub", "sandgym.private")),
    ("envs", ("sandgym.envs", "sandgym")),
    ("agents", ("sandgym.agents", "sandgym.private.judge", "sandgym.private.feedback", "sandgym.private.hybrid")),
    ("rollout", ("sandgym.rollout",)),
    ("interop", ("sandgym.interop",)),  # Harbor import, OpenEnv server, verifiers adapter (docs/INTEROP.md)
    ("train | evaluate", ("sandgym.train", "sandgym.evaluate", "sandgym.private.calibrate")),
    ("experiments", ("sandgym.experiments",)),
    ("cli", ("sandgym.cli", "sandgym.__main__", "sandgym.demo", "sandgym.private.cli", "sandgym.docgen")),
)
"""Layers, bottom first; a module belongs to the longest prefix listed (``sandgym`` alone is the package root)."""

SIDE_BY_SIDE = ("sandgym.train", "sandgym.evaluate")

def modules() -> dict[str, Path]:
    out = {}
    for p in sorted(ROOT.rglob("*.py")):
        name = ".".join(p.relative_to(ROOT.parent).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = p
    return out


def imports(mods: dict[str, Path]) -> dict[str, dict[str, int]]:
    """``edges[a][b]`` = the line of the first import of ``b`` in ``a`` (sandgym modules only)."""
    edges: dict[str, dict[str, int]] = defaultdict(dict)
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".")
                    keep = len(base) - node.level + (1 if path.name == "__init__.py" else 0)
                    prefix = ".".join(base[:keep] + ([node.module] if node.module else []))
                else:
                    prefix = node.module or ""
                targets = [prefix, *(f"{prefix}.{a.name}" for a in node.names)]
            else:
                continue
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target.startswith("sandgym") and target != name:
                    edges[name].setdefault(target, node.lineno)
    return edges


def layer(module: str) -> int:
    """Index in ``LAYERS`` of the longest prefix that holds ``module``; -1 for none."""
    best, level = "", -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            hit = module == prefix if prefix == "sandgym" else module == prefix or module.startswith(prefix + ".")
            if hit and len(prefix) > len(best):
                best, level = prefix, i
    return level


def package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    nodes = sorted(set(graph) | {w for ws in graph.values() for w in ws})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def where(mods: dict[str, Path], edges: dict[str, dict[str, int]], a: str, b: str) -> str:
    return f"{mods[a].relative_to(ROOT.parent)}:{edges[a][b]} imports {b}"


def test_every_module_has_a_layer():
    unplaced = [m for m in modules() if layer(m) < 0]
    assert not unplaced, f"modules outside every layer (add them to LAYERS in {__file__}): {unplaced}"


def test_no_import_goes_up_a_layer_or_between_train_and_evaluate():
    mods = modules()
    edges = imports(mods)
    bad = []
    for a, targets in sorted(edges.items()):
        for b in sorted(targets):
            if layer(a) < layer(b):
                bad.append(f"{where(mods, edges, a, b)}: layer {LAYERS[layer(a)][0]!r} imports the higher layer "
                           f"{LAYERS[layer(b)][0]!r}")
            elif {package(a), package(b)} == set(SIDE_BY_SIDE):
                bad.append(f"{where(mods, edges, a, b)}: train and evaluate never import each other (move the "
                           "shared piece to sandgym.rollout, or the user of both to sandgym.experiments)")
    assert not bad, "imports against the layering (docs/ARCHITECTURE.md):\n  " + "\n  ".join(bad)


def test_no_import_cycles_between_files():
    mods = modules()
    edges = imports(mods)
    msgs = []
    for comp in cycles({a: set(bs) for a, bs in edges.items()}):
        inside = set(comp)
        msgs.append(" <-> ".join(comp) + ": " + "; ".join(
            where(mods, edges, a, b) for a in comp for b in sorted(edges[a]) if b in inside))
    assert not msgs, "import cycles between files (move the shared piece into its own module):\n  " + \
        "\n  ".join(msgs)


def test_no_import_cycles_between_packages():
    mods = modules()
    edges = imports(mods)
    graph: dict[str, set[str]] = defaultdict(set)
    for a, bs in edges.items():
        for b in bs:
            pa, pb = package(a), package(b)
            if pa != pb and "sandgym" not in (pa, pb):
                graph[pa].add(pb)
    msgs = []
    for comp in cycles(graph):
        inside = set(comp)
        example: dict[tuple[str, str], str] = {}
        for a in sorted(edges):
            for b in sorted(edges[a]):
                key = (package(a), package(b))
                if key[0] in inside and key[1] in inside and key[0] != key[1] and key not in example:
                    example[key] = where(mods, edges, a, b)
        msgs.append(" <-> ".join(comp) + ": " + "; ".join(example.values()))
    assert not msgs, "import cycles between packages:\n  " + "\n  ".join(msgs)
