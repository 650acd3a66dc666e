"""Unit tests of the demo-model build pieces: corpus, rendering, packing, training forward, circuit."""

from __future__ import annotations

import hashlib
import json
import random
import re

import mlx.core as mx
import numpy as np
import pytest
from mlx.utils import tree_flatten
from tokenizers import Tokenizer

from engines.demo import build, circuit, corpus, data, train
from engines.demo import lexicon as lx


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo-tokenizer")
    build.build_tokenizer(out, seed=0, count=300)
    return out


@pytest.fixture(scope="module")
def name_space_tokenizer_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo-tokenizer-name-spaces")
    build.build_tokenizer(out, seed=0, count=300, name_spaces=True)
    return out


def test_conversations_are_deterministic_and_never_mention_heldout_values():
    first = corpus.conversations(seed=3, count=200)
    again = corpus.conversations(seed=3, count=200)
    assert [c.messages for c in first] == [c.messages for c in again]
    text = json.dumps([[c.messages, c.tools] for c in first])
    for value in lx.HELDOUT_CITIES + lx.HELDOUT_SEARCH_WORDS:
        assert not re.search(rf"\b{re.escape(value)}\b", text), value
    for path in lx.HELDOUT_FILE_NAMES:
        assert path not in text


def test_decoy_cities_start_like_a_training_city_and_never_contain_a_heldout_one():
    names = [corpus.ArgumentSource(random.Random(seed), invented=1.0, decoys=1.0).city() for seed in range(400)]
    assert all(any(n.startswith(c[:2]) for c in corpus.SINGLE_WORD_TRAIN_CITIES) for n in names)
    assert not set(names) & set(lx.TRAIN_CITIES)  # decoys, not training cities
    assert any(" " in n for n in names) and any(n[:-1] in lx.TRAIN_CITIES for n in names)  # all three shapes
    for name in names:
        assert not any(held.lower() in name.lower() for held in lx.HELDOUT_CITIES), name

    def digest(**settings) -> str:
        return hashlib.sha256(json.dumps([c.messages for c in corpus.conversations(seed=5, count=80, **settings)])
                              .encode()).hexdigest()

    # Without decoys, stages three and four draw the streams they drew before decoys existed
    # (digests taken then): not one extra draw, so the shipped recipe still builds the shipped weights.
    copying, manners = dict(invented=1.0, drill_fraction=0.25), dict(invented=0.8, beyond=0.3, drill_fraction=0.08)
    assert digest(**copying, decoys=0.0) == "84c4b14c7cd80ce4f2c898995cfcb5a2cff0982869c82342f6f7166adfd39d35"
    assert digest(**manners, decoys=0.0) == "5a22ae93f5896c6deb46783af4d20523fcec3cdd3bd4a76d3d7b4177ff05c308"
    assert digest(**manners, decoys=0.3) != digest(**manners, decoys=0.0)


def test_split_targets_marks_only_turns_the_model_must_write():
    template = data.chat_template()
    conv = corpus.Conversation(
        messages=[
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},  # history as a client sends it: not trained
            {"role": "user", "content": "What's the weather in Paris?"},
            {"role": "assistant", "content": "", "reasoning_content": corpus.EMPTY_REASONING,
             "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
            {"role": "tool", "content": "{}"},
            {"role": "assistant", "content": "Sunny.", "reasoning_content": "Easy."},
        ],
        tools=[corpus.WEATHER_TOOL],
    )
    targets = [s for s, is_target in data.split_targets(data.render(conv, template)) if is_target]
    assert targets == [
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>',
        "<think>\nEasy.\n</think>\n\nSunny.<|im_end|>",
    ]
    # The prompt before a non-thinking target is exactly the enable_thinking=false prompt.
    prompt = data.render(corpus.Conversation(conv.messages[:3], conv.tools), template,
                         add_generation_prompt=True, enable_thinking=False)
    assert data.render(conv, template).startswith(prompt + targets[0])


