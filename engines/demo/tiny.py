"""Tiny random-weight models of real mlx-lm architectures, built on the fly.

Tests and benchmarks need real checkpoints (config.json, safetensors, tokenizer files,
a chat template) that load through the same code path as a Hugging Face download,
without any network. The tokenizer is a byte-level BPE trained locally on a small
synthetic corpus; the weights are mlx's default random initialisation under a fixed seed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

CHAT_TEMPLATE_PATH = Path(__file__).with_name("chat_template.jinja")

# Special tokens in ChatML order; "<|im_end|>" ends an assistant turn.
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Qwen keeps these as non-special added tokens so they survive detokenisation as text.
MARKUP_TOKENS = ["<tool_call>", "</tool_call>", "<think>", "</think>", "<tool_response>", "</tool_response>"]

CORPUS_WORDS = (
    "the a an of to in is are was be on for with as at by it this that from or and not "
    "model token cache batch prefix stream request server router engine worker queue "
    "hello world weather city paris london tokyo search file read write code python "
    "function call tool result answer question think reason because so then when what "
    "how why who where which can will would should could one two three four five ten "
    "agent prompt context turn user assistant system message json name arguments value"
).split()


def synthetic_corpus(lines: int = 2000, seed: int = 0) -> list[str]:
    """Return deterministic English-like lines plus ChatML/JSON fragments for BPE training."""
    rng = random.Random(seed)
    corpus = []
    for _ in range(lines):
        words = [rng.choice(CORPUS_WORDS) for _ in range(rng.randint(4, 16))]
        corpus.append(" ".join(words).capitalize() + rng.choice([".", "?", "!", ","]))
    corpus += ['{"name": "get_weather", "arguments": {"city": "Paris"}}'] * 20
    return corpus


def write_tokenizer(
    out_dir: Path,
    *,
    vocab_size: int = 512,
    seed: int = 0,
    eos_token: str = "<|im_end|>",
    corpus: Iterable[str] | None = None,
    split_pattern: str | Sequence[str] | None = None,
    markup_tokens: bool = True,
) -> int:
    """Train a byte-level BPE tokenizer and write tokenizer.json + tokenizer_config.json.

    Args:
        corpus: Training text; defaults to ``synthetic_corpus(seed=seed)``. The demo model
            passes its own conversations so its vocabulary fits what it will say.
        markup_tokens: Add ``<tool_call>``, ``<think>`` and friends as single tokens. Benchmarks
            turn this off: a random model emitting them would send its output through the
            tool-call and reasoning parsers, which hold text back.
        split_pattern: Pre-tokenization regex replacing GPT-2's (pieces are isolated, then
            byte-mapped), or several applied in turn (each to the pieces of the one before).
            The demo model uses one that keeps spaces off words, so a word has the same
            tokens after a space and after a quote.

    Returns:
        The vocabulary size actually produced (special and added tokens included).
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    if split_pattern is not None:
        patterns = [split_pattern] if isinstance(split_pattern, str) else list(split_pattern)
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            *(pre_tokenizers.Split(Regex(pattern), behavior="isolated") for pattern in patterns),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - (len(MARKUP_TOKENS) if markup_tokens else 0),
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    texts = synthetic_corpus(seed=seed) if corpus is None else corpus
    tokenizer.train_from_iterator(texts, trainer=trainer)
    if markup_tokens:
        tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKUP_TOKENS])
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out_dir / "tokenizer.json"))
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": eos_token,
        "pad_token": "<|endoftext|>",
        "bos_token": None,
        "model_max_length": 1 << 20,
        "chat_template": CHAT_TEMPLATE_PATH.read_text(),
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2))
    return tokenizer.get_vocab_size()


def architecture_config(arch: str, *, vocab_size: int, hidden_size: int, num_layers: int, max_context: int,
                        sliding_window: int | None = None) -> dict[str, Any]:
    """config.json fields for a tiny model of the given mlx-lm architecture.

    ``sliding_window`` (llama only): every other layer attends to a window of that many
    tokens, so the model's cache mixes ``RotatingKVCache`` and ``KVCache`` layers.
    """
    heads = max(2, hidden_size // 32)
    head_dim = hidden_size // heads
    base: dict[str, Any] = {
        "model_type": arch,
        "hidden_size": hidden_size,
        "num_hidden_layers": num_layers,
        "intermediate_size": hidden_size * 3,
        "num_attention_heads": heads,
        "num_key_value_heads": max(1, heads // 2),
        "head_dim": head_dim,
        "rms_norm_eps": 1e-6,
        "vocab_size": vocab_size,
        "max_position_embeddings": max_context,
        "rope_theta": 1_000_000.0,
        "tie_word_embeddings": False,
    }
    if arch == "qwen3_next":
        # Hybrid: gated-delta linear attention with a full-attention layer every 2nd layer.
        base.update(
            linear_num_value_heads=2, linear_num_key_heads=2, linear_key_head_dim=head_dim,
            linear_value_head_dim=head_dim, linear_conv_kernel_dim=4, num_experts=2,
            num_experts_per_tok=1, decoder_sparse_step=1, shared_expert_intermediate_size=hidden_size,
            mlp_only_layers=[], moe_intermediate_size=hidden_size, partial_rotary_factor=0.5,
            full_attention_interval=2,
        )
    elif arch not in ("qwen3", "llama", "qwen2"):
        raise ValueError(f"no tiny config for architecture {arch!r}")
    if sliding_window is not None:
        if arch != "llama":
            raise ValueError("sliding_window is built for llama only")
        base.update(sliding_window=sliding_window,
                    layer_types=["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(num_layers)])
    return base


def build_tiny_model(
    out_dir: str | Path,
    *,
    arch: str = "qwen3",
    hidden_size: int = 64,
    num_layers: int = 2,
    vocab_size: int = 512,
    max_context: int = 4096,
    seed: int = 0,
    dtype: str = "float32",
    markup_tokens: bool = True,
    sliding_window: int | None = None,
) -> Path:
    """Write a loadable random-weight checkpoint to ``out_dir`` and return its path.

    Args:
        out_dir: Directory to create (existing files are overwritten).
        arch: mlx-lm ``model_type``: "qwen3", "llama", "qwen2" or the hybrid "qwen3_next".
        hidden_size: Model width; benchmarks raise it, tests keep it tiny.
        num_layers: Decoder layers.
        vocab_size: Target tokenizer vocabulary size.
        max_context: ``max_position_embeddings`` written to config.json.
        seed: Seeds both the tokenizer corpus and the weights.
        dtype: Weight dtype ("float32" is fastest on the CPU backend).
        markup_tokens: See ``write_tokenizer``.
        sliding_window: See ``architecture_config``.
    """
    import mlx.core as mx
    from mlx_lm.utils import _get_classes, save_config, save_model

    out = Path(out_dir)
    vocab = write_tokenizer(out, vocab_size=vocab_size, seed=seed, markup_tokens=markup_tokens)
    config = architecture_config(arch, vocab_size=vocab, hidden_size=hidden_size, num_layers=num_layers, max_context=max_context,
                                 sliding_window=sliding_window)
    config["eos_token_id"] = SPECIAL_TOKENS.index("<|im_end|>")
    mx.random.seed(seed)
    model_class, args_class = _get_classes(config)
    model = model_class(args_class.from_dict(config))
    model.set_dtype(getattr(mx, dtype))
    mx.eval(model.parameters())
    save_model(out, model)
    save_config(config, out / "config.json")
    return out
