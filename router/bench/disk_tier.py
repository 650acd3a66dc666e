"""``rapid-mlx bench disk-tier``: seconds per GB to flush, index and load back the prefix cache on disk.

In process, with the worker's own DiskTier on real entries: one prefill of ``tokens`` tokens
of the checkpoint gives a cache snapshot, offered ``entries`` times under different token
keys (as that many sessions' prefixes would be); then the queue is flushed (what a graceful
stop does), a fresh tier reads the index (what a start does) and every entry is loaded back
(what a hit from disk does, checksum included).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path


def measure(model_dir: Path, *, entries: int, tokens: int, directory: Path | None) -> dict[str, float]:
    from mlx_lm.models.cache import make_prompt_cache
    from mlx_lm.utils import load_model

    from caches import snapshot
    from caches.disk import DiskTier, Loaded
    from router.bench.models import prefill

    model, _ = load_model(Path(model_dir))
    layers = make_prompt_cache(model)
    prefill(model, layers, tokens)
    for layer in layers:  # exact-size arrays, as the scheduler's snapshots are
        layer.keys, layer.values = layer.keys[..., : layer.offset, :], layer.values[..., : layer.offset, :]
    snapshot.materialize(layers)
    size = snapshot.nbytes(layers)
    with tempfile.TemporaryDirectory(dir=directory) as root:
        writer = DiskTier(Path(root), "b" * 32, budget_bytes=1 << 40, max_pending=entries, max_pending_bytes=1 << 40)
        writer.scan()
        for i in range(entries):
            writer.offer([i, *range(1, tokens)], layers, i, size, True, 0)
        started = time.monotonic()
        left = writer.flush(timeout_s=3600)
        flush_s = time.monotonic() - started
        written = writer.stats.bytes
        reader = DiskTier(Path(root), "b" * 32, budget_bytes=1 << 40)
        started = time.monotonic()
        index = reader.scan()
        index_s = time.monotonic() - started
        started = time.monotonic()
        for entry in index:
            reader.request_load(entry)
        loaded = 0
        while loaded < len(index):
            events = [e for e in reader.events() if isinstance(e, Loaded)]
            if any(e.layers is None for e in events):
                raise RuntimeError("an entry did not load back")
            loaded += len(events)
            time.sleep(0.001)
        load_s = time.monotonic() - started
        reader.flush(1)
    gib = written / 2**30
    return {"entries": entries - left, "entry_mib": size / 2**20, "written_gib": gib, "flush_s_per_gib": flush_s / gib,
            "index_s": index_s, "load_s_per_gib": load_s / gib}


def report(result: dict[str, float], *, model_dir: Path, tokens: int) -> str:
    return (f"model `{model_dir}`, {result['entries']} entries of {tokens} tokens ({result['entry_mib']:.1f} MiB each), "
            f"{result['written_gib']:.2f} GiB in all\n\n"
            "| step | measured |\n|---|---|\n"
            f"| flush (write, fsync, checksum, rename) | {result['flush_s_per_gib']:.2f} s per GiB |\n"
            f"| index at start (headers only) | {result['index_s'] * 1000:.1f} ms for {result['entries']} entries |\n"
            f"| load back (read, checksum, arrays) | {result['load_s_per_gib']:.2f} s per GiB |\n")