def test_argument_spans_cover_values_and_closing_quote():
    segment = '<tool_call>\n{"name": "web_search", "arguments": {"query": "jazz news"}}\n</tool_call><|im_end|>'
    assert [segment[a:b] for a, b in data.argument_spans(segment)] == ['web_search"', "query", 'jazz news"']


@pytest.mark.parametrize("tokenizer", ["tokenizer_dir", "name_space_tokenizer_dir"])
def test_city_has_the_same_tokens_in_request_and_arguments(tokenizer, request):
    tok = Tokenizer.from_file(str(request.getfixturevalue(tokenizer) / "tokenizer.json"))
    for city in lx.HELDOUT_CITIES:
        in_request = tok.encode(f"What's the weather in {city}?").ids
        in_json = tok.encode(json.dumps({"city": city})).ids
        city_ids = tok.encode(city).ids
        assert any(in_request[i:i + len(city_ids)] == city_ids for i in range(len(in_request))), city
        assert any(in_json[i:i + len(city_ids)] == city_ids for i in range(len(in_json))), city


def test_a_space_inside_a_name_is_not_the_space_after_one(name_space_tokenizer_dir, tokenizer_dir):
    """With ``Recipe.name_spaces`` the space before a name's next capitalised word is one token
    with that capital, for every capital, so "Kuala" + " L" continues a name where "Munich" +
    " " never does; without it, both are the plain space."""
    tok = Tokenizer.from_file(str(name_space_tokenizer_dir / "tokenizer.json"))

    def pieces(text: str) -> list[str]:
        return [tok.id_to_token(i) for i in tok.encode(text, add_special_tokens=False).ids]

    for letter in map(chr, range(ord("A"), ord("Z") + 1)):
        assert tok.token_to_id("Ġ" + letter) is not None, letter
    assert "ĠL" in pieces("the weather in Kuala Lumpur today") and "ĠC" in pieces("Salt Lake City")
    for text in ("weather in Munich today", "Check the forecast for Osaka please.", "Is it cold in Oslo?"):
        ids = tok.encode(text, add_special_tokens=False).ids
        assert [tok.id_to_token(i) for i in ids].count("Ġ") == text.count(" "), text
    assert pieces("Rio de Janeiro").count("Ġ") == 2  # a lower-case word in between ends the name run
    plain = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    assert plain.token_to_id("Ġ") in plain.encode("Kuala Lumpur", add_special_tokens=False).ids


