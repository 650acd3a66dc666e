"""Constrained decoding in the scheduler: grammar masks under continuous batching, on real tiny
models with their own tokenizers (no IPC)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import llguidance
import pytest
from mlx_lm.utils import load_model
from transformers import AutoTokenizer

from engines.grammar import GrammarCompiler, GrammarError
from engines.grammar_mask import MaskBatch
from engines.protocol import AddRequest, FinishReason, SamplingParams
from engines.scheduler import Scheduler
from tests.support.scheduling import run_requests

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 8}, "n": {"type": "integer", "minimum": 0, "maximum": 99},
                   "kind": {"enum": ["a", "b"]}},
    "required": ["name", "n", "kind"],
    "additionalProperties": False,
}
GRAMMAR = llguidance.LLMatcher.grammar_from_json_schema(json.dumps({**SCHEMA, "x-guidance": {"whitespace_pattern": " ?"}}))


@pytest.fixture(scope="module", params=["qwen3", "llama"])
def setup(request, tiny_models):
    path = tiny_models.path(request.param)
    model, _ = load_model(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    return model, tokenizer, GrammarCompiler(path)


def prompt(i: int) -> list[int]:
    return [3 + (i * 11 + j) % 300 for j in range(6 + 5 * i)]


def scheduler_for(model) -> Scheduler:
    return Scheduler(model, max_concurrency=8, prefill_step=16, max_context=4096)


def test_constrained_and_free_sequences_decode_together(setup):
    model, tokenizer, compiler = setup
    stops = [tokenizer.eos_token_id]
    free = [AddRequest(f"free{i}", prompt(i), 12, SamplingParams(temperature=0.0), stops) for i in range(3)]
    constrained = [AddRequest(f"json{i}", prompt(i + 3), 200, SamplingParams(temperature=1.0, seed=i), stops, grammar=GRAMMAR)
                   for i in range(4)]
    scheduler = scheduler_for(model)
    together = run_requests(scheduler, [*free, *constrained], matchers={r.request_id: compiler.matcher(GRAMMAR) for r in constrained})
    masks = scheduler.grammar_masks
    assert masks.widest == len(constrained)  # the four masks of a step computed together, not one by one
    assert masks.refreshes < masks.masks_computed
    for request in constrained:
        outcome = together[request.request_id]
        assert outcome.last.finish_reason is FinishReason.STOP, outcome.last
        jsonschema.validate(json.loads(tokenizer.decode(outcome.tokens)), SCHEMA)
    for request in free:  # a neighbour's mask changes nothing of a free sequence
        alone = run_requests(scheduler_for(model), [request])[request.request_id]
        assert together[request.request_id].tokens == alone.tokens


def test_compiled_grammars_are_cached_and_each_request_gets_its_own_matcher(setup):
    _, _, compiler = setup
    _, tokenizer, _ = setup
    first, second = compiler.matcher(GRAMMAR), compiler.matcher(GRAMMAR)
    text = tokenizer.encode('{"name": "x", "n": 1, "kind": "a"}', add_special_tokens=False)
    assert first.consume_tokens(text) and first.is_accepting()
    assert not second.is_accepting() and second.consume_tokens(text)  # the first's progress is its own


def test_a_grammar_that_does_not_compile_is_the_requests_error(setup):
    _, _, compiler = setup
    with pytest.raises(GrammarError):
        compiler.matcher("start: NOPE\n")  # a rule that does not exist


def test_a_complete_grammar_leaves_only_the_stop_tokens(setup):
    _, tokenizer, compiler = setup
    matcher = compiler.matcher(llguidance.LLMatcher.grammar_from_lark('start: "ok"'))
    assert matcher.consume_tokens(tokenizer.encode("ok", add_special_tokens=False))
    mask = MaskBatch(vocab_size=512).mask(matcher, prompt_tokens=0, stop_token_ids=[tokenizer.eos_token_id, 5])
    assert sorted(mask.allowed().nonzero()[0].tolist()) == sorted({tokenizer.eos_token_id, 5})


def test_a_masks_failure_is_its_own_sequences_in_a_shared_refresh(setup):
    """A complete grammar with no stop token to end on allows nothing: that mask fails, and its
    neighbour, refreshed in the same call, gets its own allowed set."""
    _, tokenizer, compiler = setup
    batch = MaskBatch(vocab_size=512)
    done = compiler.matcher(llguidance.LLMatcher.grammar_from_lark('start: "ok"'))
    assert done.consume_tokens(tokenizer.encode("ok", add_special_tokens=False)) and done.is_stopped()
    stuck = batch.mask(done, prompt_tokens=0, stop_token_ids=[])
    fine = batch.mask(compiler.matcher(GRAMMAR), prompt_tokens=0, stop_token_ids=[tokenizer.eos_token_id])
    with pytest.raises(GrammarError, match="allows no token"):
        stuck.allowed()
    brace = tokenizer.encode("{", add_special_tokens=False)[0]
    assert fine.allowed()[brace] and not fine.allowed()[tokenizer.eos_token_id]
    assert (batch.refreshes, batch.widest) == (1, 2)


def test_masks_cover_a_vocabulary_padded_past_the_tokenizer(setup):
    """Checkpoints pad their logits past the tokenizer (Qwen: 151,936 rows, 151,665 tokens): the
    mask has a bit per row and the padding is never allowed."""
    _, tokenizer, _ = setup
    rows = len(tokenizer) + 40
    padded = GrammarCompiler(Path(tokenizer.name_or_path), vocab_size=rows)
    mask = MaskBatch(vocab_size=rows).mask(padded.matcher(GRAMMAR), prompt_tokens=0, stop_token_ids=[])
    allowed = mask.allowed()
    assert allowed.shape == (rows,) and allowed.any() and not allowed[len(tokenizer):].any()


def test_sampling_settings_act_inside_the_allowed_set(setup):
    """logit_bias can favour an allowed token (and never re-allow a masked one); max_tokens
    still ends a constrained sequence with finish_reason length."""
    model, tokenizer, compiler = setup
    stops = [tokenizer.eos_token_id]
    grammar = llguidance.LLMatcher.grammar_from_lark('start: ("a" | "b")+')
    a, b = (tokenizer.convert_tokens_to_ids(t) for t in ("a", "b"))
    favour_b = SamplingParams(temperature=0.0, logit_bias={b: 50.0, 7: 100.0})  # 7 is outside the grammar
    request = AddRequest("bias", prompt(1), 6, favour_b, stops, grammar=grammar)
    outcome = run_requests(scheduler_for(model), [request], matchers={"bias": compiler.matcher(grammar)})["bias"]
    assert outcome.tokens == [b] * 6 and outcome.last.finish_reason is FinishReason.LENGTH
    favour_a = SamplingParams(temperature=1.0, seed=3, top_k=2, logit_bias={a: 50.0})
    request = AddRequest("topk", prompt(2), 5, favour_a, stops, grammar=grammar)
    outcome = run_requests(scheduler_for(model), [request], matchers={"topk": compiler.matcher(grammar)})["topk"]
    assert outcome.tokens == [a] * 5


def test_the_engine_loop_fails_a_bad_grammar_alone_and_drops_one_aborted_while_compiling(setup, tmp_path):
    """Compiles happen off the engine thread: a grammar that does not compile (or a compile that
    fails outright, here a model directory without a tokenizer) fails its request only; a request
    aborted before its grammar compiled never starts; a free request beside them completes."""
    import queue
    import socket

    from engines.protocol import AbortRequest, ErrorKind, Shutdown, StepOutputs
    from engines.worker import EngineLoop
    from tests.support.scheduling import read_outputs

    model, tokenizer, compiler = setup
    stops = [tokenizer.eos_token_id]
    greedy = SamplingParams(temperature=0.0)
    ours, theirs = socket.socketpair()
    inbox: queue.Queue = queue.Queue()
    for message in (AddRequest("bad", prompt(1), 8, greedy, stops, grammar="start: NOPE\n"),
                    AddRequest("gone", prompt(2), 8, greedy, stops, grammar=GRAMMAR),
                    AbortRequest(["gone"]),
                    AddRequest("free", prompt(3), 4, greedy, stops)):
        inbox.put(message)
    loop = EngineLoop(scheduler_for(model), inbox, theirs, compiler)
    no_tokenizer = EngineLoop(scheduler_for(model), queue.Queue(), theirs, GrammarCompiler(tmp_path))
    no_tokenizer._inbox.put(AddRequest("broken", prompt(1), 8, greedy, stops, grammar=GRAMMAR))

    def run_for(engine: EngineLoop, seconds: float) -> None:
        """Run the loop, then shut it down: long enough for the compiles and four free steps."""
        import threading

        threading.Timer(seconds, lambda: engine._inbox.put(Shutdown())).start()
        engine.run()

    run_for(loop, 3)
    run_for(no_tokenizer, 3)
    theirs.close()
    finals = {d.request_id: d for f in read_outputs(ours) if isinstance(f, StepOutputs) for d in f.outputs if d.finish_reason}
    assert finals["bad"].error_kind is ErrorKind.INVALID_REQUEST and "does not compile" in finals["bad"].error
    assert finals["broken"].error_kind is ErrorKind.ENGINE
    assert finals["free"].finish_reason is FinishReason.LENGTH and "gone" not in finals
    assert loop.fatal is None and no_tokenizer.fatal is None
