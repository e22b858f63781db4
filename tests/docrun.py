"""Running the doc blocks: one working directory per document, documents side by side on a few threads.

Each document's blocks run in order in its own directory (linking the repository's examples/, tests/, bench/ and
docs/); a block after a failed one is not run. Documents are independent, so ``workers`` of them run at once
(most of a block's time is a fresh interpreter importing its libraries, on one core). Every block runs in its own
process group, killed when it ends: nothing it started in the background outlives it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from tests.docblocks import SHELL, Block, MarkerError

LINKED = ("examples", "tests", "bench", "docs")


@dataclass(frozen=True)
class Result:
    """What happened to one block: ``outcome`` is ``passed``, ``failed`` or ``skipped``."""

    outcome: str
    message: str = ""
    seconds: float = 0.0


def block_env() -> dict[str, str]:
    """The environment of every block: the venv's bin first on PATH, the Hugging Face hub offline."""
    bin_dir = str(Path(sys.executable).parent)
    return dict(os.environ, PATH=os.pathsep.join([bin_dir, os.environ.get("PATH", "")]),
                VIRTUAL_ENV=str(Path(bin_dir).parent), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                PYTHONUNBUFFERED="1")


def argv(block: Block, text: str) -> list[str]:
    """bash -euo pipefail for shell blocks (a console block runs its ``$ `` lines), the venv's python otherwise."""
    if block.lang in SHELL:
        if block.lang == "console":
            prompts = [line[2:] for line in text.splitlines() if line.startswith("$ ")]
            text = "\n".join(prompts) + "\n" if prompts else text
        return ["bash", "-euo", "pipefail", "-c", text]
    return [sys.executable, "-c", text]


def numbered(text: str) -> str:
    return "\n".join(f"{i:4d}  {line}" for i, line in enumerate(text.splitlines(), 1))


class DocRunner:
    """Runs the given blocks, by document, on ``workers`` threads; ``result(block)`` waits for one block."""

    def __init__(self, repo: Path, root: Path, blocks: Sequence[Block], values: Mapping[str, str],
                 *, workers: int = 2, timeout_s: float = 240) -> None:
        self.repo, self.root, self.values, self.timeout_s = repo, root, dict(values), timeout_s
        self.futures: dict[str, Future[Result]] = {b.id: Future() for b in blocks}
        self.dirs: dict[str, Path] = {}
        self._by_doc: dict[str, list[Block]] = {}
        for b in blocks:
            self._by_doc.setdefault(b.doc, []).append(b)
        self._queue = list(self._by_doc)
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen[bytes]] = set()
        self._stopped = False
        self._threads = [threading.Thread(target=self._work, daemon=True, name=f"doc-test-{i}")
                         for i in range(max(1, min(workers, len(self._queue))))]
        for t in self._threads:
            t.start()

    def result(self, block: Block) -> Result:
        return self.futures[block.id].result()

    def stop(self) -> None:
        """Stop starting blocks and kill the running ones (at the end of the session, or on an interrupt)."""
        with self._lock:
            self._stopped = True
            running = list(self._running)
        for proc in running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

    def workdir(self, doc: str) -> Path:
        d = self.root / doc.replace("/", "__").removesuffix(".md")
        d.mkdir(parents=True, exist_ok=True)
        for name in LINKED:
            if not (d / name).exists():
                (d / name).symlink_to(self.repo / name, target_is_directory=True)
        self.dirs[doc] = d
        return d

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    return
                doc = self._queue.pop(0)
            try:
                self._run_doc(doc, self._by_doc[doc])
            except Exception as e:  # a bug here must fail the blocks, not hang the session
                for b in self._by_doc[doc]:
                    if not self.futures[b.id].done():
                        self.futures[b.id].set_result(Result("failed", f"{b.id}: {type(e).__name__}: {e}"))

    def _run_doc(self, doc: str, blocks: list[Block]) -> None:
        cwd, failed = self.workdir(doc), ""
        for b in blocks:
            if failed or self._stopped:
                why = f"an earlier block of {doc} failed ({failed})" if failed else "the session stopped"
                self.futures[b.id].set_result(Result("skipped", why))
                continue
            result = self._run_block(b, cwd)
            if result.outcome == "failed":
                failed = b.id
            self.futures[b.id].set_result(result)

    def _run_block(self, block: Block, cwd: Path) -> Result:
        assert block.marker is not None
        try:
            text = block.command(self.values)
        except MarkerError as e:
            return Result("failed", str(e))
        if block.marker.kind == "file":
            target = cwd / block.marker.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            return Result("passed")
        start = time.monotonic()
        log = cwd.parent / f"{cwd.name}-{block.line}.log"
        status = self._spawn(block, text, cwd, log)
        seconds = time.monotonic() - start
        if status == 0:
            return Result("passed", seconds=seconds)
        why = f"timed out after {self.timeout_s:.0f} s" if status is None else f"exited {status}"
        output = log.read_text(errors="replace")
        return Result("failed", f"{block.id} ({block.lang}) {why} after {seconds:.0f} s in {cwd}\n"
                                f"--- what ran ---\n{numbered(text)}\n--- output (last 8000 characters) ---\n"
                                f"{output[-8000:]}", seconds)

    def _spawn(self, block: Block, text: str, cwd: Path, log: Path) -> int | None:
        with log.open("wb") as out:
            proc = subprocess.Popen(argv(block, text), cwd=cwd, env=block_env(), stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            with self._lock:
                self._running.add(proc)
            try:
                return proc.wait(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                return None
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                with self._lock:
                    self._running.discard(proc)
