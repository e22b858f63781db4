"""Long-context families: ``needle``, ``multihop``, ``tracking``, ``aggregation`` (unseen) and ``constraints``
(unseen). Document length is a parameter (``tokens``, ~4 characters per token); by default difficulty 1..4 gives
about 1K, 4K, 16K and 64K tokens. Short documents are inline in the prompt (``metadata["placement"] ==
"inline"``); longer ones live only in a workspace file (``"file"``), to be paged with ``read_file`` or ``grep``.
Train and heldout instances draw names from disjoint pools.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from sandgym.errors import TaskError
from sandgym.tasks.suites.base import FamilySpec, check_args, level, rng_for, task_id
from sandgym.tasks.task import Reference, Task, TaskLimits, Verifier

CHARS_PER_TOKEN = 4
TOKENS_BY_DIFFICULTY = {1: 1000, 2: 4000, 3: 16000, 4: 64000}
INLINE_MAX_TOKENS = 1500
"""Documents up to this size are inline by default; larger ones are workspace files."""

_POOLS = {
    "service": ["auth", "billing", "catalog", "checkout", "gateway", "inventory", "ledger", "mailer", "notifier", "orders", "payments", "profile", "ranking", "search", "shipping", "storage", "tracker", "uploads", "metrics", "scheduler"],
    "team": ["apollo", "borealis", "cygnus", "draco", "eridanus", "fornax", "gemini", "hydra", "indus", "lyra", "mensa", "norma", "orion", "pavo"],
    "db": ["amber", "basalt", "cobalt", "dolomite", "emerald", "flint", "garnet", "hematite", "jasper", "kyanite", "lapis", "malachite"],
    "var": ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta", "rho", "tau", "zeta", "lambda"],
    "region": ["north", "south", "east", "west", "central", "coastal", "highland", "island", "lowland", "metro"],
    "vendor": ["acme", "bolt", "crest", "dyna", "ember", "flux", "grove", "helix", "ionic", "jolt", "kilo", "lumen", "nova", "optic"],
}


def pool(kind: str, split: str) -> list[str]:
    """Names of ``kind`` usable by ``split`` (train takes even positions, heldout odd: disjoint)."""
    names = _POOLS[kind]
    return names[0::2] if split == "train" else names[1::2]


def _filler_line(rng: random.Random, n: int, services: list[str]) -> str:
    svc = rng.choice(services)
    kind = rng.random()
    ts = f"2024-05-{1 + n // 2000:02d}T{(n // 60) % 24:02d}:{n % 60:02d}:{rng.randint(0, 59):02d}Z"
    if kind < 0.5:
        return f"{ts} INFO {svc}: handled request in {rng.randint(2, 900)}ms (status {rng.choice([200, 201, 204])})"
    if kind < 0.8:
        return f"{ts} DEBUG {svc}: cache {rng.choice(['hit', 'miss'])} for key k{rng.randint(1000, 99999)}"
    return f"{ts} WARN {svc}: slow upstream response ({rng.randint(900, 5000)}ms), retrying"


def document(rng: random.Random, tokens: int, facts: list[str], split: str, *, early: int = 0) -> list[str]:
    """Log-like filler of about ``tokens`` tokens with ``facts`` inserted in order at random depths.

    The first ``early`` facts go into the first tenth of the document (for constraints stated early).
    """
    services = pool("service", split)
    target = tokens * CHARS_PER_TOKEN - sum(len(f) + 1 for f in facts)
    lines: list[str] = []
    size = 0
    while size < target:
        line = _filler_line(rng, len(lines), services)
        lines.append(line)
        size += len(line) + 1
    n = max(len(lines), 1)
    head = n // 10
    slots = sorted(rng.randint(0, head) for _ in range(early))
    slots += sorted(rng.randint(head + 1, n) for _ in range(len(facts) - early))
    for offset, (slot, fact) in enumerate(zip(slots, facts, strict=True)):
        lines.insert(slot + offset, fact)
    return lines


def document_prompt(intro: str, question: str, lines: list[str], placement: str, path: str, *,
                    owner: str) -> tuple[str, dict[str, str], dict[str, Any]]:
    """(prompt, workspace files, metadata) of a question about a document of ``lines``: inline in the prompt, or
    only in the workspace file ``path`` to be read in ranges or searched (every long-context task, built-in or
    imported, is asked alike). ``owner`` names the family or source in errors."""
    if placement not in ("inline", "file"):
        raise TaskError(f"{owner}: placement={placement!r} is not one of ('inline', 'file')")
    doc = "\n".join(lines) + "\n"
    files: dict[str, str] = {}
    if placement == "inline":
        prompt = (f"Below is {intro}.\n\n<document>\n{doc}</document>\n\nQuestion: {question}\n"
                  "Submit only the answer.")
    else:
        files = {path: doc}
        prompt = (f"The document, {intro}, is the workspace file `{path}` ({len(lines)} lines, about "
                  f"{len(doc) // CHARS_PER_TOKEN} tokens); it is not shown here: read it in line ranges with "
                  f"read_file or search it with grep.\n\nQuestion: {question}\nSubmit only the answer.")
    return prompt, files, {"placement": placement, "tokens": len(doc) // CHARS_PER_TOKEN, "document": path}


def lc_task(
    *, family: str, split: str, seed: int, difficulty: int, index: int, unseen: bool, intro: str, question: str,
    lines: list[str], answer: str, matcher: str, tokens: int, placement: str | None, path: str,
    metadata: dict[str, Any] | None = None, explicit_tokens: int | None = None,
) -> Task:
    """Assemble a long-context Task with a ``match`` verifier, inline or in a workspace file."""
    explicit_placement = placement
    placement = placement or ("inline" if tokens <= INLINE_MAX_TOKENS else "file")
    prompt, files, meta = document_prompt(intro, question, lines, placement, path, owner=family)
    meta["seed"] = seed
    meta.update(metadata or {})
    if placement == "inline":  # nothing to search: the evidence lines are in the prompt
        meta.pop("evidence", None)
    # A document length or placement asked for explicitly is part of the id: the same question at 1K and 8K tokens
    # are two tasks (an evaluation over several lengths keeps every one), while the default ids stay as they were.
    chosen = "".join(f"-{k}{v}" for k, v in (("t", explicit_tokens), ("", explicit_placement)) if v)
    return Task(
        id=task_id("long_context", family, split, seed, difficulty, index) + chosen,
        domain="long_context", family=family, split=split, prompt=prompt,  # type: ignore[arg-type]
        verifier=Verifier(kind="match", answer=answer, matcher=matcher),  # type: ignore[arg-type]
        files=files, reference=Reference(answer=answer),
        limits=TaskLimits(max_turns=3 if placement == "inline" else 6 + 2 * difficulty),
        difficulty=difficulty, unseen=unseen, metadata=meta,
    )


Builder = Callable[[random.Random, str, int], tuple[str, str, list[str], str, str, int, dict[str, Any]]]
"""(rng, split, tokens) -> (intro, question, facts, answer, matcher, early_facts, metadata); ``intro`` is a noun
phrase naming the document ("a service log")."""


def _needle(rng: random.Random, split: str, tokens: int) -> tuple[str, str, list[str], str, str, int, dict]:
    services = pool("service", split)
    txids = rng.sample(range(10000, 99999), 4)
    codes = [f"E{rng.randint(100, 999)}" for _ in txids]
    facts = [f"2024-05-01T00:00:00Z ERROR {rng.choice(services)}: transaction tx{t} failed with code {c}"
             for t, c in zip(txids, codes, strict=True)]
    rng.shuffle(facts)
    k = rng.randrange(len(txids))
    question = f"Which error code did transaction tx{txids[k]} fail with? (answer like E123)"
    return "a service log", question, facts, codes[k], "normalized", 0, {"needle": f"tx{txids[k]}"}


def _multihop(rng: random.Random, split: str, tokens: int) -> tuple[str, str, list[str], str, str, int, dict]:
    hops = 1 + min(4, max(1, tokens // 4000 + 1))
    names = rng.sample(pool("service", split), min(len(pool("service", split)), hops + 3))
    chain, others = names[: hops], names[hops:]
    dbs = rng.sample(pool("db", split), 1 + len(others))
    facts = [f"NOTE: service {a} forwards all of its requests to service {b}." for a, b in zip(chain, chain[1:], strict=False)]
    facts.append(f"NOTE: service {chain[-1]} stores its data in database {dbs[0]}.")
    facts += [f"NOTE: service {s} stores its data in database {d}." for s, d in zip(others, dbs[1:], strict=True)]
    rng.shuffle(facts)
    question = (f"Start at service {chain[0]} and follow the 'forwards all of its requests' notes until a service "
                "that forwards nowhere. Which database does that service store its data in?")
    return ("a service log with NOTE lines", question, facts, dbs[0], "normalized", 0,
            {"hops": hops, "chain": chain})


def _tracking(rng: random.Random, split: str, tokens: int) -> tuple[str, str, list[str], str, str, int, dict]:
    var, *distract = rng.sample(pool("var", split), 3)
    n_updates = min(40, 4 + tokens // 1000)
    values = {v: rng.randint(0, 20) for v in [var, *distract]}
    facts = [f"SET {v} = {values[v]}" for v in [var, *distract]]
    checkpoints = [{"update": 0, "value": values[var]}]
    for u in range(n_updates):
        v = var if u % 2 == 0 else rng.choice(distract)
        op, x = rng.choice(["+=", "-="]), rng.randint(1, 9)
        values[v] += x if op == "+=" else -x
        facts.append(f"UPDATE {v} {op} {x}")
        if v == var:
            checkpoints.append({"update": len(checkpoints), "value": values[var]})
    question = f"After every SET and UPDATE line in order, what is the final value of {var}?"
    return ("a log with SET and UPDATE lines for several variables", question, facts, str(values[var]),
            "number", 0, {"variable": var, "checkpoints": checkpoints})


def _aggregation(rng: random.Random, split: str, tokens: int) -> tuple[str, str, list[str], str, str, int, dict]:
    regions = pool("region", split)
    region = rng.choice(regions)
    n_records = min(200, 6 + tokens // 400)
    facts, total, count = [], 0, 0
    for r in range(n_records):
        reg, amount, status = rng.choice(regions), rng.randint(1, 99), rng.choice(["paid", "paid", "refunded"])
        facts.append(f"RECORD order #{1000 + r} region={reg} amount={amount} status={status}")
        if reg == region and status == "paid":
            total, count = total + amount, count + 1
    if rng.random() < 0.5:
        question, answer = f"What is the total amount of the paid orders in region {region}?", total
    else:
        question, answer = f"How many paid orders are there in region {region}?", count
    return ("a log with RECORD lines", question, facts, str(answer), "number", 0, {"region": region})


def _constraints(rng: random.Random, split: str, tokens: int) -> tuple[str, str, list[str], str, str, int, dict]:
    regions, vendors = pool("region", split), rng.sample(pool("vendor", split), 5)
    banned, budget = rng.choice(regions), rng.randint(40, 80)
    policy = (f"POLICY: for every purchase decision in this document, never choose a vendor located in region "
              f"{banned}, and never choose an option costing more than {budget}.")
    ratings = rng.sample(range(50, 99), len(vendors))
    options = []
    for j, (v, rating) in enumerate(sorted(zip(vendors, ratings, strict=True), key=lambda p: -p[1])):
        if j == 0:  # the best-rated option breaks the banned-region rule
            reg, cost = banned, rng.randint(10, budget)
        elif j == 1:  # the runner-up is over budget
            reg, cost = rng.choice([r for r in regions if r != banned]), budget + rng.randint(1, 30)
        else:
            reg, cost = rng.choice([r for r in regions if r != banned]), rng.randint(10, budget)
        options.append((v, reg, cost, rating))
    answer = options[2][0]
    shuffled = options[:]
    rng.shuffle(shuffled)
    facts = [policy] + [f"OPTION vendor={v} region={r} cost={c} rating={x}" for v, r, c, x in shuffled]
    question = ("Which vendor should be chosen: the OPTION with the highest rating that respects the POLICY stated "
                "near the start of the document? Answer with the vendor name.")
    return ("a purchasing log", question, facts, answer, "normalized", 1,
            {"banned_region": banned, "budget": budget})


BUILDERS: dict[str, tuple[Builder, bool, str, str]] = {
    "needle": (_needle, False, "retrieve one value (an error code) from a long service log", "logs/service.log"),
    "multihop": (_multihop, False, "follow a chain of 'forwards to' notes, then look up the last hop",
                 "logs/notes.log"),
    "tracking": (_tracking, False, "track a variable through many updates (checkpoints in metadata)",
                 "logs/updates.log"),
    "aggregation": (_aggregation, True, "count or sum over records scattered through a log", "logs/orders.log"),
    "constraints": (_constraints, True, "pick an option respecting a policy stated early in the document",
                    "logs/purchases.log"),
}


def make_family(family: str) -> Callable[..., list[Task]]:
    """The ``make(split, n, seed, difficulty, *, tokens=None, placement=None)`` of a long-context family."""
    build, unseen, _, path = BUILDERS[family]

    def make(split: str, n: int, seed: int, difficulty: int | None, *, tokens: int | None = None,
             placement: str | None = None) -> list[Task]:
        check_args(family, split, n, difficulty)
        if tokens is not None and tokens < 200:
            raise TaskError(f"{family}: tokens={tokens} is too small; use at least 200 (about 800 characters)")
        out = []
        for i in range(n):
            d = level(difficulty, i)
            rng = rng_for(family, split, seed, d, i)
            size = tokens or TOKENS_BY_DIFFICULTY[d]
            intro, question, facts, answer, matcher, early, meta = build(rng, split, size)
            lines = document(rng, size, facts, split, early=early)
            if family == "tracking":  # checkpoints point at the line of each target update
                meta = _with_lines(meta, lines)
            meta = {**meta, "evidence": evidence_lines(family, meta, lines)}
            out.append(lc_task(
                family=family, split=split, seed=seed, difficulty=d, index=i, unseen=unseen, intro=intro,
                question=question, lines=lines, answer=answer, matcher=matcher, tokens=size,
                placement=placement, path=path, metadata=meta, explicit_tokens=tokens,
            ))
        return out

    return make


EVIDENCE: dict[str, Callable[[dict[str, Any]], Callable[[str], bool]]] = {
    "needle": lambda m: lambda line: f"transaction {m['needle']} failed" in line,
    "multihop": lambda m: lambda line: (
        any(line.startswith(f"NOTE: service {s} forwards ") for s in m["chain"][:-1])
        or line.startswith(f"NOTE: service {m['chain'][-1]} stores ")),
    "tracking": lambda m: lambda line: line.startswith((f"SET {m['variable']} ", f"UPDATE {m['variable']} ")),
    "aggregation": lambda m: lambda line: f" region={m['region']} " in line and line.endswith("status=paid"),
    "constraints": lambda m: lambda line: line.startswith(("POLICY: ", "OPTION ")),
}
"""Per family: (task metadata) -> is this document line evidence the answer rests on (``evidence@v1``)."""


def evidence_lines(family: str, meta: dict[str, Any], lines: list[str]) -> list[int]:
    """1-based numbers of the document lines a correct answer rests on (``metadata["evidence"]``)."""
    is_evidence = EVIDENCE[family](meta)
    return [n for n, line in enumerate(lines, 1) if is_evidence(line)]


def _with_lines(meta: dict[str, Any], lines: list[str]) -> dict[str, Any]:
    var = meta["variable"]
    positions = [k + 1 for k, line in enumerate(lines)
                 if line.startswith((f"SET {var} ", f"UPDATE {var} "))]
    checkpoints = [dict(c, line=p) for c, p in zip(meta["checkpoints"], positions, strict=True)]
    return {**meta, "checkpoints": checkpoints}


FAMILIES = [FamilySpec(name, "long_context", desc, unseen, make_family(name))
            for name, (_, unseen, desc, _) in BUILDERS.items()]
