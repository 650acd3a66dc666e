"""The shipped demo model on prompts it was never trained on: it replies briefly and stops.

``engines/demo/unseen_prompts.txt`` holds a fixed set of greetings, questions, coding requests,
other languages and odd messages, written once by hand; the first test proves that none of
them occurs in the conversations the build trains on (nor in ``validation_prompts.txt``, the
set recipes are chosen on). Replies are greedy through mlx-lm's ``batch_generate``
(``evaluate.unseen_report``), 64 tokens at most.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from engines.demo import build, corpus, data, evaluate
from engines.demo import lexicon as lx

# Each stream draws chunks of 512 conversations, and a chunk packs into 20-23 batches of the
# shipped tokenizer (at least MIN_BATCHES_PER_CHUNK, checked below), so a stage of N steps
# reads at most N / MIN_BATCHES_PER_CHUNK chunks of its stream, and one more is a superset.
CHUNK = 512
MIN_BATCHES_PER_CHUNK = 18


def _stream_chunks(steps: int) -> int:
    return -(-steps // MIN_BATCHES_PER_CHUNK) + 1


def _normal(text: str) -> str:
    """Lower case words, punctuation and spacing dropped ("Hi, there!" = "hi there"); a
    message without words ("!!!") stays as it is."""
    words = " ".join(re.findall(r"\w+", text.lower()))
    return words or text.strip()


def _training_user_texts() -> set[str]:
    """Every user message of the conversations a build draws in its four stages (a
    superset), and of the tokenizer's corpus."""
    recipe = build.Recipe()
    texts: set[str] = set()
    for stream_seed, steps, invented, beyond, drills in _streams(recipe):
        for k in range(_stream_chunks(steps)):
            convs = corpus.conversations(stream_seed * 1_000_003 + k, CHUNK, long_fraction=recipe.long_fraction,
                                         drill_fraction=drills, invented=invented, beyond=beyond)
            texts |= {_normal(m["content"]) for c in convs for m in c.messages if m["role"] == "user"}
    texts |= {_normal(m["content"]) for c in corpus.conversations(7919, 3000) for m in c.messages if m["role"] == "user"}
    return texts


def _streams(recipe: build.Recipe) -> tuple[tuple[int, int, float, float, float], ...]:
    """(stream seed, steps, invented, beyond, drill fraction) of the build's four stages."""
    return ((0, recipe.steps, recipe.invented, 0.0, recipe.drill_fraction),
            (build.RESTART_STREAM_OFFSET, recipe.restart_steps, recipe.restart_invented, 0.0, recipe.drill_fraction),
            (build.COPY_STREAM_OFFSET, recipe.copy_steps, recipe.copy_invented, 0.0, recipe.copy_drill_fraction),
            (build.POLISH_STREAM_OFFSET, recipe.polish_steps, recipe.polish_invented, recipe.polish_beyond,
             recipe.polish_drill_fraction))


def test_a_chunk_of_each_stream_packs_into_enough_batches_for_the_leak_check():
    """``_training_user_texts`` reads as many chunks as a stage's steps need at
    MIN_BATCHES_PER_CHUNK batches each; a chunk that packed into fewer would leave training
    text unchecked."""
    from tokenizers import Tokenizer

    recipe = build.Recipe()
    tokenizer = Tokenizer.from_file(str(build.ARTIFACT_DIR / "tokenizer.json"))
    template = data.chat_template()
    for stream_seed, _, invented, beyond, drills in _streams(recipe):
        convs = corpus.conversations(stream_seed * 1_000_003, CHUNK, long_fraction=recipe.long_fraction,
                                     drill_fraction=drills, invented=invented, beyond=beyond)
        examples = [e for e in data.encode((data.render(c, template) for c in convs), tokenizer)
                    if len(e.ids) <= recipe.length + 1]
        batches = data.pack(examples, recipe.rows, recipe.length, np.random.default_rng([stream_seed, 0]))
        assert len(batches) >= MIN_BATCHES_PER_CHUNK, (stream_seed, len(batches))


