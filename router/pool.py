"""The model registry: name/alias → ModelHandle, worker lifecycles.

Each configured model gets a ModelHandle holding its tokenizer (the router owns the text
side) and a WorkerHandle (the engine process). Names resolve by exact id, then exact
alias, then glob alias in file order. Counting requests against a model's limits is
``router/admission.py``'s job.

Worker sockets live in the private runtime dir under names unique to this router instance,
and every worker gets a secret token it must show when it connects.
"""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import json
import logging
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from engines.client import WorkerHandle, WorkerState
from engines.errors import WorkerLoadError, WorkerNotReadyError
from engines.protocol import WorkerSpec
from router.errors import ModelNotFoundError, ModelUnavailableError
from router.model_files import ModelFilesError, read_max_context, resolve_model_path
from router.ops.config import ModelConfig, RouterConfig
from router.ops.runtime_dir import prepare_runtime_dir
from router.turn.parser_choice import ParserChoice, ParserConfigError, choose_parsers, prompt_opens_thinking

logger = logging.getLogger(__name__)

STOP_TIMEOUT_S = 10.0  # for a worker to exit after Shutdown, beyond its prefix cache's flush

# How long a request waits for a model that is starting (lazy load or first start)
# before it gets 503 + Retry-After; a crashed worker's backoff window answers 503 at once.
LOAD_WAIT_S = 120.0


@dataclass
class ModelHandle:
    """Everything the router knows about one configured model."""

    model_id: str
    config: ModelConfig
    created: int
    worker: WorkerHandle | None = None
    tokenizer: Any = None  # mlx_lm TokenizerWrapper, loaded with the worker
    max_context: int = 0
    inflight: int = 0
    heartbeat_s: float = 5.0  # [server] keepalive_s
    allow_request_chat_template: bool = False  # [server] allow_request_chat_template
    chat_template_timeout_s: float = 10.0  # [server] chat_template_timeout_s
    load_error: str | None = None
    parsers: ParserChoice | None = None  # chosen when the tokenizer loads
    _load_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _token_text: dict[int, str] = field(default_factory=dict)

    @property
    def state(self) -> str:
        if self.load_error is not None:
            return "failed"
        return self.worker.state.value if self.worker else WorkerState.STOPPED.value

    @property
    def vocab_size(self) -> int:
        """Rows of the model's logits, as its worker reported them (0 before it is ready)."""
        return self.worker.vocab_size if self.worker else 0

    @property
    def wants_turn_boundaries(self) -> bool:
        """Whether requests should tell the worker where their chat turns end (its prefix cache
        can only reuse exact snapshot points: a hybrid or sliding-window model)."""
        return self.worker.exact_snapshots if self.worker else False

    @property
    def tool_parser(self) -> str | None:
        return self.parsers.tool_parser if self.parsers else None

    @property
    def reasoning_parser(self) -> str | None:
        return self.parsers.reasoning_parser if self.parsers else None

    def prompt_opens_thinking(self, prompt_text: str) -> bool:
        """Whether the rendered prompt already opened a think block (the output starts inside it)."""
        return prompt_opens_thinking(prompt_text, self.reasoning_parser)

    def token_text(self, token_id: int) -> str:
        """Decoded text of one token (cached: logprobs ask for it on every step)."""
        text = self._token_text.get(token_id)
        if text is None:
            text = self._token_text[token_id] = self.tokenizer.decode([token_id])
        return text


