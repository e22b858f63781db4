"""Every documented command runs: the fenced blocks of README.md and docs/*.md, as their doc-test markers say.

One test per block marked ``run`` or ``file`` (id ``docs/TASKS.md:120``), in document order; the blocks of one
document share one fresh working directory that links the repository's examples/, tests/, bench/ and docs/. Shell
blocks run with ``bash -euo pipefail`` (a ``console`` block runs its ``$ `` lines), python blocks with the venv's
python, each with the venv's bin first on PATH, the Hugging Face hub offline and a timeout. A block after a failed
one of the same document is skipped. One test per document fails on every shell/python block without a marker and
on every malformed, unknown or stale marker. The marker convention is in tests/docblocks.py.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docblocks import FIX, SHELL, Block, Doc, MarkerError, documents, parse, parse_marker

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 240
LINKED = ("examples", "tests", "bench", "docs")
DOCS = [parse(p.read_text(encoding="utf-8"), str(p.relative_to(REPO))) for p in documents(REPO)]
BLOCKS = [b for d in DOCS for b in d.blocks if b.marker and b.marker.kind in ("run", "file")]


def counts_line(docs: list[Doc]) -> str:
    kinds = [b.marker.kind for d in docs for b in d.blocks if b.marker]
    return (f"doc blocks: {kinds.count('run')} run, {kinds.count('illustrative')} illustrative, "
            f"{kinds.count('file')} written to files, {len(docs)} files")


class _Counts:
    """Adds the count line to pytest's terminal summary."""

    def __init__(self, docs: list[Doc]) -> None:
        self.docs = docs

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.write_line(counts_line(self.docs))
        if terminalreporter.config.getoption("verbose") > 0:
            for d in self.docs:
                terminalreporter.write_line(f"  {d.path}: {counts_line([d]).split(': ', 1)[1].rsplit(',', 1)[0]}")


@pytest.fixture(scope="module", autouse=True)
def _count_line(request: pytest.FixtureRequest) -> None:
    manager = request.config.pluginmanager
    if not manager.has_plugin("sandgym-doc-counts"):
        manager.register(_Counts(DOCS), "sandgym-doc-counts")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.tiny import build_tiny_model_dir

    return build_tiny_model_dir(tmp_path_factory.mktemp("doc-tiny-model") / "model")


class Workdirs:
    """One working directory per document (made on first use), and the first block of each that failed."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dirs: dict[str, Path] = {}
        self.failed: dict[str, str] = {}

    def get(self, doc: str) -> Path:
        if doc not in self.dirs:
            d = self.root / doc.replace("/", "__").removesuffix(".md")
            d.mkdir(parents=True)
            for name in LINKED:
                (d / name).symlink_to(REPO / name, target_is_directory=True)
            self.dirs[doc] = d
        return self.dirs[doc]


@pytest.fixture(scope="module")
def workdirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workdirs]:
    yield Workdirs(tmp_path_factory.mktemp("doc-workdirs"))


def block_env() -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return dict(os.environ, PATH=os.pathsep.join([bin_dir, os.environ.get("PATH", "")]),
                VIRTUAL_ENV=str(Path(bin_dir).parent), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                PYTHONUNBUFFERED="1")


def argv(block: Block, text: str) -> list[str]:
    if block.lang in SHELL:
        if block.lang == "console":
            prompts = [line[2:] for line in text.splitlines() if line.startswith("$ ")]
            text = "\n".join(prompts) + "\n" if prompts else text
        return ["bash", "-euo", "pipefail", "-c", text]
    return [sys.executable, "-c", text]


def run_block(block: Block, text: str, cwd: Path, log: Path) -> tuple[int | None, str, float]:
    """Run in its own process group (stray background processes are killed after it): (status or None, output, s)."""
    start = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(argv(block, text), cwd=cwd, env=block_env(), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            status: int | None = proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            status = None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return status, log.read_text(errors="replace"), time.monotonic() - start


def numbered(text: str) -> str:
    return "\n".join(f"{i:4d}  {line}" for i, line in enumerate(text.splitlines(), 1))


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_block(block: Block, workdirs: Workdirs, request: pytest.FixtureRequest) -> None:
    if block.doc in workdirs.failed:
        pytest.skip(f"an earlier block of {block.doc} failed ({workdirs.failed[block.doc]})")
    cwd = workdirs.get(block.doc)
    workdirs.failed[block.doc] = block.id  # cleared when this block passes
    assert block.marker is not None
    values = {"repo": str(REPO)}
    if any("{tiny_model}" in new for _, new in block.marker.replaces):
        values["tiny_model"] = str(request.getfixturevalue("tiny_model"))
    try:
        text = block.command(values)
    except MarkerError as e:
        pytest.fail(str(e), pytrace=False)
    if block.marker.kind == "file":
        target = cwd / block.marker.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    else:
        log = cwd.parent / f"{cwd.name}-{block.line}.log"
        status, output, seconds = run_block(block, text, cwd, log)
        if status != 0:
            why = f"timed out after {TIMEOUT_S} s" if status is None else f"exited {status}"
            pytest.fail(f"{block.id} ({block.lang}) {why} after {seconds:.0f} s in {cwd}\n"
                        f"--- what ran ---\n{numbered(text)}\n--- output (last 8000 characters) ---\n"
                        f"{output[-8000:]}", pytrace=False)
    del workdirs.failed[block.doc]


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
