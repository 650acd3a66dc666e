"""The prefill policy's decisions: admission order and the per-step prefill budget."""

from __future__ import annotations

import pytest

from engines.prefill_policy import MIN_CHUNK, AdmissionQueue, PrefillPolicy


def drain(queue: AdmissionQueue) -> list:
    return [queue.pop() for _ in range(len(queue))]


def test_shortest_remaining_prefill_goes_first_and_ties_keep_arrival_order():
    queue = AdmissionQueue(max_overtaken=100)
    for name, remaining in [("long", 900), ("short", 10), ("mid", 200), ("short-2", 10)]:
        queue.push(name, remaining)
    assert queue.peek() == ("short", 10)
    assert drain(queue) == ["short", "short-2", "mid", "long"]


def test_no_entry_is_overtaken_more_than_the_bound():
    queue = AdmissionQueue(max_overtaken=2)
    queue.push("long", 5000)
    order = []
    for i in range(4):  # short requests keep arriving, one per pop
        queue.push(f"short-{i}", 10)
        order.append(queue.pop())
    assert order == ["short-0", "short-1", "long", "short-2"]


def test_remove_takes_out_matching_entries_only():
    queue = AdmissionQueue(max_overtaken=8)
    for name in ["a", "b", "c"]:
        queue.push(name, 1)
    assert queue.remove(lambda item: item != "b") == ["a", "c"]
    assert list(queue) == ["b"] and len(queue) == 1


def test_nothing_decoding_or_no_costs_yet_means_the_operators_cap_and_no_budget():
    policy = PrefillPolicy(cap=2048)
    assert policy.plan(decoding=5).chunk == 2048 and policy.plan(decoding=5).budget is None  # nothing measured yet
    policy.observe(prompt_tokens=1000, prompt_s=1.0, decode_steps=1, decode_s=0.05)
    assert policy.plan(decoding=0).chunk == 2048 and policy.plan(decoding=0).budget is None


@pytest.mark.parametrize(("share", "expected"), [(0.5, 50), (0.9, 450), (0.8, 200)])
def test_while_sequences_decode_prefill_gets_its_share_of_a_step(share, expected):
    policy = PrefillPolicy(cap=2048, share=share)
    policy.observe(prompt_tokens=1000, prompt_s=1.0, decode_steps=1, decode_s=0.05)  # 1 ms a token, 50 ms a step
    plan = policy.plan(decoding=3)
    assert plan.budget == pytest.approx(expected, abs=1) and plan.chunk == plan.budget


def test_the_cap_and_the_smallest_chunk_bound_the_plan():
    cheap = PrefillPolicy(cap=256, share=0.9)
    cheap.observe(prompt_tokens=10_000, prompt_s=0.01, decode_steps=1, decode_s=0.02)  # prefill nearly free (a GPU)
    assert cheap.plan(decoding=8).chunk == 256
    dear = PrefillPolicy(cap=2048, share=0.5)
    dear.observe(prompt_tokens=10, prompt_s=1.0, decode_steps=1, decode_s=0.001)
    assert dear.plan(decoding=8).chunk == MIN_CHUNK
    assert PrefillPolicy(cap=16, share=0.5, token_s=1.0, decode_step_s=0.001).plan(decoding=1).chunk == 16


def test_a_share_of_one_turns_the_bound_off():
    policy = PrefillPolicy(cap=2048, share=1.0, token_s=1.0, decode_step_s=0.001)
    assert policy.plan(decoding=8).budget is None


def test_costs_follow_recent_steps_smoothly():
    policy = PrefillPolicy(cap=2048)
    policy.observe(prompt_tokens=100, prompt_s=1.0, decode_steps=0, decode_s=0.0)
    assert policy.token_s == pytest.approx(0.01) and policy.decode_step_s is None
    policy.observe(prompt_tokens=100, prompt_s=2.0, decode_steps=2, decode_s=0.2)
    assert 0.01 < policy.token_s < 0.02 and policy.decode_step_s == pytest.approx(0.1)
