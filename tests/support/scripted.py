"""A deterministic "scripted" MLX model: greedy decoding always emits one fixed output.

For testing the tool-call and reasoning paths end to end through real MLX and a real server,
where a random model never produces markup. Built on the tiny qwen3 architecture:
- every layer's output projections are zero, so each layer adds nothing to the residual
  stream and the final hidden state is the current token's embedding;
- each piece of the script is one token (added to the tokenizer), whose embedding is a
  distinct basis vector, and the LM head maps each basis vector to the next piece.
The piece after the chat template's last prompt token (the newline after
``<|im_start|>assistant``) is the first piece; the last piece is followed by ``<|im_end|>``.
(reference/mlx-lm.md §5.2.6 describes the construction.)
"""

from __future__ import annotations

import json
from pathlib import Path

from engines.demo.tiny import SPECIAL_TOKENS, build_tiny_model

THINK_THEN_CALL = [
    "<think>",
    "The user wants the weather, so I will call the tool.",
    "</think>",
    "<tool_call>",
    '\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n',
    "</tool_call>",
]
# A call in several tokens, so that ``max_tokens`` can cut it between its name and the end
# of its arguments (``CALL_CUT_AFTER`` tokens in).
SPLIT_CALL = [
    "<tool_call>",
    '\n{"name": "get_weather", "arguments": ',
    '{"city": "Pa',
    'ris"}}\n',
    "</tool_call>",
]
CALL_CUT_AFTER = 3
THINK_THEN_ANSWER = ["<think>", "A greeting needs no tool.", "</think>", "Hello! It is sunny in Paris today."]

_LOGIT = 30.0


def build_scripted_model(out_dir: str | Path, script: list[str]) -> Path:
    """Write a checkpoint whose greedy output is ``"".join(script)`` and then ``<|im_end|>``."""
    import mlx.core as mx
    from mlx_lm.utils import load_model, save_model
    from tokenizers import AddedToken, Tokenizer

    out = build_tiny_model(out_dir, arch="qwen3", hidden_size=64, num_layers=1)
    tokenizer = Tokenizer.from_file(str(out / "tokenizer.json"))
    tokenizer.add_tokens([AddedToken(piece, special=False, normalized=False) for piece in script])
    tokenizer.save(str(out / "tokenizer.json"))
    chain = [tokenizer.encode("\n", add_special_tokens=False).ids[-1]]
    chain += [tokenizer.token_to_id(piece) for piece in script] + [SPECIAL_TOKENS.index("<|im_end|>")]
    if len(set(chain)) != len(chain):
        raise ValueError("a scripted token may appear only once (each token has one successor)")

    config = json.loads((out / "config.json").read_text())
    config["vocab_size"] = tokenizer.get_vocab_size()
    (out / "config.json").write_text(json.dumps(config))
    model, _ = load_model(out, strict=False)
    _wire_chain(model, chain, config["vocab_size"], config["hidden_size"], mx)
    save_model(out, model)
    return out


def _wire_chain(model, chain: list[int], vocab_size: int, hidden: int, mx) -> None:
    if len(chain) > hidden:
        raise ValueError("the script is longer than the hidden size allows")
    for layer in model.model.layers:
        layer.self_attn.o_proj.weight = mx.zeros_like(layer.self_attn.o_proj.weight)
        layer.mlp.down_proj.weight = mx.zeros_like(layer.mlp.down_proj.weight)
    embedding = mx.random.normal((vocab_size, hidden), key=mx.random.key(1)) * 0.01
    head = mx.zeros((vocab_size, hidden))
    for k, (token, successor) in enumerate(zip(chain, chain[1:])):
        basis = mx.zeros((hidden,)).at[k].add(1.0)
        embedding[token] = basis
        head[successor] = basis * _LOGIT
    model.model.embed_tokens.weight = embedding
    model.lm_head.weight = head
    mx.eval(model.parameters())
