"""Per-turn reward terms for checkable intermediate states (``intermediate@v1``), pure and versioned.

Tasks that declare intermediate states in their metadata (``long_context/tracking``: ``metadata["variable"]`` and
``metadata["checkpoints"]``, a list of ``{"update": K, "value": V, "line": L}`` where K counts the UPDATE lines of
the tracked variable applied so far, 0 being its SET) can earn credit on the turn in which the agent states a new
correct intermediate state. ``ToolEnv(turn_rewards=True)`` calls the term after every turn and reports
``info["turn_reward"]`` (see docs/ENVIRONMENTS.md, "Per-turn terms").

Convention (one, documented): anywhere in its turn text (plain text, a tool call or code) the agent writes
``after update K: <variable> = V`` (case-insensitive; ``:`` optional). Rules of ``intermediate@v1``:

- the first claim naming a checkpoint K decides it, correct or not; later claims for K earn nothing (so guessing
  several values for one checkpoint does not pay);
- a correct first claim earns ``1 / len(checkpoints)``; a wrong one, a repeated one, one for an unknown K or for
  another variable earns 0;
- the credits of an episode therefore sum to (checkpoints matched) / (checkpoints declared), in [0, 1].

Changing any of this means registering ``intermediate@v2`` and adding golden turn cases for it (see
``sandgym/envs/golden/tracking_intermediate_turns.json`` and ``rewards.check_golden``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["CLAIM_RE", "claims", "declares_checkpoints", "intermediate_turn_v1", "claim_hint"]

CLAIM_RE = re.compile(r"after\s+update\s+(\d+)\s*:?\s*([A-Za-z_]\w*)\s*=\s*(-?\d+)", re.IGNORECASE)
"""``after update K: name = V``."""

def declares_checkpoints(metadata: Mapping[str, Any]) -> bool:
    """True when the task exposes checkable intermediate states (a tracked variable with checkpoints)."""
    return bool(metadata.get("variable")) and bool(metadata.get("checkpoints"))


def claims(text: str, variable: str) -> list[tuple[int, int]]:
    """The ``(K, V)`` claims about ``variable`` in ``text``, in order of appearance.

    >>> claims("after update 2: alpha = 7, after update 3: beta = 1", "alpha")
    [(2, 7)]
    """
    return [(int(k), int(v)) for k, name, v in CLAIM_RE.findall(text) if name.lower() == variable.lower()]


def intermediate_turn_v1(text: str, metadata: Mapping[str, Any], decided: Mapping[int, bool]) -> tuple[float, dict[int, bool]]:
    """Credit of one turn: ``1/len(checkpoints)`` per checkpoint this turn decides correctly (see module doc).

    >>> meta = {"variable": "x", "checkpoints": [{"update": 0, "value": 3}, {"update": 1, "value": 5}]}
    >>> intermediate_turn_v1("after update 1: x = 5", meta, {})
    (0.5, {1: True})
    >>> intermediate_turn_v1("after update 1: x = 5", meta, {1: True})
    (0.0, {})
    """
    if not declares_checkpoints(metadata):
        return 0.0, {}
    checkpoints = metadata["checkpoints"]
    expected = {int(c["update"]): int(c["value"]) for c in checkpoints}
    new: dict[int, bool] = {}
    for k, v in claims(text, str(metadata["variable"])):
        if k in expected and k not in decided and k not in new:
            new[k] = v == expected[k]
    return sum(new.values()) / len(checkpoints), new


def claim_hint(metadata: Mapping[str, Any]) -> str:
    """One line for the prompt telling the agent the convention (only for tasks that declare checkpoints)."""
    var = metadata["variable"]
    return (f"Optional: while tracking {var}, state intermediate values as `after update K: {var} = V` (K = number "
            f"of UPDATE lines for {var} applied so far, 0 after its SET); each new correct value earns a small reward; "
            "only the first value you state for each K counts.")
