"""The ``sandgym.verifiers`` entry point: a host-side verifier that uses numpy (a library the sandbox lacks).

It reads ``result.json`` from the final workspace as data (``json.loads``), recomputes the statistics of the task's
numbers with numpy on the host and compares. Nothing the agent wrote is executed here.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from sandgym.envs.host_verifiers import FinalState, VerifierScore, register_verifier

GOLDEN = Path(__file__).parent / "golden"
STATISTICS = {"mean": np.mean, "std": np.std, "median": np.median}


@register_verifier("plugin_example.stats@v1", golden=GOLDEN)
def stats_v1(state: FinalState) -> VerifierScore:
    """Share of the asked statistics in result.json that numpy.isclose accepts (rtol from the task, 1e-6)."""
    data = np.asarray(state.metadata["data"], dtype=float)
    asked = list(state.metadata["statistics"])
    rtol = float(state.metadata.get("rtol", 1e-6))
    try:
        got = json.loads(state.files.get("result.json", ""))
    except ValueError:
        got = None
    components = {"parsed": float(isinstance(got, dict))}
    for name in asked:
        value = got.get(name) if isinstance(got, dict) else None
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and bool(
            np.isclose(value, STATISTICS[name](data), rtol=rtol, atol=1e-9))
        components[name] = float(ok)
    return VerifierScore(float(np.mean([components[n] for n in asked])), components)
