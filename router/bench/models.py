"""``rapid-mlx bench make-model``: deterministic random-weight checkpoints to benchmark on, offline.

The checkpoint is a real mlx-lm model directory (config.json, safetensors, a byte-level BPE
tokenizer, a ChatML chat template with tools), so rapid-mlx and ``mlx_lm.server`` load the
same files without a download. Random weights make the output meaningless but the compute
real: prefill and decode cost what a trained model of that shape costs.
"""

from __future__ import annotations

from pathlib import Path

ARCHITECTURES = ("qwen3", "llama", "qwen3_next")
# The size is the benchmark's model-size parameter. "small" is the smallest the project's
# comparisons use (at least 20M parameters); "tiny" is for quick checks of the bench itself.
SIZES = {
    "tiny": {"hidden_size": 64, "num_layers": 2, "vocab_size": 512},
    "small": {"hidden_size": 512, "num_layers": 8, "vocab_size": 4096},
    "medium": {"hidden_size": 1024, "num_layers": 12, "vocab_size": 4096},
}
MAX_CONTEXT = 65536


def make_model(out_dir: Path, *, arch: str = "qwen3", size: str = "small", seed: int = 0) -> Path:
    from engines.demo.tiny import build_tiny_model

    # No <tool_call>/<think> single tokens: a random model emitting them would send its
    # output through the tool and reasoning parsers, which hold text back (unequal work).
    return build_tiny_model(out_dir, arch=arch, seed=seed, max_context=MAX_CONTEXT, markup_tokens=False, **SIZES[size])


def parameter_count(model_dir: Path) -> int:
    """Parameters in the checkpoint's safetensors files (read from their headers, no weights loaded)."""
    import json
    import struct

    total = 0
    for path in sorted(Path(model_dir).glob("*.safetensors")):
        with open(path, "rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length))
        for name, entry in header.items():
            if name != "__metadata__":
                count = 1
                for dim in entry["shape"]:
                    count *= dim
                total += count
    return total


def prefill(model, layers: list, tokens: int, chunk: int = 512) -> None:
    """Run ``tokens`` deterministic prompt tokens through ``model`` into ``layers``, in chunks."""
    import mlx.core as mx

    prompt = mx.array([[3 + (j * 17) % 200 for j in range(tokens)]])
    for start in range(0, tokens, chunk):
        model(prompt[:, start : start + chunk], cache=layers)
        mx.eval([layer.state for layer in layers])


def load_bench_model(model_dir: Path | None, size: str):
    """(description, model): the checkpoint at ``model_dir``, or a made one of ``size``."""
    import tempfile

    from mlx_lm.utils import load_model

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(model_dir) if model_dir else make_model(Path(tmp) / "m", size=size)
        described = f"{path.name if model_dir else size} ({parameter_count(path) / 1e6:.1f}M parameters)"
        model, _ = load_model(path)
    return described, model


def default_prefix_cache():
    """A prefix cache in memory, as a server configures one by default (``[models.*] prefix_cache``)."""
    from caches.prefix_cache import PrefixCache
    from router.ops.config.schema import PrefixCacheConfig

    config = PrefixCacheConfig()
    return PrefixCache(memory_bytes=int(config.memory_gb * 2**30), min_tokens=config.min_tokens)


def bare_generator(model, prompts: list[list[int]], max_tokens: int, *, width: int, prefill_step: int):
    """mlx-lm's BatchGenerator alone at mlx_lm.server's settings (8 prompts prefilled together,
    one shared greedy sampler), with ``prompts`` inserted; the caller closes it."""
    from mlx_lm.generate import BatchGenerator
    from mlx_lm.sample_utils import make_sampler

    from engines.prefill_policy import MAX_PROMPTS

    generator = BatchGenerator(model, completion_batch_size=width, prefill_batch_size=min(width, MAX_PROMPTS),
                               prefill_step_size=prefill_step)
    greedy = make_sampler(temp=0.0)
    generator.insert(prompts, max_tokens=[max_tokens] * len(prompts), samplers=[greedy] * len(prompts))
    return generator
