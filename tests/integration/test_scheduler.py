"""The scheduler around BatchGenerator, on real tiny models of three architectures (no IPC)."""

from __future__ import annotations

import mlx.core as mx
import pytest
from mlx_lm.utils import load_model

from engines.protocol import AbortRequest, AddRequest, FinishReason, SamplingParams
from engines.scheduler import Scheduler
from tests.support.scheduling import run_to_completion

GREEDY = SamplingParams(temperature=0.0, logit_bias={2: -100.0})


def prompt(i: int) -> list[int]:
    return [3 + (i * 7 + j) % 300 for j in range(5 + 9 * i)]


@pytest.fixture(scope="module", params=["qwen3", "llama", "qwen3_next"])
def model(request, tiny_models):
    loaded, _ = load_model(tiny_models.path(request.param))
    return loaded


def new_scheduler(model, **options) -> Scheduler:
    return Scheduler(model, max_concurrency=options.get("max_concurrency", 8), prefill_step=options.get("prefill_step", 16), max_context=4096)


def test_batched_greedy_equals_solo(model):
    requests = [AddRequest(f"r{i}", prompt(i), 24, GREEDY, [2]) for i in range(6)]
    batched = run_to_completion(new_scheduler(model), requests)
    for request in requests:
        solo = run_to_completion(new_scheduler(model), [request])
        assert batched[request.request_id][0] == solo[request.request_id][0], request.request_id
        assert batched[request.request_id][1].finish_reason is FinishReason.LENGTH


def test_abort_frees_the_slot_immediately(model):
    scheduler = new_scheduler(model, max_concurrency=1)
    scheduler.add(AddRequest("long", prompt(1), 1000, GREEDY, [2]))
    scheduler.step()
    scheduler.abort(["long", "unknown"])  # unknown ids are ignored
    outputs = scheduler.step().outputs
    assert [(d.request_id, d.finish_reason) for d in outputs] == [("long", FinishReason.ABORT)]
    assert not scheduler.has_work
    result = run_to_completion(scheduler, [AddRequest("next", prompt(2), 3, GREEDY, [2])])
    assert len(result["next"][0]) == 3


def test_bad_requests_fail_alone(model):
    scheduler = new_scheduler(model)
    result = run_to_completion(scheduler, [
        AddRequest("too-long", prompt(1), 5000, GREEDY, [2]),
        AddRequest("empty", [], 4, GREEDY, [2]),
        AddRequest("fine", prompt(1), 4, GREEDY, [2]),
    ])
    assert result["too-long"][1].finish_reason is FinishReason.ERROR and "exceeds the context" in result["too-long"][1].error
    assert result["empty"][1].finish_reason is FinishReason.ERROR
    assert len(result["fine"][0]) == 4


def test_stop_token_ends_the_sequence_and_is_not_emitted(model):
    probe = run_to_completion(new_scheduler(model), [AddRequest("probe", prompt(3), 6, GREEDY, [2])])["probe"][0]
    stop_at = probe[3]
    result = run_to_completion(new_scheduler(model), [AddRequest("s", prompt(3), 6, GREEDY, [stop_at])])["s"]
    assert result[0] == probe[: probe.index(stop_at)]
    assert result[1].finish_reason is FinishReason.STOP


def test_seeded_sampling_does_not_depend_on_batch_neighbours(model):
    seeded = SamplingParams(temperature=1.0, seed=11, logit_bias={2: -100.0})
    alone = run_to_completion(new_scheduler(model), [AddRequest("x", prompt(2), 12, seeded, [2])])["x"][0]
    crowd = [AddRequest(f"n{i}", prompt(i), 12, SamplingParams(temperature=1.0), [2]) for i in range(3)]
    together = run_to_completion(new_scheduler(model), [*crowd, AddRequest("x", prompt(2), 12, seeded, [2])])["x"][0]
    assert alone == together


def test_logprobs_are_reported_per_token(model):
    request = AddRequest("lp", prompt(1), 4, SamplingParams(temperature=0.0, top_logprobs=3), [2])
    scheduler = new_scheduler(model)
    scheduler.add(request)
    entries = []
    while scheduler.has_work:
        for delta in scheduler.step().outputs:
            entries += delta.logprobs or []
    assert 1 <= len(entries) <= 4
    for entry in entries:
        assert len(entry.top) == 3 and entry.top[0].token_id == entry.token_id
        assert entry.top[0].logprob >= entry.top[1].logprob >= entry.top[2].logprob


