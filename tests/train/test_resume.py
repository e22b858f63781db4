"""SIGKILL a training run mid-way, resume it, and check it ends where an uninterrupted run ends."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.train.test_loop import toy_overrides

REPO = Path(__file__).resolve().parents[2]


def _cmd(model_dir: Path, out: Path, *extra: str) -> list[str]:
    sets = toy_overrides(model_dir, out, **{"optim.steps": 6, "checkpoint.every": 2, "optim.lr": 0.01})
    return [sys.executable, "-m", "sandgym", "train", *[a for s in sets for a in ("--set", s)], *extra]


def _metrics(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]


def test_sigkill_then_resume_matches_uninterrupted_run(tiny_model_dir, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    ref, run = tmp_path / "ref", tmp_path / "killed"
    # the uninterrupted reference run goes beside the run to kill (two processes: one core each)
    ref_log = (tmp_path / "ref.log").open("wb")
    reference = subprocess.Popen(_cmd(tiny_model_dir, ref), cwd=REPO, env=env, stdout=ref_log,
                                 stderr=subprocess.STDOUT)
    proc = subprocess.Popen(_cmd(tiny_model_dir, run), cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 240
        while not (run / "checkpoints" / "step-000002").is_dir():
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.time() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        reference.wait(timeout=300)
    finally:
        for p in (proc, reference):
            if p.poll() is None:
                p.kill()
                p.wait()
        ref_log.close()
    assert reference.returncode == 0, (tmp_path / "ref.log").read_text(errors="replace")[-2000:]
    assert not (run / "checkpoints" / "step-000006").exists()

    out = subprocess.run([sys.executable, "-m", "sandgym", "train", "--resume", str(run)], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "resumed from step" in out.stdout
    got, want = _metrics(run), _metrics(ref)
    assert [m["step"] for m in got] == [1, 2, 3, 4, 5, 6]  # every step once: none lost, none repeated
    assert [m["data/batch_hash"] for m in got] == [m["data/batch_hash"] for m in want]  # same data order
    assert (run / "checkpoints" / "step-000006" / "adapter_model.safetensors").is_file()
    assert len(list((run / "checkpoints").glob("step-*"))) <= 3  # keep_last


def test_print_config_and_bad_override(tmp_path, capsys):
    from sandgym.cli import main

    assert main(["train", "--print-config", "--set", "optim.lr=1e-4"]) == 0
    assert "lr = 0.0001" in capsys.readouterr().out
    assert main(["train", "--set", "optim.lrr=1"]) == 2
    err = capsys.readouterr().err
    assert "optim.lrr" in err and "did you mean 'lr'" in err
