"""The cached tokens a perfect prefix cache would report: the ideal a measured ratio is shown next to.

With the model's tokenizer, each prompt is rendered through its chat template and the ideal
for a request is its longest common token prefix with any prompt sent before it (any
session: sessions that share a system prompt can share its cache). Without one, the ideal
of a session's turn is the previous turn's prompt as the server counted it, and turn 1's
is unknown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from router.bench.client import RequestRecord


class PromptTokenizer:
    """Renders OpenAI-shaped chat requests to token ids as a server with this tokenizer would.

    Through mlx-lm's tokenizer wrapper, as rapid-mlx and mlx_lm.server load it: it sets the
    template's thinking switch from the vocabulary (off without a ``<think>`` token), which
    changes the generation prompt.
    """

    def __init__(self, path: str | Path) -> None:
        from mlx_lm.tokenizer_utils import load

        self._tokenizer = load(Path(path))

    @property
    def eos_token_id(self) -> int | None:
        return self._tokenizer.eos_token_id

    def tokens(self, request: dict[str, Any]) -> list[int]:
        rendered = self._tokenizer.apply_chat_template(
            request["messages"], tools=request.get("tools"), add_generation_prompt=True, tokenize=True)
        return list(rendered if isinstance(rendered, list) else rendered["input_ids"])


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def fill_ideal(records: list[RequestRecord], prompts: dict[int, dict[str, Any]], tokenizer: PromptTokenizer | None) -> None:
    """Set ``ideal_cached_tokens`` on each record whose prompt is known (``prompts`` by record index)."""
    ordered = sorted((r for r in records if r.index in prompts), key=lambda r: r.sent_at)
    if tokenizer is not None:
        seen: list[list[int]] = []
        for record in ordered:
            tokens = tokenizer.tokens(prompts[record.index])
            best = max((_common_prefix(tokens, earlier) for earlier in seen), default=0)
            # A cache must leave at least the last prompt token to compute the first output from.
            record.ideal_cached_tokens = min(best, len(tokens) - 1)
            seen.append(tokens)
        return
    previous: dict[int | None, RequestRecord] = {}
    for record in sorted(ordered, key=lambda r: (r.session is None, r.session or 0, r.turn or 0)):
        before = previous.get(record.session)
        if record.session is not None and before is not None and before.ok and before.prompt_tokens is not None:
            record.ideal_cached_tokens = before.prompt_tokens
            if record.prompt_tokens:
                record.ideal_cached_tokens = min(before.prompt_tokens, record.prompt_tokens - 1)
        previous[record.session] = record
