"""A failure inside the engine fails only what it can be pinned on, and never poisons the next
request: on a real tiny model, with the scheduler and the engine loop driven directly.

Where a test injects a fault (a sampler that raises, a step that raises), it is because the
requests that used to cause them are now refused at the door; the fault itself is the same
one those requests produced (mlx-lm's compiled top-k raising mid-trace).
"""

from __future__ import annotations

import queue
import socket

import mlx.core as mx
import pytest
from mlx_lm.sample_utils import apply_top_k
from mlx_lm.utils import load_model

from engines import sampling
from engines.errors import EngineUnrecoverableError
from engines.protocol import (
    AddRequest,
    ErrorKind,
    FinishReason,
    SamplingParams,
    Shutdown,
    StepOutputs,
)
from engines.scheduler import ENGINE_FAILED, Scheduler
from engines.worker import EngineLoop
from tests.support.scheduling import read_outputs
from tests.support.scheduling import run_to_completion as run

SAMPLED = SamplingParams(temperature=1.0, logit_bias={2: -100.0})
SEEDED = SamplingParams(temperature=1.0, seed=5, logit_bias={2: -100.0})


@pytest.fixture(scope="module")
def model(tiny_models):
    loaded, _ = load_model(tiny_models.path("qwen3"))
    return loaded


def new_scheduler(model) -> Scheduler:
    return Scheduler(model, max_concurrency=8, prefill_step=16, max_context=4096)


def poison_random_state(vocab_size: int) -> None:
    """What a top_k of the vocabulary size did to the process: mlx-lm's compiled top-k raises
    while tracing, and leaves a placeholder in mx.random.state."""
    with pytest.raises(ValueError):
        apply_top_k(mx.zeros((1, vocab_size)), vocab_size)


def test_contract_violations_are_refused_at_add_and_fail_alone(model):
    scheduler = new_scheduler(model)
    vocab = scheduler.vocab_size
    bad = {
        "top_k": SamplingParams(temperature=1.0, top_k=vocab + 1),
        "seed": SamplingParams(temperature=1.0, seed=2**64),
        "nan": SamplingParams(temperature=float("nan")),
        "bias": SamplingParams(logit_bias={vocab: 1.0}),
    }
    requests = [AddRequest(name, [3, 4, 5], 4, params, [2]) for name, params in bad.items()]
    requests += [AddRequest("stop-id", [3, 4, 5], 4, SAMPLED, [2, vocab]), AddRequest("prompt-id", [3, vocab], 4, SAMPLED, [2])]
    requests.append(AddRequest("fine", [3, 4, 5], 4, SAMPLED, [2]))
    result = run(scheduler, requests)
    for request in requests[:-1]:
        delta = result[request.request_id][1]
        assert delta.finish_reason is FinishReason.ERROR and delta.error_kind is ErrorKind.INVALID_REQUEST, request.request_id
    assert len(result["fine"][0]) == 4 and result["fine"][1].finish_reason is FinishReason.LENGTH


def test_top_k_of_the_whole_vocabulary_and_negative_seeds_sample(model):
    """top_k equal to the vocabulary keeps every token (no filter); a negative seed is a 64-bit seed."""
    scheduler = new_scheduler(model)
    vocab = scheduler.vocab_size
    whole = SamplingParams(temperature=1.0, top_k=vocab, logit_bias={2: -100.0})
    negative = SamplingParams(temperature=1.0, seed=-1, logit_bias={2: -100.0})
    result = run(scheduler, [AddRequest("whole", [3, 4, 5], 6, whole, [2]), AddRequest("neg", [3, 4, 5], 6, negative, [2])])
    assert all(len(tokens) == 6 for tokens, _ in result.values())
    again = run(new_scheduler(model), [AddRequest("neg", [3, 4, 5], 6, negative, [2])])
    assert again["neg"][0] == result["neg"][0]  # seeded: the same tokens whatever ran beside it


