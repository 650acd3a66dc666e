"""The prefix cache's disk tier: every entry written through to ``prefix_cache.dir``.

One file per entry, self-describing: mlx's safetensors with the cache's arrays (the layout
of mlx-lm's ``save_prompt_cache``, quantized entries included) and, in the header's
metadata, the entry's token ids, the model fingerprint and the format version. A file is
written to a temporary name, fsynced, checksummed and renamed to ``<tokens-hash>-<sha256>``:
the name is the checksum, a half-written file never has a final name, and the index is the
directory itself (headers are read at start without loading arrays), so a crash forgets only
what was still queued.

Threads: the engine thread only ``offer``s entries (never blocks: a full queue drops the
write and counts it) and asks for ``load``s; a writer thread writes, a loader thread reads.
What the threads change on disk (written, evicted, unreadable) comes back to the engine
thread as events it drains between steps, so only it ever touches the radix tree.

Entries live under ``<dir>/<fingerprint>/``: the fingerprint covers the weights (sizes and
sampled bytes of each file), the config and tokenizer files, the KV settings and the format
version, so two models (or two quantizations of one) in one directory never meet, and files
of another version are simply not looked at.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import os
import queue
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlx.core as mx
from mlx.utils import tree_flatten, tree_unflatten
from mlx_lm.models import cache as mlx_cache

from caches import quantized

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
_SAMPLE_BYTES = 1 << 20  # of each weights file, from its start and its end, for the fingerprint
_HASHED_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "tokenizer.model", "chat_template.jinja")
_SUFFIX = ".safetensors"
_PARTIAL = ".partial" + _SUFFIX  # mlx appends the suffix to any name: a file being written ends so
# Cache classes an entry may hold, by the name the file records.
_CLASSES = {cls.__name__: cls for cls in (
    mlx_cache.KVCache, mlx_cache.RotatingKVCache, mlx_cache.ArraysCache, mlx_cache.QuantizedKVCache,
    quantized.FullPrecisionRow, quantized.QuantizedRow)}


def fingerprint(model_dir: Path, settings: dict[str, Any]) -> str:
    """What an entry must match to be served: these weights and tokenizer, these KV settings."""
    digest = hashlib.sha256(f"rapid-mlx prefix cache v{FORMAT_VERSION}\n".encode())
    digest.update(json.dumps(settings, sort_keys=True).encode())
    for path in sorted(Path(model_dir).iterdir()):
        if path.name in _HASHED_FILES:
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
        elif path.suffix == _SUFFIX:
            size = path.stat().st_size
            with open(path, "rb") as handle:
                head = handle.read(_SAMPLE_BYTES)
                handle.seek(max(0, size - _SAMPLE_BYTES))
                tail = handle.read(_SAMPLE_BYTES)
            digest.update(path.name.encode() + b"\0" + str(size).encode() + head + tail)
    return digest.hexdigest()[:32]


@dataclass(frozen=True)
class DiskEntry:
    name: str  # file stem: <tokens-hash>-<sha256 of the file>
    tokens: tuple[int, ...]
    nbytes: int  # the file's size
    trimmable: bool  # as the prefix cache decides which entry serves (caches.snapshot)
    floor: int


@dataclass
class DiskStats:
    entries: int = 0
    bytes: int = 0
    hits: int = 0
    hit_tokens: int = 0
    bytes_written: int = 0
    bytes_read: int = 0
    dropped_writes: int = 0  # offered while the queue was full
    failed_writes: int = 0
    removed_unreadable: int = 0
    restore_seconds: float = 0.0  # reading the index at start
    flush_seconds: float = 0.0  # writing what was queued at the stop


@dataclass(frozen=True)
class Written:
    tokens: tuple[int, ...]
    entry: DiskEntry


@dataclass(frozen=True)
class Removed:
    """Gone from disk (the budget evicted it, or it could not be read)."""

    tokens: tuple[int, ...]


@dataclass(frozen=True)
class Loaded:
    tokens: tuple[int, ...]
    layers: list[Any] | None  # None: the file was unreadable (and is removed)


@dataclass(order=True)
class _Pending:
    last_used: int
    tokens: tuple[int, ...] = field(compare=False)
    layers: list[Any] = field(compare=False)
    nbytes: int = field(compare=False)
    trimmable: bool = field(compare=False)
    floor: int = field(compare=False)


class DiskTier:
    """Entries on disk under one model fingerprint (see the module docstring)."""

    def __init__(self, root: Path, fingerprint: str, *, budget_bytes: int, quantization: quantized.KVQuantization | None = None,
                 max_pending: int = 16, max_pending_bytes: int = 1 << 30) -> None:
        self.directory = Path(root) / fingerprint
        self.fingerprint = fingerprint
        self.budget_bytes = budget_bytes
        self.stats = DiskStats()
        self._quantization = quantization
        self._max_pending, self._max_pending_bytes = max_pending, max_pending_bytes
        self._pending: dict[tuple[int, ...], _Pending] = {}
        self._pending_bytes = 0
        self._lock = threading.Condition()
        self._events: queue.SimpleQueue = queue.SimpleQueue()
        self._loads: queue.SimpleQueue = queue.SimpleQueue()
        self._files: dict[str, tuple[DiskEntry, float]] = {}  # name -> (entry, last used: mtime)
        self._touched: set[str] = set()  # files used since the writer last set their times
        self._closing = False
        _private_dir(Path(root))
        _private_dir(self.directory)
        self._writer = threading.Thread(target=self._write_loop, name="prefix-cache-writer", daemon=True)
        self._loader = threading.Thread(target=self._load_loop, name="prefix-cache-loader", daemon=True)

    # ------------------------------------------------------------------ engine thread

    def scan(self) -> list[DiskEntry]:
        """Read the index (every file's header, no arrays); start the threads. Unreadable files go."""
        started = time.monotonic()
        found, unreadable = [], 0
        for path in sorted(self.directory.glob("*" + _SUFFIX)):
            if path.name.endswith(_PARTIAL):
                if not _writer_alive(path):  # a write a crash interrupted (not another worker's, mid-write)
                    path.unlink(missing_ok=True)
                continue
            try:
                entry = self._read_header(path)
            except (OSError, ValueError, KeyError, struct.error) as exc:
                logger.debug("unreadable prefix-cache file %s: %s", path.name, exc)
                unreadable += 1
                path.unlink(missing_ok=True)
                continue
            found.append(entry)
            self._files[entry.name] = (entry, path.stat().st_mtime)
        self.stats.entries = len(self._files)
        self.stats.bytes = sum(entry.nbytes for entry, _ in self._files.values())
        self.stats.removed_unreadable += unreadable
        self.stats.restore_seconds = time.monotonic() - started
        if unreadable:
            logger.warning("prefix cache on disk: removed %d unreadable entries of %d", unreadable, unreadable + len(found))
        self._writer.start()
        self._loader.start()
        return found

    def offer(self, tokens: Sequence[int], layers: list[Any], last_used: int, nbytes: int, trimmable: bool, floor: int) -> bool:
        """Queue an entry for writing; False (and counted) if the queue is full. Never blocks."""
        key = tuple(tokens)
        with self._lock:
            if self._closing or key in self._pending:
                return False
            if len(self._pending) >= self._max_pending or self._pending_bytes + nbytes > self._max_pending_bytes:
                self.stats.dropped_writes += 1
                return False
            self._pending[key] = _Pending(last_used, key, layers, nbytes, trimmable, floor)
            self._pending_bytes += nbytes
            self._lock.notify()
        return True

    def is_pending(self, tokens: Sequence[int]) -> bool:
        with self._lock:
            return tuple(tokens) in self._pending

    def request_load(self, entry: DiskEntry) -> None:
        self._loads.put(entry)

    def touch(self, entry: DiskEntry) -> None:
        """The entry was used (from memory): it is the last the disk budget evicts. No I/O here:
        the writer sets the file's time, which orders the budget after a restart."""
        with self._lock:
            if entry.name in self._files:
                self._files[entry.name] = (entry, time.time())
                self._touched.add(entry.name)

    def events(self) -> list[Written | Removed | Loaded]:
        """What the writer and loader did since the last call."""
        out = []
        while True:
            try:
                out.append(self._events.get_nowait())
            except queue.Empty:
                return out

    @property
    def queue_depth(self) -> int:
        with self._lock:
            return len(self._pending)

    def flush(self, timeout_s: float) -> int:
        """Write what is queued, most recently used first, for up to ``timeout_s``; then stop.

        Returns the entries still unwritten (dropped) when the time ran out.
        """
        started = time.monotonic()
        with self._lock:
            self._closing = True
            self._lock.notify_all()
            while self._pending and time.monotonic() - started < timeout_s:
                self._lock.wait(timeout=max(0.0, timeout_s - (time.monotonic() - started)))
            left = len(self._pending)
            self._pending.clear()
            self._pending_bytes = 0
            self._lock.notify_all()
        self._loads.put(None)
        self.stats.flush_seconds = time.monotonic() - started
        if left:
            logger.warning("prefix cache on disk: %d queued entries not written within %.0fs", left, timeout_s)
        return left

    # ------------------------------------------------------------------ writer thread

    def _write_loop(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._closing:
                    self._lock.wait()
                if not self._pending:
                    return
                item = max(self._pending.values())  # most recently used first
            try:
                entry = self._write(item)
            except Exception as exc:  # a full disk, a permission change: this entry stays in memory only
                self.stats.failed_writes += 1
                logger.warning("prefix cache on disk: could not write an entry of %d tokens: %s", len(item.tokens), exc)
                entry = None
            with self._lock:
                if self._pending.pop(item.tokens, None) is not None:
                    self._pending_bytes -= item.nbytes
                self._lock.notify_all()
                touched, self._touched = self._touched, set()
            for name in touched:
                with contextlib.suppress(FileNotFoundError):  # evicted meanwhile
                    os.utime(self.directory / (name + _SUFFIX))
            self._events.put(Written(item.tokens, entry) if entry is not None else Removed(item.tokens))
            if entry is not None:
                self._evict_over_budget()

    def _write(self, item: _Pending) -> DiskEntry:
        tokens = item.tokens
        token_hash = hashlib.sha256(struct.pack(f"<{len(tokens)}I", *tokens)).hexdigest()[:32]
        # The pid: during a reload the old and the new worker of a model share its directory.
        temporary = self.directory / f"{token_hash}.{os.getpid()}.{threading.get_ident()}{_PARTIAL}"
        arrays, metadata = _serialize(item.layers)
        metadata.update(format=str(FORMAT_VERSION), fingerprint=self.fingerprint, trimmable=str(int(item.trimmable)), floor=str(item.floor),
                        tokens=base64.b64encode(struct.pack(f"<{len(tokens)}I", *tokens)).decode())
        mx.save_safetensors(str(temporary), arrays, metadata)
        descriptor = os.open(temporary, os.O_RDONLY)
        try:
            os.fchmod(descriptor, 0o600)
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        checksum = _file_sha256(temporary)
        name = f"{token_hash}-{checksum}"
        final = self.directory / (name + _SUFFIX)
        os.replace(temporary, final)
        _fsync_dir(self.directory)
        size = final.stat().st_size
        entry = DiskEntry(name, tokens, size, item.trimmable, item.floor)
        with self._lock:
            for old_name in [n for n, (e, _) in self._files.items() if e.tokens == tokens and n != name]:
                self._drop_file(old_name)
            if name not in self._files:
                self.stats.entries += 1
                self.stats.bytes += size
            self._files[name] = (entry, time.time())
        self.stats.bytes_written += size
        return entry

    def _evict_over_budget(self) -> None:
        """Delete the least recently used files until the disk budget holds."""
        with self._lock:
            while self.stats.bytes > self.budget_bytes and self._files:
                oldest = min(self._files, key=lambda n: self._files[n][1])
                entry = self._files[oldest][0]
                self._drop_file(oldest)
                self._events.put(Removed(entry.tokens))

    def _drop_file(self, name: str) -> None:
        entry, _ = self._files.pop(name)
        (self.directory / (name + _SUFFIX)).unlink(missing_ok=True)
        self.stats.entries -= 1
        self.stats.bytes -= entry.nbytes

    # ------------------------------------------------------------------ loader thread

    def _load_loop(self) -> None:
        while True:
            entry = self._loads.get()
            if entry is None:
                return
            self._events.put(Loaded(entry.tokens, self._load(entry)))

    def _load(self, entry: DiskEntry) -> list[Any] | None:
        path = self.directory / (entry.name + _SUFFIX)
        try:
            if _file_sha256(path) != entry.name.rpartition("-")[2]:
                raise ValueError("checksum mismatch (a truncated or altered file)")
            arrays, metadata = mx.load(str(path), return_metadata=True)
            if metadata.get("fingerprint") != self.fingerprint or metadata.get("format") != str(FORMAT_VERSION):
                raise ValueError("written for another model or format")
            layers = _deserialize(arrays, metadata, self._quantization)
            mx.eval([layer.state for layer in layers])
        except Exception as exc:  # never fatal: the entry is a miss, and goes
            # One warning; later ones are counted (removed_unreadable) and only logged at debug.
            log = logger.debug if self.stats.removed_unreadable else logger.warning
            log("prefix cache on disk: removed an unreadable entry (%s: %s); further ones are counted in the status",
                entry.name, exc)
            with self._lock:
                if entry.name in self._files:
                    self._drop_file(entry.name)
                self.stats.removed_unreadable += 1
            self._events.put(Removed(entry.tokens))
            return None
        with self._lock:
            if entry.name in self._files:
                self._files[entry.name] = (entry, time.time())
        os.utime(path)  # its last use, for the disk's LRU after a restart
        self.stats.bytes_read += entry.nbytes
        return layers

    # ------------------------------------------------------------------ files

    def _read_header(self, path: Path) -> DiskEntry:
        with open(path, "rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            if length > 64 << 20:
                raise ValueError("header too large")
            header = json.loads(handle.read(length))
        metadata = header["__metadata__"]
        if metadata["fingerprint"] != self.fingerprint or metadata["format"] != str(FORMAT_VERSION):
            raise ValueError("written for another model or format")
        packed = base64.b64decode(metadata["tokens"])
        tokens = struct.unpack(f"<{len(packed) // 4}I", packed)
        if not path.stem.startswith(hashlib.sha256(packed).hexdigest()[:32] + "-"):
            raise ValueError("the name does not match the tokens")
        return DiskEntry(path.stem, tokens, path.stat().st_size, metadata["trimmable"] == "1", int(metadata["floor"]))


def _serialize(layers: list[Any]) -> tuple[dict[str, mx.array], dict[str, str]]:
    """Arrays and metadata of an entry: each layer's class name and state (scalars kept apart)."""
    arrays, scalars = {}, {}
    for key, value in tree_flatten([layer.state for layer in layers]):
        if isinstance(value, mx.array):
            arrays[key] = value
        elif value is None or isinstance(value, (int, float)):
            scalars[key] = value
        else:
            raise ValueError(f"cannot store a cache state value of type {type(value).__name__}")
    classes = [type(layer).__name__ for layer in layers]
    for name in classes:
        if name not in _CLASSES:
            raise ValueError(f"cannot store a {name} layer")
    return arrays, {"classes": json.dumps(classes), "scalars": json.dumps(scalars)}


def _deserialize(arrays: dict[str, mx.array], metadata: dict[str, str], quantization) -> list[Any]:
    classes = json.loads(metadata["classes"])
    values: dict[str, Any] = {**arrays, **json.loads(metadata["scalars"])}
    states = tree_unflatten(sorted(values.items(), key=lambda item: _key_order(item[0])))
    layers = []
    for name, state in zip(classes, states, strict=True):
        cls = _CLASSES[name]
        layer = cls.__new__(cls)
        layer.state = state
        if isinstance(layer, (quantized.FullPrecisionRow, quantized.QuantizedRow)):
            if quantization is None:
                raise ValueError("a quantized entry for a model served without KV quantization")
            layer.quantization = quantization
        if isinstance(layer, mlx_cache.QuantizedKVCache):  # (packed, scales, biases) come back as lists
            layer.keys, layer.values = tuple(layer.keys), tuple(layer.values)
        layers.append(layer)
    return layers


def _key_order(key: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in key.split(".")]


def _writer_alive(partial: Path) -> bool:
    """Whether the process that is writing ``partial`` (its name's second part) still runs."""
    try:
        pid = int(partial.name.split(".")[1])
        os.kill(pid, 0)
    except (ValueError, IndexError, ProcessLookupError):
        return False
    except PermissionError:
        return True  # a process of another user: not ours to judge
    return pid != os.getpid()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()[:32]


def _private_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)


def _fsync_dir(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)

