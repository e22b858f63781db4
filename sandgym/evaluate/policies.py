"""Turn a POLICY string into a policy the rollout engine drives, and record what it is."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandgym.agents import scripted
from sandgym.agents.models import missing_model_dir
from sandgym.agents.openai import OpenAIPolicy
from sandgym.agents.policy import ScriptedPolicy
from sandgym.agents.server_policy import ServerPolicy
from sandgym.configs import load_toml
from sandgym.errors import ConfigError
from sandgym.rollout.checkpoints import adapter_problem, newest_valid_checkpoint

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
    """An adapter directory, or the newest whole checkpoint of a run directory; None when ``spec`` is neither.

    Damaged adapter files (truncated or empty weights, a corrupted ``adapter_config.json``) are a ConfigError
    naming the file; a run directory whose latest checkpoint is damaged falls back to the newest whole one, with
    a warning. Light: nothing heavy is imported, so bad input is reported at once.
    """

    p = Path(spec).expanduser()
    if (p / "adapter_config.json").exists() or (p / "adapter_model.safetensors").exists():
        problem = adapter_problem(p)
        if problem is not None:
            raise ConfigError(f"policy {spec!r}: {problem}; re-save the adapter or point at an intact checkpoint")
        return p
    if (p / "checkpoints").is_dir():
        ckpt, skipped = newest_valid_checkpoint(p)
        for bad, problem in skipped:
            logging.getLogger(__name__).warning("skipping damaged checkpoint %s: %s", bad.name, problem)
        if ckpt is None:
            why = f" ({len(skipped)} damaged: {skipped[0][1]})" if skipped else ""
            raise ConfigError(f"run directory {spec!r} has no complete checkpoint{why}; train longer or pass an adapter")
        if skipped:
            logging.getLogger(__name__).warning("evaluating %s instead", ckpt.name)
        return ckpt
    return None


def check_policy(spec: str) -> None:
    """ConfigError for a POLICY that cannot work, before anything heavy is imported: a missing directory,
    damaged adapter files, a run directory without a whole checkpoint."""
    if spec in SCRIPTED or spec.startswith("openai:"):
        return
    if spec.startswith("server:"):
        if not spec[len("server:"):].startswith(("http://", "https://")):
            raise ConfigError(f"policy {spec!r}: write server:http://HOST:PORT[#MODEL] (a vLLM-compatible server)")
        return
    if resolve_adapter_dir(spec) is not None:
        return

    problem = missing_model_dir(spec)
    if problem is not None:
        raise ConfigError(f"policy {spec!r}: {problem}")


def check_out_dir(out: str | Path) -> None:
    """ConfigError when the output directory of an evaluation is an existing file."""
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise ConfigError(f"--out {str(p)!r} is an existing file, not a directory; pass a directory (it is created "
                          "if missing, and resumed if it holds episodes)")
    for parent in p.parents:
        if parent.exists() and not parent.is_dir():
            raise ConfigError(f"--out {str(p)!r}: {str(parent)!r} is a file, not a directory; choose another path")


def describe_policy(spec: str, *, model: str = "smollm2-135m") -> PolicyInfo:
    """What :func:`load_policy` records for ``spec``, without loading anything heavy (a server policy's model is
    its ``#MODEL``, else its URL: asking the server is left to ``load_policy``). Nothing is checked but damaged
    adapter files (:func:`check_policy` checks the rest)."""
    if spec in SCRIPTED:
        return PolicyInfo(spec, "scripted", spec)
    if spec.startswith("openai:"):
        url, _, name = spec[len("openai:") :].partition("#")
        return PolicyInfo(spec, "endpoint", name or url)
    if spec.startswith("server:"):
        url, _, name = spec[len("server:") :].partition("#")
        return PolicyInfo(spec, "server", name or url)
    adapter = resolve_adapter_dir(spec)
    if adapter is not None:
        return PolicyInfo(spec, "adapter", _adapter_base(adapter, default=model), str(adapter), _weights_hash(adapter))
    return PolicyInfo(spec, "base", spec)


def load_policy(spec: str, *, model: str = "smollm2-135m") -> tuple[Any, PolicyInfo]:
    """Build the policy named by ``spec`` (see :class:`~sandgym.evaluate.config.EvalConfig`)."""
    check_policy(spec)
    info = describe_policy(spec, model=model)
    if info.kind == "scripted":
        cls = {"oracle": scripted.OracleAgent, "noop": scripted.NoopAgent, "random": scripted.RandomAgent}[spec]
        return ScriptedPolicy(cls), info
    if info.kind == "endpoint":
        url, _, name = spec[len("openai:") :].partition("#")
        return OpenAIPolicy(base_url=url, model=name or "default"), info
    if info.kind == "server":  # token-level, on a vLLM-compatible server (vllm serve, sandgym serve-model)
        url, _, name = spec[len("server:") :].partition("#")
        served = ServerPolicy.from_server(url, name or None)
        return served, PolicyInfo(spec, "server", served.model)
    from sandgym.agents.hf import HFPolicy

    if info.adapter is not None:
        return HFPolicy(info.model, lora=None, adapter=info.adapter), info
    return HFPolicy(spec, lora=None), info


TRAINED_ROLLOUT = ("max_new_tokens", "max_turns", "max_total_tokens", "truncated_turn", "code_action", "tools",
                   "env", "env_kwargs")
"""The ``[rollout]`` keys an evaluation of a training run takes from the run by default: what the policy saw and
how its turns were cut. Sampling (temperature, top_p) and the sandbox stay evaluation's own."""


def run_config_of(spec: str) -> Path | None:
    """The training run's ``config.toml`` behind a policy spec: a run directory, or an adapter inside one (its
    checkpoints or its warm start); None for anything else. Light: nothing heavy is imported."""
    p = Path(spec).expanduser()
    if (p / "checkpoints").is_dir():
        return p / "config.toml" if (p / "config.toml").is_file() else None
    if (p / "adapter_config.json").is_file():
        return next((c for c in _run_configs_around(p) if c.is_file()), None)
    return None


def _run_configs_around(adapter: Path) -> tuple[Path, Path]:
    """Where the config of the run an adapter belongs to may be: RUN/checkpoints/step-N or RUN/sft/adapter give
    RUN/config.toml, one level deeper its parent's."""
    return adapter.parent.parent / "config.toml", adapter.parent.parent.parent / "config.toml"


def trained_rollout(spec: str) -> tuple[Path, dict[str, Any]] | None:
    """The run's config file and the :data:`TRAINED_ROLLOUT` keys of its ``[rollout]`` table, when ``spec`` is a
    training run (or an adapter inside one) whose config sets any of them."""
    cfg = run_config_of(spec)
    if cfg is None:
        return None
    table = load_toml(cfg).get("rollout", {})
    keys = {k: v for k, v in table.items() if k in TRAINED_ROLLOUT} if isinstance(table, dict) else {}
    return (cfg, keys) if keys else None


def _adapter_base(adapter: Path, default: str) -> str:
    """The base model an adapter was trained on: the run's config when present, else the adapter config."""
    for cfg in _run_configs_around(adapter):
        if cfg.is_file():
            name = load_toml(cfg).get("model", {}).get("name")
            if name:
                return str(name)
    try:
        meta = json.loads((adapter / "adapter_config.json").read_bytes().decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{adapter / 'adapter_config.json'} is not valid JSON ({exc}); re-save the adapter") from None
    base = meta.get("base_model_name_or_path") if isinstance(meta, dict) else None
    return str(base) if base and Path(str(base)).exists() else default


def _weights_hash(adapter: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(adapter.glob("adapter_model.*")):
        h.update(f.read_bytes())
    return h.hexdigest()[:16]