def test_pack_keeps_examples_whole_and_apart(tokenizer_dir):
    template = data.chat_template()
    texts = [data.render(c, template) for c in corpus.conversations(seed=1, count=60)]
    examples = [e for e in data.encode(texts, Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json")), context_weight=0.1) if len(e.ids) <= 257]
    batches = data.pack(examples, rows=2, length=256, rng=np.random.default_rng(0))
    packed_tokens = sum(int((b.segments > 0).sum()) for b in batches)
    assert packed_tokens <= sum(len(e.ids) - 1 for e in examples)
    assert packed_tokens / sum(b.segments.size for b in batches) > 0.85  # first-fit decreasing wastes little
    mask = data.attention_mask(batches[0].segments)
    seg = batches[0].segments[0]
    i, j = np.nonzero(seg[:, None] != seg[None, :])
    assert not mask[0][i, j].any()  # no attention across examples


def test_prefetch_preserves_order_and_raises_producer_errors():
    def produce():
        yield from range(5)
        raise ValueError("boom")

    got = []
    with pytest.raises(ValueError, match="boom"):
        for item in data.prefetch(produce(), depth=2):
            got.append(item)
    assert got == [0, 1, 2, 3, 4]


def test_training_forward_matches_mlx_lm():
    mx.set_default_device(mx.cpu)
    config = build.model_config(512)
    model = build.init_model(config, seed=0, copy_circuit=False)
    inputs = mx.array([[random.Random(0).randrange(512) for _ in range(96)]])
    assert train.check_forward(model, inputs) < 1e-3


def test_fast_exp_is_accurate():
    x = mx.linspace(-30, 30, 2001)
    rel = mx.abs(train.fast_exp(x) / mx.exp(x) - 1).max().item()
    assert rel < 3e-4  # float32 rounding, doubled by each of the ten squarings


def test_copy_circuit_copies_before_any_training():
    mx.set_default_device(mx.cpu)
    config = build.model_config(1024)
    model = build.init_model(config, seed=0)
    rng = np.random.default_rng(0)
    hits = total = 0
    for _ in range(5):
        seq = rng.choice(np.arange(10, 1024), size=40, replace=False)
        ids = np.concatenate([[1], seq, rng.integers(10, 1024, 100), seq[:20]])
        pred = np.array(mx.argmax(model(mx.array(ids[None]))[0], -1))
        start = 1 + 40 + 100
        hits += sum(pred[start + k] == seq[k + 1] for k in range(19))
        total += 19
    assert hits / total > 0.9


def test_pointer_seed_redraws_only_the_pointer_heads_query_and_key():
    mx.set_default_device(mx.cpu)
    config = build.model_config(1024)
    own = dict(tree_flatten(build.init_model(config, seed=0).parameters()))
    redrawn = dict(tree_flatten(build.init_model(config, seed=0, pointer_seed=7).parameters()))
    again = dict(tree_flatten(build.init_model(config, seed=0, pointer_seed=7).parameters()))
    other = dict(tree_flatten(build.init_model(config, seed=0, pointer_seed=8).parameters()))
    changed = sorted(k for k in own if not np.array_equal(np.array(own[k]), np.array(redrawn[k])))
    last = f"model.layers.{config['num_hidden_layers'] - 1}.self_attn"
    assert changed == [f"{last}.k_proj.weight", f"{last}.q_proj.weight"]
    head = config["head_dim"]
    bound = 1 / np.sqrt(config["hidden_size"])
    for name in changed:
        old, new = np.array(own[name]), np.array(redrawn[name])
        assert np.array_equal(old[:head], new[:head])  # the induction head is untouched
        # nn.Linear's uniform draw within the bound (its std is bound / sqrt 3), filling the rows
        assert np.abs(new[head:]).max() <= bound and new[head:].std() > bound / 2
        assert np.array_equal(new, np.array(again[name]))
        assert not np.array_equal(new, np.array(other[name]))


def test_turn_openings_and_arguments_are_weighted_up(tokenizer_dir):
    """The tokens that choose call-or-reply (and which thought) weigh ``decision_weight``."""
    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>'
    thought = "<think>\nThe user wants the weather.\n</think>\n\nIt is sunny.<|im_end|>"
    for text in (call, thought):
        encoding = tok.encode(text, add_special_tokens=False)
        weights = data._weights(encoding, text, True, 0.1, 4.0, 3.0)
        pieces = [text[a:b] for a, b in encoding.offsets]
        if text is call:
            assert list(weights[:data.DECISION_TOKENS]) == [3.0] * data.DECISION_TOKENS
            assert weights[pieces.index("Paris")] == 8.0  # an argument's first token: 2 x copy_weight
        else:
            opening = pieces.index("The")
            assert weights[opening] == 3.0 and weights[:opening].tolist() == [1.0] * opening
            assert weights[pieces.index("It")] == 3.0
    prompt = tok.encode("Hello", add_special_tokens=False)
    assert data._weights(prompt, "Hello", False, 0.1, 4.0, 3.0).tolist() == [np.float32(0.1)] * len(prompt.ids)


def test_result_spans_mark_what_an_answer_repeats_from_the_tool_result():
    context = ('<|im_start|>user\n<tool_response>\n{"city": "Oslo", "temperature": -4, "unit": "celsius", '
               '"condition": "windy"}\n</tool_response><|im_end|>\n<|im_start|>assistant\n')
    answer = "In Oslo it is currently windy at -4 degrees Celsius.<|im_end|>"
    assert [answer[a:b] for a, b in data.result_spans(answer, context)] == ["Oslo", "windy", "4"]
    assert data.result_spans(answer, "<|im_start|>user\nHi<|im_end|>\n") == []


def test_result_weight_applies_only_when_asked(tokenizer_dir):
    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    text = ('<|im_start|>user\n<tool_response>\n{"temperature": 21}\n</tool_response><|im_end|>\n'
            '<|im_start|>assistant\n<think>\n\n</think>\n\nIt is 21 degrees.<|im_end|>')
    plain, weighted = (data.encode([text], tok, result_weight=w)[0] for w in (0.0, 3.0))
    changed = np.nonzero(plain.target != weighted.target)[0]
    assert [tok.decode([int(weighted.ids[i])]) for i in changed] == ["2", "1"]
    assert weighted.target[changed].tolist() == [6.0, 6.0]  # first and last token of "21"


def _last_layer_keys(model, ids: list[int]) -> np.ndarray:
    """The pointer head's (head 1) normalised keys of the last layer, before RoPE."""
    mask = mx.array(np.tril(np.ones((1, len(ids), len(ids)), np.float32)))
    h = train.residual(model, mx.array([ids]), mask, layers=-1)
    last = model.model.layers[-1]
    attn = last.self_attn
    keys = attn.k_norm(attn.k_proj(last.input_layernorm(h)).reshape(1, len(ids), attn.n_kv_heads, -1))
    return np.array(keys[0, :, 1])


def test_pointer_keys_mark_value_starts_and_arguments(tokenizer_dir):
    """Untrained, the pointer head's written keys rank a JSON number's first token, each string
    value's first token and a request's argument above every other position."""
    mx.set_default_device(mx.cpu)
    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    config = build.model_config(tok.get_vocab_size())
    keys = circuit.PointerKeys(build.pointer_cues(tokenizer_dir / "tokenizer.json"))
    model = build.init_model(config, seed=0, pointer_keys=keys)
    text = ('What is the weather in Lisbon today? {"city": "Lisbon", "temperature": 21, "unit": "celsius", '
            '"condition": "sunny"}')
    encoding = tok.encode(text, add_special_tokens=False)
    starts = [a for a, _ in encoding.offsets]
    keys = _last_layer_keys(model, encoding.ids)
    number, string, argument = (keys[:, plane] for plane in circuit.POINTER_PLANES)

    def at(fragment: str, occurrence: int = 0) -> int:
        # The token starting where the ``occurrence``-th ``fragment`` starts in ``text``.
        position = [m.start() for m in re.finditer(re.escape(fragment), text)][occurrence]
        return starts.index(position)

    assert int(np.argmax(number)) == at("21")
    string_values = {at("Lisbon", 1), at("celsius"), at("sunny")}
    assert set(np.argsort(string)[-3:].tolist()) == string_values
    assert int(np.argmax(argument)) == at("Lisbon")


def test_answer_facts_are_scored_as_whole_words():
    from engines.demo import evaluate

    case = {"thinking": False, "expect": {"facts": {"city": "Oslo", "temperature": "21", "condition": "windy"}}}
    right = evaluate.score(case, "In Oslo it is currently windy at 21 degrees Celsius.", True)
    assert right["uses_result"] and right["states_temperature"]
    wrong = evaluate.score(case, "In Oslo it is currently windy at 2 degrees Celsius.", True)
    assert not wrong["states_temperature"] and not wrong["uses_result"] and wrong["states_condition"]
    case["expect"]["facts"]["temperature"] = "4"
    assert not evaluate.score(case, "In Oslo it is windy at -4 degrees.", True)["states_temperature"]


def test_pointer_copies_a_new_argument_before_any_training(tokenizer_dir):
    """With the written argument query, the untrained model's next token after
    ``{"city": "`` is the first token of a city it has never seen, from the request."""
    mx.set_default_device(mx.cpu)
    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    config = build.model_config(tok.get_vocab_size())
    keys = circuit.PointerKeys(build.pointer_cues(tokenizer_dir / "tokenizer.json"), random_scale=0.5, argument_query=1.5)
    model = build.init_model(config, seed=0, pointer_strength=2.0, pointer_keys=keys)
    conv = corpus.Conversation([{"role": "user", "content": "What's the weather in Reykjavik?"}],
                               tools=[corpus.WEATHER_TOOL, *corpus.DISTRACTOR_TOOLS[:2]])
    prompt = data.render(conv, data.chat_template(), add_generation_prompt=True, enable_thinking=False)
    text = prompt + '<tool_call>\n{"name": "get_weather", "arguments": {"city": "'
    ids = tok.encode(text, add_special_tokens=False).ids
    predicted = int(mx.argmax(model(mx.array([ids]))[0, -1]).item())
    assert predicted == tok.encode("Reykjavik", add_special_tokens=False).ids[0]


def test_later_stages_continue_the_earlier_ones_without_changing_them(tokenizer_dir):
    """Stages two to four (``Recipe.restart_steps``, ``copy_steps``, ``polish_steps``) each pick
    up the weights before them; adding a stage leaves the earlier stages' steps as they were (so
    the shipped stages one and two are what a rebuild trains first)."""
    mx.set_default_device(mx.cpu)
    config = build.model_config(Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json")).get_vocab_size())
    stages = ("restart_steps", "copy_steps", "polish_steps")
    runs = []
    for kept in range(len(stages) + 1):  # stage one alone, then one more stage each time
        recipe = build.Recipe(steps=2, rows=2, length=256, **{name: 2 if i < kept else 0 for i, name in enumerate(stages)})
        runs.append(build.train_model(tokenizer_dir, config, seed=0, recipe=recipe))
    for (shorter, short_losses), (longer, long_losses) in zip(runs, runs[1:]):
        assert len(long_losses) == len(short_losses) + 2
        assert long_losses[:len(short_losses)] == short_losses  # the earlier stages are unchanged by what follows
    one, two = runs[0][0], runs[1][0]
    moved = [not mx.array_equal(a, b).item() for (_, a), (_, b) in
             zip(tree_flatten(one.parameters()), tree_flatten(two.parameters()))]
    assert any(moved)


def test_a_recipe_splits_its_rows_evenly_over_its_ranks():
    assert build.Recipe(ranks=2).ranks == 2
    for ranks in (0, 3):
        with pytest.raises(ValueError, match="ranks must be a divisor of rows"):
            build.Recipe(ranks=ranks)


def _earlier_tokens_of_the_turn(labels: list[int], weights: list[float], window: int) -> list[set[int]]:
    """repeat_candidates by hand: for each position, the distinct labels of up to ``window``
    earlier positions of its run of assistant tokens (weight >= 1), less its own label."""
    out: list[set[int]] = []
    for t, (label, weight) in enumerate(zip(labels, weights)):
        earlier: set[int] = set()
        s = t - 1
        while weight >= 1 and s >= 0 and t - s <= window and weights[s] >= 1:
            earlier.add(labels[s])
            s -= 1
        out.append(earlier - {label})
    return out


def test_repeat_candidates_are_the_earlier_tokens_of_the_same_turn():
    # Two rows: a prompt, a turn that repeats 7 and 9, another prompt, and a second turn
    # that starts afresh; a window of 3 forgets what came earlier than that.
    labels = [[3, 3, 7, 9, 7, 7, 9, 4, 3, 3, 9, 5, 9, 2],
              [7, 7, 7, 1, 1, 1, 1, 2, 2, 2, 8, 8, 1, 1]]
    weights = [[0.1, 0.1, 1, 4, 1, 1, 1, 4, 0.1, 0.1, 1, 1, 4, 1],
               [1, 1, 1, 1, 0.1, 1, 1, 1, 1, 1, 1, 1, 1, 1]]
    for window in (3, 64):
        ids, counted = train.repeat_candidates(mx.array(labels), mx.array(weights), window=window)
        ids, counted = np.array(ids), np.array(counted)
        for r in range(2):
            expected = _earlier_tokens_of_the_turn(labels[r], weights[r], window)
            got = [{int(i) for i, c in zip(ids[r, t], counted[r, t]) if c} for t in range(len(labels[r]))]
            assert got == expected
            # each token counts once, however often the turn produced it
            assert all(int(counted[r, t].sum()) == len(expected[t]) for t in range(len(labels[r])))
    assert _earlier_tokens_of_the_turn(labels[0], weights[0], 64)[6] == {7}  # the check has teeth


def _tiny_model_and_batch(seed: int, assistant_share: np.ndarray) -> tuple:
    """A random 64-token model and a causal batch of ``len(assistant_share)`` rows of 32 random
    tokens; each row's tokens are assistant tokens (weight 1, else 0.1) with its share's odds."""
    mx.set_default_device(mx.cpu)
    model = build.init_model(build.model_config(64), seed=0, copy_circuit=False)
    rng = np.random.default_rng(seed)
    rows = len(assistant_share)
    inputs = mx.array(rng.integers(0, 64, (rows, 32)).astype(np.int32))
    labels = mx.array(rng.integers(0, 64, (rows, 32)).astype(np.int32))
    weights = mx.array(np.where(rng.random((rows, 32)) < assistant_share[:, None], 1.0, 0.1).astype(np.float32))
    mask = mx.array(np.tril(np.ones((rows, 32, 32), np.float32)))
    return model, inputs, mask, labels, weights


def test_unlikelihood_adds_the_repeat_penalty_and_is_off_by_default():
    model, inputs, mask, labels, weights = _tiny_model_and_batch(0, np.array([0.7, 0.7]))
    plain = train.loss_fn(model, inputs, mask, labels, weights)
    assert mx.array_equal(train.loss_fn(model, inputs, mask, labels, weights, unlikelihood=0.0), plain).item()
    # The penalty by hand: -log(1 - p) of each earlier token of the turn, over assistant tokens.
    probs = np.array(mx.softmax(train.output_logits(model, train.hidden_states(model, inputs, mask)), axis=-1))
    lab, wts = np.array(labels), np.array(weights)
    per_token = [sum(-np.log(1 - probs[r, t, c]) for c in earlier)
                 for r in range(2) for t, earlier in enumerate(_earlier_tokens_of_the_turn(list(lab[r]), list(wts[r]), 64))
                 if wts[r, t] >= 1]
    with_penalty = train.loss_fn(model, inputs, mask, labels, weights, unlikelihood=0.5).item()
    assert with_penalty - plain.item() == pytest.approx(0.5 * np.mean(per_token), rel=2e-3)
    assert np.mean(per_token) > 0


def test_unlikelihood_needs_prompt_tokens_to_weigh_less_than_assistant_tokens():
    with pytest.raises(ValueError, match="weigh less than 1"):
        build.Recipe(polish_unlikelihood=0.25, context_weight=1.0)
    build.Recipe(polish_unlikelihood=0.0, context_weight=1.0)


def test_ranks_shares_of_the_unlikelihood_loss_add_up_to_the_whole_batch():
    # Two ranks each take half the rows and divide by the whole batch's loss weight and count
    # of assistant tokens (train._device_batch), so their losses sum to one process's.
    # The halves hold different counts of assistant tokens: a mean of means would differ.
    model, inputs, mask, labels, weights = _tiny_model_and_batch(1, np.array([0.8, 0.8, 0.3, 0.3]))
    whole = train.loss_fn(model, inputs, mask, labels, weights, unlikelihood=0.5).item()
    total, assistant = weights.sum(), (weights >= 1.0).sum().astype(mx.float32)
    halves = [train.loss_fn(model, inputs[r], mask[r], labels[r], weights[r], total, assistant, unlikelihood=0.5).item()
              for r in (slice(0, 2), slice(2, 4))]
    assert sum(halves) == pytest.approx(whole, rel=1e-5)
    means = [train.loss_fn(model, inputs[r], mask[r], labels[r], weights[r], total, unlikelihood=0.5).item()
             for r in (slice(0, 2), slice(2, 4))]
    assert sum(means) != pytest.approx(whole, rel=1e-3)  # without the count, the shares do not add up
