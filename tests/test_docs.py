"""Every documented command runs: the fenced blocks of README.md and docs/*.md, as their doc-test markers say.

One test per block marked ``run`` or ``file`` (id ``docs/TASKS.md:120``). The blocks of one document run in
document order in one fresh working directory that links the repository's examples/, tests/, bench/ and docs/;
documents run side by side on ``SANDGYM_DOC_TEST_WORKERS`` threads (default 1), started with the session, beside
the other tests (tests/conftest.py; tests/docrun.py), so most blocks are done when their tests come up. Shell blocks run with ``bash -euo pipefail`` (a ``console`` block runs its ``$ ``
lines), python blocks with the venv's python, each with the venv's bin first on PATH, the Hugging Face hub offline
and a timeout of TIMEOUT_S; a block after a failed one of the same document is skipped. One test per document
fails on every shell/python block without a marker and on every malformed, unknown or stale marker. The marker
convention is in tests/docblocks.py. The terminal summary says how many blocks run and the slowest ones.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.docblocks import FIX, Block, Doc, MarkerError, documents, parse, parse_marker
from tests.docrun import DocRunner

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 240
WORKERS = int(os.environ.get("SANDGYM_DOC_TEST_WORKERS", "1"))
DOCS = [parse(p.read_text(encoding="utf-8"), str(p.relative_to(REPO))) for p in documents(REPO)]
BLOCKS = [b for d in DOCS for b in d.blocks if b.marker and b.marker.kind in ("run", "file")]
SECONDS: dict[str, float] = {}
"""Each block's own run time (a test's duration also counts its wait for the blocks before it)."""


def counts_line(docs: list[Doc]) -> str:
    kinds = [b.marker.kind for d in docs for b in d.blocks if b.marker]
    return (f"doc blocks: {kinds.count('run')} run, {kinds.count('illustrative')} illustrative, "
            f"{kinds.count('file')} written to files, {len(docs)} files")


class _Summary:
    """Adds the count line (per document with -v) and the slowest blocks to pytest's terminal summary."""

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.write_line(counts_line(DOCS))
        if terminalreporter.config.getoption("verbose") > 0:
            for d in DOCS:
                terminalreporter.write_line(f"  {d.path}: {counts_line([d]).split(': ', 1)[1].rsplit(',', 1)[0]}")
        if SECONDS:
            slowest = sorted(SECONDS.items(), key=lambda kv: -kv[1])[:8]
            terminalreporter.write_line(f"doc blocks ran for {sum(SECONDS.values()):.0f} s in all; slowest: "
                                        + ", ".join(f"{k} {v:.1f} s" for k, v in slowest))


@pytest.fixture(scope="module", autouse=True)
def _summary(request: pytest.FixtureRequest) -> None:
    manager = request.config.pluginmanager
    if not manager.has_plugin("sandgym-doc-summary"):
        manager.register(_Summary(), "sandgym-doc-summary")


def selected_blocks(items: list[pytest.Item]) -> list[Block]:
    """The blocks the session's ``test_block`` items ask for, and the blocks before them in their documents."""
    selected = {id(item.callspec.params["block"]) for item in items
                if getattr(item, "function", None) is test_block and hasattr(item, "callspec")}
    last = {b.doc: b.line for b in BLOCKS if id(b) in selected}
    return [b for b in BLOCKS if b.line <= last.get(b.doc, 0)]


def start_runner(blocks: list[Block], tmp_path_factory: pytest.TempPathFactory) -> DocRunner:
    """The blocks, by document, on WORKERS threads (a tiny model built first when a marker names it)."""
    values = {"repo": str(REPO)}
    if any("{tiny_model}" in new for b in blocks if b.marker for _, new in b.marker.replaces):
        from tests.tiny import build_tiny_model_dir

        values["tiny_model"] = str(build_tiny_model_dir(tmp_path_factory.mktemp("doc-tiny-model") / "model"))
    return DocRunner(REPO, tmp_path_factory.mktemp("doc-workdirs"), blocks, values, workers=WORKERS,
                     timeout_s=TIMEOUT_S)


