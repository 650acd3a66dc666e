"""The prefix cache inside the scheduler: greedy output with a hit equals output without one.

Real tiny models of every cache type the served architectures use: ``KVCache`` (qwen3,
llama), the hybrid qwen3_next (``ArraysCache`` state plus attention layers) and a llama with
a sliding window (``RotatingKVCache`` layers), prompted before and after the window wraps.
Every comparison is token for token against a scheduler without a cache (fp32, greedy).
"""

from __future__ import annotations

import mlx.core as mx
import pytest
from mlx_lm.utils import load_model

from caches.prefix_cache import PrefixCache
from engines.protocol import AddRequest, FinishReason, SamplingParams
from engines.scheduler import SHARE_MIN_TOKENS, Scheduler
from tests.support.scheduling import run_requests

GREEDY = SamplingParams(temperature=0.0, logit_bias={2: -100.0})
WINDOW = 32
ARCHITECTURES = {
    "qwen3": {"arch": "qwen3"},
    "llama": {"arch": "llama"},
    "qwen3_next": {"arch": "qwen3_next"},
    "llama-sliding": {"arch": "llama", "sliding_window": WINDOW},
}
TRIMMABLE = {"qwen3", "llama"}  # (the sliding model only until its window wraps)


def tokens(seed: int, n: int) -> list[int]:
    return [3 + (seed * 131 + j * 17) % 400 for j in range(n)]


@pytest.fixture(scope="module", params=list(ARCHITECTURES))
def model(request, tiny_models):
    options = dict(ARCHITECTURES[request.param])
    loaded, _ = load_model(tiny_models.path(options.pop("arch"), **options))
    loaded.name = request.param
    return loaded


def scheduler(model, cache: PrefixCache | None = None, **options) -> Scheduler:
    return Scheduler(model, max_concurrency=options.get("max_concurrency", 8), prefill_step=options.get("prefill_step", 16),
                     max_context=4096, prefix_cache=cache)


def generate(engine: Scheduler, prompt: list[int], max_tokens: int = 12, request_id: str = "r") -> tuple[list[int], int]:
    """(output tokens, cached tokens reported) for one request run to its end."""
    outcome = run_requests(engine, [AddRequest(request_id, prompt, max_tokens, GREEDY, [2])])[request_id]
    assert outcome.last is not None and outcome.last.finish_reason is FinishReason.LENGTH, outcome.last
    return outcome.tokens, outcome.cached_tokens


@pytest.fixture
def engine(model):
    return scheduler(model, PrefixCache(memory_bytes=1 << 30))


def solo(model, prompt: list[int], max_tokens: int = 12) -> list[int]:
    return generate(scheduler(model), prompt, max_tokens)[0]


@pytest.mark.parametrize("length", [20, 60])  # the sliding model's window (32) wraps in the second
def test_the_same_prompt_again_hits_all_but_its_last_token(model, engine, length):
    prompt = tokens(1, length)
    first, cached = generate(engine, prompt, request_id="a")
    assert cached == 0
    again, cached = generate(engine, prompt, request_id="b")
    assert again == first == solo(model, prompt)
    assert cached == length - 1