def test_a_sampler_that_raises_fails_only_its_request(model, monkeypatch):
    """The row's exception is pinned on its request; the batch it ran in goes on, and the PRNG
    state its failure poisoned is restored for everyone after it."""
    scheduler = new_scheduler(model)
    vocab = scheduler.vocab_size
    real = sampling.make_sampler

    def make_sampler(params, vocab_size):
        if params.top_p == 0.5:  # marks the faulty request
            return lambda logprobs: apply_top_k(logprobs, vocab)  # raises while tracing, as top_k=vocab did
        return real(params, vocab_size)

    monkeypatch.setattr("engines.scheduler.make_sampler", make_sampler)
    faulty = SamplingParams(temperature=1.0, top_p=0.5)
    neighbours = [AddRequest(f"n{i}", [3, 4, 5 + i], 8, SAMPLED, [2]) for i in range(3)]
    result = run(scheduler, [*neighbours, AddRequest("faulty", [3, 4, 5], 8, faulty, [2])])
    assert result["faulty"][1].finish_reason is FinishReason.ERROR
    assert result["faulty"][1].error == ENGINE_FAILED and result["faulty"][1].error_kind is ErrorKind.ENGINE
    for request in neighbours:
        assert len(result[request.request_id][0]) == 8 and result[request.request_id][1].finish_reason is FinishReason.LENGTH
    later = run(scheduler, [AddRequest("later", [3, 4, 5], 4, SAMPLED, [2])])
    assert len(later["later"][0]) == 4


def test_a_step_that_raises_fails_the_batch_and_the_rebuilt_engine_serves(model, monkeypatch):
    """An unattributable failure (here: a raising step that also left the PRNG state poisoned,
    which is what kept every later request failing) fails what was in flight; after
    ``rebuild`` sampled requests work again, with the same seeded output as before."""
    scheduler = new_scheduler(model)
    before = run(scheduler, [AddRequest("seeded", [3, 4, 5], 6, SEEDED, [2])])["seeded"][0]
    scheduler.add(AddRequest("victim", [3, 4, 5], 50, SAMPLED, [2]))
    scheduler.step()
    real_next = scheduler._generator.next

    def failing_next():
        poison_random_state(scheduler.vocab_size)
        raise RuntimeError("simulated failure inside a step")

    monkeypatch.setattr(scheduler._generator, "next", failing_next)
    with pytest.raises(RuntimeError):
        scheduler.step()
    outputs = scheduler.fail_all().outputs
    assert [(d.request_id, d.finish_reason, d.error) for d in outputs] == [("victim", FinishReason.ERROR, ENGINE_FAILED)]
    assert "simulated" not in outputs[0].error  # the client sees our words; the detail is in the log
    scheduler.rebuild()
    assert scheduler._generator.next is not real_next
    after = run(scheduler, [AddRequest("seeded", [3, 4, 5], 6, SEEDED, [2]), AddRequest("plain", [3, 4], 6, SAMPLED, [2])])
    assert after["seeded"][0] == before and len(after["plain"][0]) == 6


def test_rebuild_gives_up_when_the_probe_fails(model, monkeypatch):
    scheduler = new_scheduler(model)

    def broken_forward(*args, **kwargs):
        raise RuntimeError("the model itself is broken")

    monkeypatch.setattr(scheduler, "_model", broken_forward)
    with pytest.raises(EngineUnrecoverableError, match="probe"):
        scheduler.rebuild()


def test_engine_loop_reports_failed_requests_then_stops_when_unrecoverable(model, monkeypatch):
    """The worker's loop: a failed step sends every in-flight request its error; a rebuild that
    cannot recover stops the loop with a reason (serve() then sends WorkerFatal and exits 1)."""
    scheduler = new_scheduler(model)
    ours, theirs = socket.socketpair()
    inbox: queue.Queue = queue.Queue()
    inbox.put(AddRequest("a", [3, 4, 5], 50, SAMPLED, [2]))
    loop = EngineLoop(scheduler, inbox, theirs)
    steps = 0

    def step():
        nonlocal steps
        steps += 1
        if steps == 3:
            monkeypatch.setattr(scheduler, "_model", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("broken")))
            raise RuntimeError("step failed")
        return Scheduler.step(scheduler)

    monkeypatch.setattr(scheduler, "step", step)
    loop.run()  # returns by itself: the rebuild's probe fails
    theirs.close()
    frames = read_outputs(ours)
    assert loop.fatal is not None and "probe" in loop.fatal
    finals = [d for f in frames if isinstance(f, StepOutputs) for d in f.outputs if d.finish_reason is not None]
    assert [(d.request_id, d.finish_reason, d.error_kind) for d in finals] == [("a", FinishReason.ERROR, ErrorKind.ENGINE)]
    assert inbox.empty() or isinstance(inbox.get_nowait(), Shutdown)
