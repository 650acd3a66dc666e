"""ModelHandle: everything the router knows about one configured model, and its lifecycle state.

A handle is what a request holds from the moment its model name resolves until its HTTP exchange
ends. A reload that replaces a model's worker routes new requests to a new handle; the ones that
hold the old handle finish on the old worker, which stops once they have (``wait_idle``).
"""

from __future__ import annotations

import asyncio
import enum
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engines.client import WorkerHandle, WorkerState
from engines.errors import WorkerLoadError, WorkerNotReadyError
from router.errors import ModelUnavailableError
from router.ops.config import ModelConfig
from router.ops.memory import MemoryEstimate
from router.ops.metrics.families import Metrics
from router.turn.grammar_cache import GrammarCache
from router.turn.parser_choice import ParserChoice, prompt_opens_thinking


class ModelState(str, enum.Enum):
    UNLOADED = "unloaded"  # no worker: not loaded yet, unloaded (ttl, budget, admin), or stopped
    LOADING = "loading"  # the worker is starting, or restarting after a crash
    LOADED = "loaded"  # serving, with requests in flight
    IDLE = "idle"  # serving, nothing in flight (the memory budget may unload it)
    DRAINING = "draining"  # taking no new requests; stops once those in flight end
    FAILED = "failed"  # cannot load, or crashed crash_limit times: a reload or /admin/models/{id}/load retries


@dataclass(eq=False)
class ModelHandle:
    model_id: str
    config: ModelConfig
    created: int
    worker: WorkerHandle | None = None
    tokenizer: Any = None  # mlx_lm TokenizerWrapper, loaded with the worker
    model_path: Path | None = None  # the resolved checkpoint directory
    max_context: int = 0
    checkpoint_vocab_size: int = 0  # config.json's, for checking requests before the worker reports its own
    memory: MemoryEstimate | None = None  # what the memory budget counts while a worker exists
    inflight: int = 0
    last_used: float = field(default_factory=time.monotonic)
    heartbeat_s: float = 5.0  # [server] keepalive_s
    allow_request_chat_template: bool = False  # [server] allow_request_chat_template
    chat_template_timeout_s: float = 10.0  # [server] chat_template_timeout_s
    log_content: bool = False  # [server] log_content
    metrics: Metrics | None = None  # the app's metric families (None: not counted)
    load_error: str | None = None  # the files, tokenizer or parser pins could not load
    replacement_error: str | None = None  # a reload's new worker did not start; this one kept serving
    parsers: ParserChoice | None = None  # chosen when the tokenizer loads
    retired: bool = False  # no longer routed to: replaced by a reload, or removed from the config
    draining: bool = False
    replaces: ModelHandle | None = None  # the handle this one takes over from once it is ready
    grammars: GrammarCache = field(default_factory=GrammarCache)  # structured outputs' grammars, by what they are built from
    _load_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _idle: asyncio.Event = field(default_factory=asyncio.Event)
    _token_text: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._idle.set()

    # ------------------------------------------------------------------ state

    @property
    def state(self) -> ModelState:
        worker = self.worker
        if self.draining:
            return ModelState.DRAINING
        if self.load_error is not None or (worker is not None and worker.gave_up):
            return ModelState.FAILED
        if worker is None or worker.state in (WorkerState.STOPPED, WorkerState.STOPPING):
            return ModelState.UNLOADED
        if worker.state is WorkerState.READY:
            return ModelState.LOADED if self.inflight else ModelState.IDLE
        return ModelState.LOADING

    @property
    def serving(self) -> bool:
        return self.worker is not None and self.worker.state is WorkerState.READY

    @property
    def last_error(self) -> str | None:
        return self.load_error or (self.worker.last_error if self.worker else None) or self.replacement_error

    # ------------------------------------------------------------------ requests in flight

    def take(self, count: int) -> None:
        """Count ``count`` generations in flight (admission's check-and-take)."""
        self.inflight += count
        self.last_used = time.monotonic()
        self._idle.clear()

    def give_back(self, count: int) -> None:
        self.inflight -= count
        self.last_used = time.monotonic()
        if self.inflight <= 0:
            self._idle.set()

    async def wait_ready(self, timeout_s: float | None) -> bool:
        """Wait until the worker serves; False if ``timeout_s`` passed first.

        Raises:
            ModelUnavailableError: the model has no worker, or it cannot load (503).
        """
        worker = self.worker
        if worker is None:
            raise ModelUnavailableError(f"Model {self.model_id!r} is not loaded; try again.", retry_after_s=2.0)
        try:
            await worker.wait_ready(timeout_s)
        except WorkerNotReadyError:
            return False
        except WorkerLoadError as exc:
            raise ModelUnavailableError(f"Model {self.model_id!r} failed to load: {self.last_error or exc}", retry_after_s=30.0) from None
        return True

    async def wait_idle(self, timeout_s: float) -> bool:
        """Wait until nothing is in flight; False if ``timeout_s`` passed first."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    # ------------------------------------------------------------------ what requests read

    @property
    def vocab_size(self) -> int:
        """Rows of the model's logits, as its worker reported them (config.json's before it is ready)."""
        return (self.worker.vocab_size if self.worker else 0) or self.checkpoint_vocab_size

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
