"""Tiny-budget smoke test of bench/env_throughput.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "env_throughput.py"


def test_env_throughput_quick(tmp_path, local_ok) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(BENCH), "--quick", "--json", str(out)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(out.read_text())
    assert all(t["success_rate"] == 1.0 for t in data["throughput"])
    assert {r["placement"] for r in data["step_costs"]} == {"file", "inline"}
    assert "episodes/s" in proc.stdout