@pytest.mark.timeout(0)  # a block waits for the blocks before it; each one's own run is limited to TIMEOUT_S
@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_block(block: Block, doc_runner: DocRunner) -> None:
    result = doc_runner.result(block)
    SECONDS[block.id] = result.seconds
    if result.outcome == "skipped":
        pytest.skip(result.message)
    if result.outcome == "failed":
        pytest.fail(result.message, pytrace=False)


@pytest.mark.parametrize("doc", DOCS, ids=[d.path for d in DOCS])
def test_every_block_is_marked(doc: Doc) -> None:
    problems = [*doc.problems, *doc.stale()]
    problems += [f"{b.id}: a {b.lang} block without a doc-test marker; {FIX}" for b in doc.unmarked()]
    if problems:
        pytest.fail(f"{len(problems)} doc-test marker problem(s) in {doc.path}:\n" + "\n".join(problems),
                    pytrace=False)


SAMPLE = '''# A document

<!-- doc-test: run, replace "--steps 8" with "--steps 1", replace "say \\"hi\\"" with "say {repo}" -->
```bash
sandgym train x.toml --steps 8  # say "hi"
```

<!-- doc-test: illustrative (needs a GPU) -->
```python
import vllm
```

<!-- doc-test: file conf/x.toml -->
```toml
a = 1
```

- a list item
  ```sh
  echo unmarked
  ```

```text
plain text needs no marker
```
'''


def test_the_parser_reads_markers_blocks_and_lines() -> None:
    doc = parse(SAMPLE, "X.md")
    assert doc.problems == ()
    assert [(b.line, b.lang, b.marker.kind if b.marker else None) for b in doc.blocks] == [
        (4, "bash", "run"), (9, "python", "illustrative"), (14, "toml", "file"), (19, "sh", None), (23, "text", None)]
    run, illustrative, file, unmarked, _ = doc.blocks
    assert run.command({"repo": "/r"}) == 'sandgym train x.toml --steps 1  # say /r\n'
    assert illustrative.marker and illustrative.marker.reason == "needs a GPU"
    assert file.marker and file.marker.name == "conf/x.toml" and file.text == "a = 1\n"
    assert doc.unmarked() == [unmarked] and unmarked.text == "echo unmarked\n"
    assert counts_line([doc]) == "doc blocks: 1 run, 1 illustrative, 1 written to files, 1 files"


@pytest.mark.parametrize("marker, message", [
    ("<!-- doc-test: runn -->", "unknown doc-test marker 'runn'"),
    ("<!-- doc-test: illustrative -->", "needs its reason"),
    ("<!-- doc-test: illustrative () -->", "needs its reason"),
    ('<!-- doc-test: run, replace "a" by "b" -->', "cannot read"),
    ("<!-- doc-test: file /etc/passwd -->", "relative path"),
    ("<!--doc-test: run -->", "one space, a colon"),
])
def test_a_broken_marker_fails_with_its_line_and_the_fix(marker: str, message: str) -> None:
    doc = parse(f"text\n{marker}\n```bash\necho hi\n```\n", "X.md")
    assert any(p.startswith("X.md:") and message in p for p in doc.problems), doc.problems


def test_a_stale_replace_and_a_stray_marker_fail() -> None:
    doc = parse('<!-- doc-test: run, replace "--steps 8" with "--steps 1" -->\n```bash\ntrain --steps 4\n```\n'
                "\n<!-- doc-test: run -->\n\n```bash\necho hi\n```\n", "X.md")
    assert doc.stale() and "'--steps 8': that text is not in the block" in doc.stale()[0]
    with pytest.raises(MarkerError, match="not in the block"):
        doc.blocks[0].command({})
    assert any("X.md:6: a doc-test marker not followed by a fenced block" in p for p in doc.problems)
    assert [b.line for b in doc.unmarked()] == [8]


def test_marker_grammar() -> None:
    m = parse_marker('run, replace "a \\"b\\"" with "{tiny_model}",replace "x" with ""')
    assert m.replaces == (('a "b"', "{tiny_model}"), ("x", ""))
    assert parse_marker("illustrative (needs E2B_API_KEY (a key))").reason == "needs E2B_API_KEY (a key)"
    with pytest.raises(MarkerError, match="empty OLD"):
        parse_marker('run, replace "" with "x"')