class ModelPool:
    """Owns every ModelHandle; created in the app's lifespan."""

    def __init__(self, config: RouterConfig, runtime_dir: Path) -> None:
        self.config = config
        self._runtime_dir = runtime_dir
        # Socket names carry it, so two routers sharing a runtime dir never meet.
        self._instance = secrets.token_hex(4)
        now = int(time.time())
        self.handles = {
            model_id: ModelHandle(
                model_id, model_config, now, heartbeat_s=config.server.keepalive_s,
                allow_request_chat_template=config.server.allow_request_chat_template,
                chat_template_timeout_s=config.server.chat_template_timeout_s,
            )
            for model_id, model_config in config.models.items()
        }

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start the preloaded models' workers (in the background: HTTP serves meanwhile)."""
        prepare_runtime_dir(self._runtime_dir)
        for handle in self.handles.values():
            if handle.config.preload:
                asyncio.create_task(self._ensure_started_logged(handle), name=f"preload[{handle.model_id}]")

    async def stop(self) -> None:
        # A worker writes its prefix cache's queue to disk before it exits: give it that time.
        await asyncio.gather(*(h.worker.stop(timeout_s=STOP_TIMEOUT_S + h.worker.spec.prefix_cache_flush_timeout_s)
                               for h in self.handles.values() if h.worker is not None))

    def is_ready(self) -> bool:
        """True when every preloaded model is serving (the /ready contract)."""
        return all(h.state == WorkerState.READY.value for h in self.handles.values() if h.config.preload)

    # ------------------------------------------------------------------ routing

    def resolve(self, name: str) -> ModelHandle:
        """Find the model a client named, by id, exact alias, then glob alias."""
        if name in self.handles:
            return self.handles[name]
        for handle in self.handles.values():
            if name in handle.config.aliases:
                return handle
        for handle in self.handles.values():
            if any(_is_glob(alias) and fnmatch.fnmatchcase(name, alias) for alias in handle.config.aliases):
                return handle
        raise ModelNotFoundError(name)

    async def ensure_ready(self, handle: ModelHandle) -> None:
        """Start the model if needed and wait for it, within LOAD_WAIT_S."""
        if handle.load_error is not None:
            raise ModelUnavailableError(f"Model {handle.model_id!r} failed to load: {handle.load_error}", retry_after_s=30.0)
        if handle.worker is not None and handle.worker.state is WorkerState.FAILED:
            raise ModelUnavailableError(f"Model {handle.model_id!r} is restarting after a crash.", retry_after_s=2.0)
        if handle.worker is not None and handle.worker.state is WorkerState.READY:
            return
        try:
            await asyncio.wait_for(self._ensure_started(handle), timeout=LOAD_WAIT_S)
        except TimeoutError:
            raise ModelUnavailableError(f"Model {handle.model_id!r} is still loading.", retry_after_s=10.0) from None
        except (WorkerLoadError, WorkerNotReadyError, ModelFilesError) as exc:
            raise ModelUnavailableError(f"Model {handle.model_id!r} is unavailable: {exc}", retry_after_s=5.0) from None

    # ------------------------------------------------------------------ internal

    async def _ensure_started_logged(self, handle: ModelHandle) -> None:
        try:
            await self._ensure_started(handle)
        except (WorkerLoadError, ModelFilesError, OSError) as exc:
            logger.error("model %s failed to load: %s", handle.model_id, exc)

    async def _ensure_started(self, handle: ModelHandle) -> None:
        async with handle._load_lock:
            if handle.worker is None:
                await self._prepare(handle)
        try:
            await handle.worker.wait_ready()
        except WorkerLoadError as exc:
            # The first start failed: a bad checkpoint, not a crash; keep the reason for every request.
            handle.load_error = str(exc)
            raise

    async def _prepare(self, handle: ModelHandle) -> None:
        """Resolve files and load the tokenizer (in a thread), then create and start the worker."""
        offline = self.config.server.offline
        try:
            path = await anyio.to_thread.run_sync(lambda: resolve_model_path(handle.config.path, offline=offline))
            handle.tokenizer = await anyio.to_thread.run_sync(lambda: _load_tokenizer(path))
            handle.parsers = _parsers_for(handle, path)
        except (ModelFilesError, ParserConfigError) as exc:
            handle.load_error = str(exc)
            raise ModelFilesError(str(exc)) from None
        handle.max_context = read_max_context(path, handle.config.max_context)
        spec = WorkerSpec(
            model_id=handle.model_id,
            model_path=str(path),
            socket_path=str(self._runtime_dir / _socket_name(handle.model_id, self._instance)),
            token=secrets.token_hex(16),
            max_concurrency=handle.config.max_concurrency,
            prefill_step=handle.config.prefill_step,
            max_context=handle.max_context,
            log_level=self.config.server.log_level,
            **_prefix_cache_spec(handle.config.prefix_cache, self._runtime_dir / "prefix-cache" / handle.model_id),
            **_kv_cache_spec(handle.config.kv_cache),
        )
        handle.worker = WorkerHandle(spec)
        handle.worker.start()


def _prefix_cache_spec(config, default_dir: Path) -> dict[str, Any]:
    if not config.enabled or config.memory_gb <= 0:
        return {"prefix_cache_bytes": 0}
    spec: dict[str, Any] = {"prefix_cache_bytes": int(config.memory_gb * 2**30), "prefix_cache_min_tokens": config.min_tokens}
    if config.persist and config.disk_gb > 0:
        spec.update(prefix_cache_dir=str(Path(config.dir).expanduser() if config.dir else default_dir),
                    prefix_cache_disk_bytes=int(config.disk_gb * 2**30), prefix_cache_flush_timeout_s=config.flush_timeout_s)
    return spec


def _kv_cache_spec(config) -> dict[str, int]:
    return {"kv_bits": config.bits, "kv_group_size": config.group_size, "kv_quantize_after": config.quantize_after}


def _load_tokenizer(path: Path):
    from mlx_lm.utils import load_tokenizer

    config = json.loads((path / "config.json").read_text())
    eos = config.get("eos_token_id")
    eos_ids = [eos] if isinstance(eos, int) else eos
    try:
        return load_tokenizer(path, eos_token_ids=eos_ids)
    except (OSError, ValueError) as exc:
        raise ModelFilesError(f"cannot load the tokenizer from {path}: {exc}") from None


def _parsers_for(handle: ModelHandle, path: Path) -> ParserChoice:
    tokenizer = handle.tokenizer
    choice = choose_parsers(
        path,
        tool_parser=handle.config.tool_parser,
        reasoning_parser=handle.config.reasoning_parser,
        chat_template=tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else None,
        special_tokens=[str(t) for t in tokenizer.added_tokens_decoder.values()],
        model_name=handle.config.path,
    )
    logger.info("model %s: tool parser %s (%s); reasoning parser %s (%s)", handle.model_id,
                choice.tool_parser, choice.tool_reason, choice.reasoning_parser, choice.reasoning_reason)
    return choice


def _is_glob(alias: str) -> bool:
    return any(ch in alias for ch in "*?[")


def _socket_name(model_id: str, instance: str) -> str:
    """A short, unique name: readable prefix, a hash of the whole id, this router's instance.

    Short because a Unix socket path has at most 104 bytes on macOS, runtime dir included.
    """
    readable = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in model_id)[:20]
    digest = hashlib.sha256(model_id.encode()).hexdigest()[:8]
    return f"{readable}-{digest}-{instance}.sock"
