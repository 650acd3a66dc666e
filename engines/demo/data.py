"""Render conversations with the chat template, tokenize them, and pack them into batches.

Why tokenize in segments: at serving time the prompt (everything up to the assistant's
turn) is tokenized as one string and the model then emits tokens one by one. Byte-level
BPE merges across that boundary differently (a prompt ending in ``"\\n\\n"`` becomes one
token), so each trained assistant turn is tokenized on its own and the text before it
separately, reproducing the token ids the model will actually see.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engines.demo.corpus import Conversation, conversations
from engines.demo.tiny import CHAT_TEMPLATE_PATH

if TYPE_CHECKING:
    from tokenizers import Tokenizer

logger = logging.getLogger(__name__)

ASSISTANT_HEADER = "<|im_start|>assistant\n"
EMPTY_THINK = "<think>\n\n</think>\n\n"
END_OF_TURN = "<|im_end|>"


def chat_template() -> str:
    """The shipped ChatML template text."""
    return CHAT_TEMPLATE_PATH.read_text()


def render(conv: Conversation, template: str, *, add_generation_prompt: bool = False, **kwargs) -> str:
    """Render a conversation exactly as ``tokenizer.apply_chat_template`` does (transformers' jinja env)."""
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(
        conversations=[conv.messages], tools=conv.tools, chat_template=template,
        add_generation_prompt=add_generation_prompt, **kwargs,
    )
    return rendered[0]


def split_targets(text: str) -> list[tuple[str, bool]]:
    """Cut rendered text into (segment, is_target) pieces.

    An assistant turn is a target when it is rendered the way the model must produce it:
    after an empty think block (the block belongs to the prompt), or starting with a
    ``<think>`` block of its own. Turns rendered without any think block are history only.
    """
    pieces: list[tuple[str, bool]] = []
    pos = 0
    for match in re.finditer(re.escape(ASSISTANT_HEADER), text):
        start = match.end()
        if text.startswith(EMPTY_THINK, start):
            start += len(EMPTY_THINK)
        elif not text.startswith("<think>\n", start):
            continue
        end = text.index(END_OF_TURN, start) + len(END_OF_TURN)
        pieces += [(text[pos:start], False), (text[start:end], True)]
        pos = end
    pieces.append((text[pos:], False))
    return [(s, t) for s, t in pieces if s]


@dataclass
class Example:
    """Token ids of one conversation and the loss weight of predicting each token."""

    ids: np.ndarray
    target: np.ndarray


_CALL = re.compile(r'<tool_call>\n\{"name": ("[^"]*"), "arguments": (\{.*?\})\}\n</tool_call>', re.DOTALL)
_KEY_AND_VALUE = re.compile(r'"([^"\\]*)": "((?:[^"\\]|\\.)*")')


def argument_spans(segment: str) -> list[tuple[int, int]]:
    """Character spans of the decisions in tool calls: the tool name, each argument name
    and each string argument value (without the opening quote, with the closing one)."""
    spans = []
    for call in _CALL.finditer(segment):
        spans.append((call.start(1) + 1, call.end(1)))
        base = call.start(2)
        for match in _KEY_AND_VALUE.finditer(call.group(2)):
            spans += [(base + match.start(1), base + match.end(1)), (base + match.start(2), base + match.end(2))]
    return spans


_TOOL_RESPONSE = re.compile(r"<tool_response>\n(.*?)\n</tool_response>", re.DOTALL)
_WORD = re.compile(r"[A-Za-z0-9]+")


def result_spans(segment: str, context: str) -> list[tuple[int, int]]:
    """Character spans of the words and numbers of an answer that repeat the tool result
    the turn answers (the last ``<tool_response>`` in ``context``): the temperature, the
    condition, a page title. Like arguments, they must be copied, not remembered."""
    responses = _TOOL_RESPONSE.findall(context)
    if not responses:
        return []
    result_words = set(_WORD.findall(responses[-1]))
    return [m.span() for m in _WORD.finditer(segment) if m.group() in result_words]


THINK_OPEN = "<think>\n"
THINK_END = "</think>\n\n"
DECISION_TOKENS = 6  # tokens that commit a turn: a call or a reply, which thought ("The user wants")


def _weights(encoding, text: str, is_target: bool, context_weight: float, copy_weight: float,
             decision_weight: float, result_weight: float = 0.0, context: str = "", end_weight: float = 1.0) -> np.ndarray:
    weights = np.full(len(encoding.ids), 1.0 if is_target else context_weight, dtype=np.float32)
    if not is_target:
        return weights
    # The turn's closing <|im_end|>: one token per reply, and missing it makes a reply run
    # on until max_tokens, so it is weighted up with the other decisions.
    weights[-1] = end_weight
    # Where a turn branches (a call or a reply; which thought) a few tokens decide the rest,
    # and they are a tiny share of the loss unless weighted up.
    first_chars = [len(THINK_OPEN), text.index(THINK_END) + len(THINK_END)] if text.startswith(THINK_OPEN) else [0]
    starts = [next(i for i, (a, _) in enumerate(encoding.offsets) if a >= c) for c in first_chars]
    for start in starts:
        weights[start:start + DECISION_TOKENS] = decision_weight
    spans = [(span, copy_weight) for span in argument_spans(text)]
    if result_weight:
        spans += [(span, result_weight) for span in result_spans(text, context)]
    for (start, end), weight in spans:
        inside = [i for i, (a, b) in enumerate(encoding.offsets) if a < end and b > start]
        weights[inside] = weight
        # The first and last tokens are the hard ones: the copy circuit continues a value
        # once started, but where it starts and stops in the request must be learned.
        weights[[inside[0], inside[-1]]] = 2 * weight
    return weights


def encode(
    texts: Iterable[str], tokenizer: Tokenizer, *, context_weight: float = 0.0, copy_weight: float = 1.0,
    decision_weight: float = 1.0, result_weight: float = 0.0, end_weight: float = 1.0,
) -> list[Example]:
    """Tokenize rendered conversations segment by segment (see the module docstring).

    Args:
        texts: Rendered conversations.
        tokenizer: The tokenizer (``tokenizers.Tokenizer``) the model will be served with.
        context_weight: Loss weight of prompt tokens (assistant turns weigh 1). A small
            weight on the prompt gives the model many more examples of repeated spans
            (tool names, JSON keys, values) to learn copying from, at no extra cost.
        copy_weight: Loss weight of tool names and argument values in tool calls: the few
            tokens where the model decides (which tool) or copies (which city).
        decision_weight: Loss weight of the first tokens of each trained turn and of the
            answer after a think block, where the model chooses between a call and a reply.
        result_weight: Loss weight of the words an answer repeats from the tool result
            it answers (``result_spans``: the temperature, the condition); 0 leaves them
            at the weight of other answer text.
        end_weight: Loss weight of the ``<|im_end|>`` that closes each trained turn.
    """
    examples = []
    for text in texts:
        pieces = split_targets(text)
        encoded = tokenizer.encode_batch([s for s, _ in pieces], add_special_tokens=False)
        ids = np.concatenate([np.asarray(e.ids, dtype=np.int32) for e in encoded])
        starts = np.cumsum([0] + [len(s) for s, _ in pieces[:-1]])  # each piece's offset in ``text``
        target = np.concatenate([_weights(e, s, t, context_weight, copy_weight, decision_weight, result_weight,
                                          text[:start] if result_weight else "", end_weight)
                                 for e, (s, t), start in zip(encoded, pieces, starts)])
        examples.append(Example(ids=ids, target=target))
    return examples


@dataclass
class Batch:
    """Packed rows: inputs, next-token labels, and which positions are trained."""

    inputs: np.ndarray  # (B, T) int32
    labels: np.ndarray  # (B, T) int32
    weights: np.ndarray  # (B, T) float32, 1 where the label is an assistant token
    segments: np.ndarray  # (B, T) int32, 0 = padding, else example number within the row


def pack(examples: Sequence[Example], rows: int, length: int, rng: np.random.Generator) -> list[Batch]:
    """Pack examples into batches of ``rows`` x ``length`` tokens, first-fit decreasing.

    Several examples share a row (a block-diagonal mask, ``attention_mask``, keeps them
    apart); first-fit decreasing leaves only a few percent of padding, against a quarter
    for packing in arrival order. Examples longer than ``length + 1`` tokens are dropped
    by the caller. Row order is shuffled with ``rng``, so batches mix short and long rows.
    """
    order = rng.permutation(len(examples))
    # Stable sort on a shuffled order: ties are broken by rng, not by generation order.
    order = order[np.argsort([-len(examples[i].ids) for i in order], kind="stable")]
    packed: list[list[Example]] = []
    free: list[int] = []
    for i in order:
        n = len(examples[i].ids) - 1
        slot = next((r for r, room in enumerate(free) if room >= n), None)
        if slot is None:
            packed.append([])
            free.append(length)
            slot = len(packed) - 1
        packed[slot].append(examples[i])
        free[slot] -= n
    packed = [packed[r] for r in rng.permutation(len(packed))]
    return [_fill(packed[b:b + rows], length) for b in range(0, len(packed) - rows + 1, rows)]


def _fill(row_examples: list[list[Example]], length: int) -> Batch:
    shape = (len(row_examples), length)
    inputs, labels = np.zeros(shape, np.int32), np.zeros(shape, np.int32)
    weights, segments = np.zeros(shape, np.float32), np.zeros(shape, np.int32)
    for r, row in enumerate(row_examples):
        pos = 0
        for k, ex in enumerate(row, start=1):
            n = len(ex.ids) - 1
            inputs[r, pos:pos + n] = ex.ids[:-1]
            labels[r, pos:pos + n] = ex.ids[1:]
            weights[r, pos:pos + n] = ex.target[1:]
            segments[r, pos:pos + n] = k
            pos += n
    return Batch(inputs=inputs, labels=labels, weights=weights, segments=segments)


def attention_mask(segments: np.ndarray) -> np.ndarray:
    """(B, T, T) float 0/1: causal within an example; padding attends only to itself."""
    length = segments.shape[1]
    causal = np.tril(np.ones((length, length), dtype=bool))
    same = segments[:, :, None] == segments[:, None, :]
    mask = (same & causal) | np.eye(length, dtype=bool)
    return mask.astype(np.float32)


def batch_stream(
    tokenizer_path: Path,
    *,
    seed: int,
    rows: int,
    length: int,
    chunk: int = 512,
    long_fraction: float = 0.0,
    context_weight: float = 0.0,
    copy_weight: float = 1.0,
    decision_weight: float = 1.0,
    result_weight: float = 0.0,
    end_weight: float = 1.0,
    drill_fraction: float = 0.15,
    invented: float = 0.0,
    beyond: float = 0.0,
    decoys: float = 0.0,
) -> Iterator[Batch]:
    """Endless, deterministic stream of packed batches of fresh conversations.

    Chunk ``k`` draws its conversations from seed ``(seed, k)`` and is packed with its own
    numpy generator, so the stream depends only on ``seed`` (and the tokenizer).
    Conversations longer than one row are dropped rather than truncated, so that every
    trained turn keeps its system prompt and tool list.
    """
    from tokenizers import Tokenizer

    template = chat_template()
    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    for k in range(1 << 30):
        convs = conversations(seed * 1_000_003 + k, chunk, long_fraction=long_fraction, drill_fraction=drill_fraction,
                              invented=invented, beyond=beyond, decoys=decoys)
        texts = (render(c, template) for c in convs)
        examples = [e for e in encode(texts, tokenizer, context_weight=context_weight, copy_weight=copy_weight,
                                      decision_weight=decision_weight, result_weight=result_weight,
                                      end_weight=end_weight)
                    if len(e.ids) <= length + 1]
        yield from pack(examples, rows, length, np.random.default_rng([seed, k]))


def prefetch(batches: Iterator[Batch], depth: int = 4) -> Iterator[Batch]:
    """Produce ``batches`` on a background thread, ``depth`` ahead of the consumer.

    Rendering and tokenizing overlap with the training step (mlx and the tokenizer release
    the GIL). Order is preserved, so determinism is unaffected; an exception in the producer
    is re-raised in the consumer. Closing the returned generator stops the producer.
    """
    import queue
    import threading

    items: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def produce() -> None:
        try:
            for batch in batches:
                while not stop.is_set():
                    try:
                        items.put(batch, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
        except BaseException as exc:  # forwarded to the consumer, which re-raises it
            items.put(exc)
            return
        items.put(done)

    thread = threading.Thread(target=produce, name="demo-batches", daemon=True)
    thread.start()
    try:
        while (item := items.get()) is not done:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join(timeout=5)