def token_steps(scheduler: Scheduler, requests: list[AddRequest], max_steps: int = 2000) -> dict[str, list[tuple[int, int]]]:
    """Add ``requests`` at once and step until idle: each request's tokens, with the step that produced each."""
    for request in requests:
        scheduler.add(request)
    produced: dict[str, list[tuple[int, int]]] = {}
    for step in range(max_steps):
        if not scheduler.has_work:
            break
        for delta in scheduler.step().outputs:
            assert delta.error is None, delta.error
            produced.setdefault(delta.request_id, []).extend((step, token) for token in delta.token_ids)
    return produced


def test_a_short_prompt_in_a_burst_is_prefilled_before_longer_ones(model):
    # More long prompts than are prefilled at once, then a short one: it does not wait behind them.
    longs = [AddRequest(f"long-{i}", [3 + (i * 11 + j) % 300 for j in range(120)], 2, GREEDY, [2]) for i in range(9)]
    short = AddRequest("short", prompt(0), 2, GREEDY, [2])
    produced = token_steps(new_scheduler(model, max_concurrency=16), [*longs, short])
    assert produced["short"][0][0] < min(produced[request.request_id][0][0] for request in longs)


def test_a_long_prompt_is_prefilled_in_bounded_chunks_while_others_decode(model):
    scheduler = Scheduler(model, max_concurrency=8, prefill_step=4096, max_context=8192, prefill_share=0.05)
    scheduler.add(AddRequest("decoding", prompt(1), 400, GREEDY, [2]))
    for _ in range(4):  # it decodes, and the policy has measured a prefill and some decode steps
        scheduler.step()
    long = AddRequest("long", [3 + (j * 13) % 300 for j in range(1500)], 2, GREEDY, [2])
    produced = token_steps(scheduler, [long], max_steps=200)
    first = produced["long"][0][0]
    # Without the bound, 1500 tokens under a 4096-token cap would be one chunk, one step.
    assert first > 2
    decode_steps = [step for step, _ in produced["decoding"] if step <= first]
    assert decode_steps == list(range(first + 1))  # a token in every step while the long prompt prefilled
    solo = run_to_completion(new_scheduler(model, prefill_step=4096), [long])
    assert [token for _, token in produced["long"]] == solo["long"][0]  # the chunks changed no output


def test_logprobs_read_for_the_batch_at_once_equal_each_row_computed_alone(model):
    from engines.scheduler import batch_logprobs

    rows = [mx.log(mx.softmax(mx.random.normal((model.args.vocab_size,), key=mx.random.key(i)))) for i in range(5)]
    tokens, tops = [7, 0, 33, 2, 5], [3, 0, 5, 1, 20]
    together = batch_logprobs(rows, tokens, tops)
    for row, token, top, entry in zip(rows, tokens, tops, together):
        alone = [float(v) for v in mx.sort(row)[::-1][:top].tolist()]
        assert entry.token_id == token and entry.logprob == row[token].item()
        assert [alternative.logprob for alternative in entry.top] == alone
        assert all(row[alternative.token_id].item() == alternative.logprob for alternative in entry.top)


def test_presence_and_frequency_penalties_count_the_output_not_the_prompt(model):
    """OpenAI's penalties count tokens sampled so far: a prompt's own tokens are not penalized.

    The prompt is one that contains its own greedy first token, so a penalty over the prompt
    would change that token; over the output alone it cannot (nothing is sampled yet).
    """
    for i in range(20, 34):
        first = run_to_completion(new_scheduler(model), [AddRequest("p", prompt(i), 1, GREEDY, [2])])["p"][0][0]
        if first in prompt(i):
            break
    else:
        pytest.fail("no probe prompt contains its own greedy first token")
    plain = run_to_completion(new_scheduler(model), [AddRequest("plain", prompt(i), 48, GREEDY, [2])])["plain"][0]
    assert len(set(plain)) < len(plain), "the probe's greedy reply repeats a token, so a penalty has work to do"
    for field in ("presence_penalty", "frequency_penalty"):
        params = SamplingParams(temperature=0.0, logit_bias={2: -100.0}, **{field: 2.0})
        penalized = run_to_completion(new_scheduler(model), [AddRequest("x", prompt(i), 48, params, [2])])["x"][0]
        assert penalized[0] == plain[0], field  # the prompt did not count
        assert penalized != plain, field  # the output did