@pytest.fixture(scope="module")
def trained_on() -> set[str]:
    """Every training user text (``_training_user_texts``) and every fixed string of the
    lexicon (a reply or a tool text is not a prompt, but a prompt equal to one would have been
    seen in the training text all the same), normalised."""
    seen = _training_user_texts()
    assert len(seen) > 5000  # the composed phrasings are many; a broken generator would give few
    return seen | {_normal(v) for name in dir(lx) if name.isupper() for v in _strings(getattr(lx, name))}


@pytest.mark.parametrize("path, at_least", [(evaluate.UNSEEN_PROMPTS_PATH, 200), (evaluate.VALIDATION_PROMPTS_PATH, 100)],
                         ids=["unseen", "validation"])
def test_prompt_sets_are_large_enough_and_never_in_training(trained_on, path, at_least):
    prompts = evaluate.unseen_prompts(path)
    assert len(prompts) >= at_least
    assert len({_normal(p) for _, p in prompts}) == len(prompts), "duplicates"
    assert {c for c, _ in prompts} == {"greeting", "question", "code", "language", "misc"}
    leaked = [p for _, p in prompts if _normal(p) in trained_on]
    assert not leaked


def test_validation_prompts_are_not_unseen_prompts():
    """Choosing a recipe on the validation set must not look at the set that measures it."""
    unseen = {_normal(p) for _, p in evaluate.unseen_prompts()}
    assert not [p for _, p in evaluate.unseen_prompts(evaluate.VALIDATION_PROMPTS_PATH) if _normal(p) in unseen]


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, tuple):
        return [s for item in value for s in _strings(item)]
    return []


@pytest.fixture(scope="module")
def unseen() -> dict:
    """The shipped fp32 artifact's replies to the unseen prompts (about 40 s on two cores)."""
    return evaluate.unseen_report(build.ARTIFACT_DIR)


# Issue 21's target for brief replies, missed by the shipped artifact: it ends 0.952 of these
# turns briefly (engines/demo/README.md; before its stages three and four, 0.63). Strict, so
# reaching it fails here until the marker goes.
MISSED = pytest.mark.xfail(strict=True, reason="issue 21 target missed by the shipped artifact (see README)")


@MISSED
def test_unseen_prompts_get_a_brief_reply_that_ends_its_turn(unseen):
    failed = [(prompt, text) for prompt, text, row in unseen["replies"] if not row["ends_briefly"]]
    assert unseen["all"]["ends_briefly"] >= 0.97, failed
    for kind, rates in unseen["groups"].items():
        assert rates["ends_briefly"] >= 0.9, (kind, rates)


def test_unseen_prompts_rarely_loop(unseen):
    # Issue 21's target, met with none to spare: 4 of 210 loop (0.019; before stages three and
    # four, 0.18; 5 before stage four's unlikelihood loss).
    looping = [(prompt, text) for prompt, text, row in unseen["replies"] if row["loops"]]
    assert unseen["all"]["loops"] < 0.02, looping


def test_unseen_prompt_rates_hold_at_least_what_the_shipped_artifact_measured(unseen):
    # Measured 0.952 ending briefly, 0.019 looping (greedy, CPU, 2026-12-07); greetings 1.0,
    # questions 0.86, code 0.975, other languages 0.93, the rest 1.0.
    assert unseen["all"]["ends_briefly"] >= 0.93
    assert unseen["all"]["loops"] <= 0.04
    assert unseen["groups"]["unseen_greeting"]["ends_briefly"] >= 0.9


def test_loop_detection_tells_repetition_from_a_reply():
    assert evaluate.loops("hikrekrekrekrekrekrekrekrekrekrek")
    assert evaluate.loops("Seo woo woo woo woo woo woo woo woooooooooooooooooooooooooooooooo")
    assert evaluate.loops('I found a page called "a page called "a page called "a page called "a page c')
    assert not evaluate.loops(lx.CAPABILITY_REPLY)
    assert not evaluate.loops("It is 21 degrees Celsius and sunny in Paris right now.")
    assert not evaluate.loops("Hello! How can I help you today?")

