"""Finding a model's files: a local directory, or a Hugging Face repo id (cache or download)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

logger = logging.getLogger(__name__)

# What a text model needs; skips other formats (gguf, pytorch .bin) that repos often carry.
_MODEL_FILE_PATTERNS = ["*.json", "*.safetensors", "*.jinja", "*.txt", "*.model", "*.tiktoken", "*.py"]
DEFAULT_MAX_CONTEXT = 8192


class ModelFilesError(Exception):
    """The model's files cannot be found or are not a loadable checkpoint."""


def resolve_model_path(path: str, *, offline: bool) -> Path:
    """Return a local directory holding the checkpoint.

    Args:
        path: A local directory, or a Hugging Face repo id such as ``org/name``.
        offline: Never contact the Hub; a repo id must already be in the local HF cache.

    Raises:
        ModelFilesError: The directory does not exist, or the repo cannot be fetched.
    """
    local = Path(path).expanduser()
    if local.is_dir():
        if not (local / "config.json").is_file():
            raise ModelFilesError(f"{local} has no config.json")
        return local.resolve()
    if path.startswith(("/", ".", "~")) or path.count("/") != 1:
        raise ModelFilesError(f"{path!r} is not a local directory nor a Hugging Face repo id (org/name)")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        return Path(snapshot_download(path, allow_patterns=_MODEL_FILE_PATTERNS, local_files_only=offline))
    except LocalEntryNotFoundError:
        hint = " (offline = true: only the local Hugging Face cache is searched)" if offline else ""
        raise ModelFilesError(f"{path!r} was not found{hint}") from None
    except (HfHubHTTPError, OSError) as exc:
        raise ModelFilesError(f"could not download {path!r}: {exc}") from None


def read_max_context(model_dir: Path, configured: int) -> int:
    """The context window: the model's ``max_position_embeddings``, capped by ``configured`` if > 0."""
    config = json.loads((model_dir / "config.json").read_text())
    native = config.get("max_position_embeddings") or config.get("text_config", {}).get("max_position_embeddings")
    native = int(native) if native else DEFAULT_MAX_CONTEXT
    return min(native, configured) if configured > 0 else native


def read_vocab_size(model_dir: Path) -> int:
    """``vocab_size`` from config.json (0 if absent): the logits' rows, until the worker reports them."""
    config = json.loads((model_dir / "config.json").read_text())
    size = config.get("vocab_size") or config.get("text_config", {}).get("vocab_size")
    return int(size) if size else 0