@pytest.mark.parametrize("length", [20, 60])
def test_a_partial_hit_reuses_what_the_cache_can_rewind(model, engine, length):
    prompt = tokens(2, length)
    generate(engine, prompt, request_id="a")
    other = prompt[: length // 2] + tokens(3, 10)
    output, cached = generate(engine, other, request_id="b")
    assert output == solo(model, other)
    rewinds = model.name in TRIMMABLE or (model.name == "llama-sliding" and length < WINDOW)
    assert cached == (length // 2 if rewinds else 0)


@pytest.mark.parametrize("length", [20, 60])
def test_the_next_turn_continues_from_prompt_plus_output(model, engine, length):
    prompt = tokens(4, length)
    output, _ = generate(engine, prompt, max_tokens=6, request_id="a")
    # An agent's next turn: this prompt, the output as generated, then new tokens.
    turn = prompt + output + tokens(5, 9)
    following, cached = generate(engine, turn, request_id="b")
    assert following == solo(model, turn)
    # Every output token is fed as it is emitted: the snapshot holds the prompt and the whole output.
    assert cached == length + len(output)


def test_a_hit_at_the_end_of_a_prompt_serves_a_longer_prompt(model, engine):
    prompt = tokens(6, 40)
    generate(engine, prompt, request_id="a")
    longer = prompt[:-1] + tokens(7, 12)  # shares the prompt snapshot's tokens exactly (all but the last)
    output, cached = generate(engine, longer, request_id="b")
    assert output == solo(model, longer) and cached == len(prompt) - 1


def test_concurrent_sessions_and_an_abort_do_not_corrupt_each_other(model, engine):
    system = tokens(8, 48)
    prompts = {f"s{i}": system + tokens(20 + i, 6 + i) for i in range(8)}
    generate(engine, system + tokens(9, 5), request_id="warm")  # the shared system prompt is cached
    for request_id, prompt in prompts.items():
        engine.add(AddRequest(request_id, prompt, 10, GREEDY, [2]))
    engine.step()
    engine.abort(["s3"])
    outputs: dict[str, list[int]] = {rid: [] for rid in prompts}
    while engine.has_work:
        for delta in engine.step().outputs:
            outputs[delta.request_id] += delta.token_ids
    for request_id, prompt in prompts.items():
        if request_id != "s3":
            assert outputs[request_id] == solo(model, prompt, 10), request_id


@pytest.mark.parametrize("name_the_boundary", [True, False])
def test_concurrent_arrivals_prefill_a_shared_uncached_prefix_once(model, name_the_boundary):
    engine = scheduler(model, PrefixCache(memory_bytes=1 << 30), prefill_step=64)
    system = tokens(10, SHARE_MIN_TOKENS + 80)
    prompts = {f"agent{i}": system + tokens(30 + i, 12) for i in range(4)}
    # What the router sends for a model that cannot rewind: where the shared system prompt ends.
    boundary = (len(system),) if name_the_boundary else ()
    with engine._generator.stats() as stats:
        result = run_requests(engine, [AddRequest(rid, p, 8, GREEDY, [2], boundary) for rid, p in prompts.items()])
    for request_id, prompt in prompts.items():
        assert result[request_id].tokens == solo(model, prompt, 8), request_id
    if model.name not in TRIMMABLE and not name_the_boundary:
        # No snapshot of these caches rewinds to the shared part: nobody waits, each prefills its own.
        assert engine.shared_prefill_tokens == 0
        assert stats.prompt_tokens == sum(len(p) - 1 for p in prompts.values())
        return
    # One prefill of the shared part, then each agent's own tokens (the last of which goes in with decoding).
    assert stats.prompt_tokens == sum(len(p) - 1 for p in prompts.values()) - 3 * len(system)
    assert engine.shared_prefill_tokens == 3 * len(system)
    assert sorted(result[rid].cached_tokens for rid in prompts) == [0, len(system), len(system), len(system)]


@pytest.mark.parametrize("length", [20, 60])
def test_a_named_turn_boundary_serves_the_next_turn(model, engine, length):
    # A chat turn: the history, then a generation prompt the next turn's history will not contain.
    history, generation_prompt = tokens(14, length), tokens(15, 6)
    prompt = history + generation_prompt
    run_requests(engine, [AddRequest("a", prompt, 6, GREEDY, [2], (len(history),))])
    turn = history + tokens(16, 9)
    following, cached = generate(engine, turn, request_id="b")
    assert following == solo(model, turn)
    assert cached == len(history)  # from the boundary's snapshot, or the prompt's cut back to it


def test_snapshot_offsets_outside_the_prompt_are_refused(model, engine):
    result = run_requests(engine, [AddRequest("bad", tokens(17, 10), 4, GREEDY, [2], (3, 10))])["bad"]
    assert result.last.finish_reason is FinishReason.ERROR and "snapshot_at" in result.last.error


def test_the_budget_evicts_and_memory_returns(model):
    cache = PrefixCache(memory_bytes=1 << 30)
    engine = scheduler(model, cache)
    for i in range(6):
        generate(engine, tokens(40 + i, 64), request_id=f"r{i}")
    held = cache.stats.bytes
    assert cache.stats.entries >= 6 and held > 0
    mx.clear_cache()
    before = mx.get_active_memory()
    freed = cache.evict_to(held // 3)
    assert freed > 0 and cache.stats.bytes <= held // 3 and cache.stats.evictions > 0
    assert mx.get_active_memory() <= before - freed * 0.9  # the arrays are really gone, not just unlisted


@pytest.mark.parametrize("model", ["qwen3", "llama"], indirect=True)  # only caches that rewind wait for a shared prefill
def test_a_request_waiting_for_a_shared_prefill_can_be_aborted(model):
    engine = scheduler(model, PrefixCache(memory_bytes=1 << 30), prefill_step=32)
    system = tokens(11, SHARE_MIN_TOKENS + 40)
    engine.add(AddRequest("leader", system + tokens(12, 5), 6, GREEDY, [2]))
    engine.add(AddRequest("follower", system + tokens(13, 5), 6, GREEDY, [2]))
    assert engine.status().waiting == 2  # both queued until the next step feeds the generator
    assert engine.step().outputs == []  # the leader's first prefill chunk; the follower waits for it
    assert engine.status().waiting == 1 and engine.status().running == 1
    engine.add(AddRequest("follower", system, 6, GREEDY, [2]))  # an id in use, even while waiting
    engine.abort(["follower"])
    finished = {}
    while engine.has_work:
        for delta in engine.step().outputs:
            if delta.finish_reason is not None:
                finished.setdefault(delta.request_id, []).append(delta.finish_reason)
    assert finished["follower"] == [FinishReason.ERROR, FinishReason.ABORT]
    assert finished["leader"] == [FinishReason.LENGTH] and engine.status().waiting == 0
