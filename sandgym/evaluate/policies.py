"""Turn a POLICY string into a policy the rollout engine drives, and record what it is."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandgym.errors import ConfigError

SCRIPTED = ("oracle", "noop", "random")


@dataclass(frozen=True)
class PolicyInfo:
    """What was evaluated, for the report: kind, base model, adapter directory and a hash of its weights."""

    spec: str
    kind: str
    model: str
    adapter: str | None = None
    adapter_sha256: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


def resolve_adapter_dir(spec: str) -> Path | None:
    """An adapter directory, or the latest checkpoint of a run directory; None when ``spec`` is neither."""
    p = Path(spec)
    if (p / "adapter_config.json").is_file():
        return p
    if (p / "checkpoints").is_dir():
        from sandgym.train.checkpoint import latest_checkpoint

        ckpt = latest_checkpoint(p)
        if ckpt is None:
            raise ConfigError(f"run directory {spec!r} has no complete checkpoint yet; train longer or pass an adapter")
        return ckpt
    return None


def load_policy(spec: str, *, model: str = "smollm2-135m") -> tuple[Any, PolicyInfo]:
    """Build the policy named by ``spec`` (see :class:`~sandgym.evaluate.config.EvalConfig`)."""
    if spec in SCRIPTED:
        from sandgym.agents import scripted
        from sandgym.agents.policy import ScriptedPolicy

        cls = {"oracle": scripted.OracleAgent, "noop": scripted.NoopAgent, "random": scripted.RandomAgent}[spec]
        return ScriptedPolicy(cls), PolicyInfo(spec, "scripted", spec)
    if spec.startswith("openai:"):
        from sandgym.agents.openai import OpenAIPolicy

        url, _, name = spec[len("openai:") :].partition("#")
        return OpenAIPolicy(base_url=url, model=name or "default"), PolicyInfo(spec, "endpoint", name or url)
    from sandgym.agents.hf import HFPolicy

    adapter = resolve_adapter_dir(spec)
    if adapter is not None:
        base = _adapter_base(adapter, default=model)
        policy = HFPolicy(base, lora=None, adapter=str(adapter))
        return policy, PolicyInfo(spec, "adapter", base, str(adapter), _weights_hash(adapter))
    return HFPolicy(spec, lora=None), PolicyInfo(spec, "base", spec)


def _adapter_base(adapter: Path, default: str) -> str:
    """The base model an adapter was trained on: the run's config when present, else the adapter config."""
    for cfg in (adapter.parent.parent / "config.toml", adapter.parent.parent.parent / "config.toml"):
        if cfg.is_file():
            from sandgym.configs import load_toml

            name = load_toml(cfg).get("model", {}).get("name")
            if name:
                return str(name)
    meta = json.loads((adapter / "adapter_config.json").read_text(encoding="utf-8"))
    base = meta.get("base_model_name_or_path")
    return str(base) if base and Path(str(base)).exists() else default


def _weights_hash(adapter: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(adapter.glob("adapter_model.*")):
        h.update(f.read_bytes())
    return h.hexdigest()[:16]
