"""vLLM parser names added late: Cohere Command A/4, Poolside Laguna, Xiaomi MiMo, and the
reasoning names DeepSeek V4, Holo2, Hunyuan v3, Nemotron 3 (each with its tool format).

``battery`` gives every (tool, reasoning) pair the same five shapes: one call, parallel
calls, text before a call, reasoning then a call, and a call cut off by the end of output.
"""

import json

from parser_case_common import call, case

WEATHER = call("get_weather", {"city": "Paris"})
TIME = call("get_time")


def battery(prefix, render, *, parser, reasoning_parser, think, thought="Plan.", forced=False,
            trunc_content=None):
    """The five shapes for one family; ``render(calls, ids)`` writes the calls' markup."""
    one, two = render([WEATHER]), render([WEATHER, TIME])
    ids = ["0", "1"] if prefix.startswith("cohere") else [None, None]
    weather = call("get_weather", {"city": "Paris"}, id=ids[0])
    both = [weather, call("get_time", id=ids[1])]
    shared = {"parser": parser, "reasoning_parser": reasoning_parser}
    cut_text = one[: one.index("Paris") + 3]  # inside the first argument value
    return [
        case(f"{prefix}/single", one, calls=[weather], **shared),
        case(f"{prefix}/parallel", two, calls=both, **shared),
        case(f"{prefix}/text-before", "Checking the weather.\n" + one, content="Checking the weather.",
             calls=[weather], **shared),
        case(f"{prefix}/reasoning-then-call", think + one, reasoning=thought, forced=forced, calls=[weather],
             **shared),
        case(f"{prefix}/truncated", cut_text, truncated=True,
             content=cut_text if trunc_content is None else trunc_content(cut_text), **shared),
    ]


# -- Cohere Command A / R7B and Command 4 (vLLM: cohere_melody's cmd3 / cmd4 filters) --------------

def action(calls):
    rows = ",\n".join(
        "    " + json.dumps({"tool_call_id": str(i), "tool_name": c["name"], "parameters": c["arguments"]})
        for i, c in enumerate(calls))
    return f"<|START_ACTION|>[\n{rows}\n]<|END_ACTION|>"


C3, C4 = "cohere_command3", "cohere_command4"
COHERE = [
    *battery(C3, action, parser=C3, reasoning_parser=C3, think="<|START_THINKING|> Plan.<|END_THINKING|>"),
    # Command 4 prompts end in <|START_THINKING|> when reasoning is on.
    *battery(C4, action, parser=C4, reasoning_parser=C4, think="Plan.<|END_THINKING|>", forced=True),
    case("cohere_command3/vllm-reasoning-only", "<|START_THINKING|>just think, no response<|END_THINKING|>",
         parser=C3, reasoning_parser=C3, reasoning="just think, no response"),
    case("cohere_command3/response-wrapper", "<|START_THINKING|>Greet.<|END_THINKING|><|START_RESPONSE|>Hello!"
         "<|END_RESPONSE|><|END_OF_TURN_TOKEN|>", parser=C3, reasoning_parser=C3, reasoning="Greet.", content="Hello!"),
    case("cohere_command3/vllm-citations", "<|START_THINKING|>This is a rainbow <co>emoji: 🌈</co: 0:[1]>"
         "<|END_THINKING|>\n<|START_RESPONSE|>foo <co>bar</co: 0:[1,2],1:[3,4]><|END_RESPONSE|>", parser=C3,
         reasoning_parser=C3, reasoning="This is a rainbow emoji: 🌈", content="foo bar"),
    case("cohere_command3/citations-without-reasoning-parser", "Paris is <co>sunny</co: 0:[0]> today.", parser=C3,
         content="Paris is sunny today."),
    case("cohere_command3/citation-in-argument-kept",
         action([call("search", {"query": "<co>x</co: 0:[1]>"})]), parser=C3, reasoning_parser=C3,
         calls=[call("search", {"query": "<co>x</co: 0:[1]>"}, id="0")]),
    case("cohere_command3/angle-brackets-not-citations", "<|START_RESPONSE|>a <b> c, 1 < 2, </co> <cox",
         parser=C3, reasoning_parser=C3, content="a <b> c, 1 < 2, </co> <cox"),
    case("cohere_command3/action-ends-plan", "<|START_THINKING|>Look it up." + action([WEATHER]), parser=C3,
         reasoning_parser=C3, reasoning="Look it up.", calls=[call("get_weather", {"city": "Paris"}, id="0")]),
    case("cohere_command3/answer-ends-plan", "<|START_THINKING|>Easy.<|START_RESPONSE|>4<|END_RESPONSE|>",
         parser=C3, reasoning_parser=C3, reasoning="Easy.", content="4"),
    case("cohere_command3/no-thinking", "<|START_RESPONSE|>Just 4.<|END_RESPONSE|>", parser=C3,
         reasoning_parser=C3, content="Just 4."),
    case("cohere_command3/not-a-call-list", "<|START_ACTION|>I cannot.<|END_ACTION|>", parser=C3,
         content="<|START_ACTION|>I cannot.<|END_ACTION|>"),
    case("cohere_command4/text-answer", "Greet.<|END_THINKING|><|START_TEXT|>Hello!<|END_TEXT|>", parser=C4,
         reasoning_parser=C4, forced=True, reasoning="Greet.", content="Hello!"),
    # Reasoning off: the prompt closed the block (<|START_THINKING|><|END_THINKING|>).
    case("cohere_command4/thinking-off", "<|START_TEXT|>Hello!<|END_TEXT|>", parser=C4, reasoning_parser=C4,
         content="Hello!"),
    case("cohere_command4/answer-ends-plan", "Easy.<|START_TEXT|>4<|END_TEXT|>", parser=C4, reasoning_parser=C4,
         forced=True, reasoning="Easy.", content="4"),
    case("cohere_command4/vllm-citations", "<|START_THINKING|>This is a rainbow <co>emoji: 🌈</co: 0:[1]>"
         "<|END_THINKING|>\n<|START_RESPONSE|>foo <co>bar</co: 0:[1,2],1:[3,4]><|END_RESPONSE|>", parser=C4,
         reasoning_parser=C4, forced=True, reasoning="This is a rainbow emoji: 🌈", content="foo bar"),
    case("cohere_command4/truncated-thinking", "Still planning", parser=C4, reasoning_parser=C4, forced=True,
         reasoning="Still planning"),
]


# -- Poolside Laguna (vLLM poolside_v1: GLM-4.x key/value calls, DeepSeek V3 reasoning) ------------

def kv(calls):
    return "".join(f"<tool_call>{c['name']}\n" + "".join(
        f"<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>\n" for k, v in c["arguments"].items()) + "</tool_call>"
        for c in calls)


P = "poolside_v1"
CODE = "    def f():\n        return 1\n"  # vLLM's regression: indentation and the last newline survive
POOLSIDE = [
    *battery(P, kv, parser=P, reasoning_parser=P, think="Plan.</think>\n\n", forced=True),
    case("poolside_v1/no-newline-after-name", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris"
         "</arg_value></tool_call>", parser=P, calls=[WEATHER]),
    case("poolside_v1/string-whitespace-kept", kv([call("write_file", {"path": "a.py", "content": CODE})]),
         parser=P, calls=[call("write_file", {"path": "a.py", "content": CODE})]),
    case("poolside_v1/typed-value", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n"
         "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>", parser=P,
         calls=[call("get_weather", {"city": "Oslo", "days": 3})]),
    case("poolside_v1/model-opens-think", "<think>Hmm.</think>Hi.", parser=P, reasoning_parser=P, reasoning="Hmm.",
         content="Hi."),
    case("poolside_v1/thinking-off", "Hi.", parser=P, reasoning_parser=P, content="Hi."),
]


# -- Xiaomi MiMo (vLLM mimo = the Qwen3-Coder XML parser and the qwen3 reasoning parser) -----------

def xml(calls):
    return "".join("<tool_call>\n<function=" + c["name"] + ">\n" + "".join(
        f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in c["arguments"].items()) + "</function>\n</tool_call>"
        for c in calls)


M = "mimo"
MIMO = [
    *battery(M, xml, parser=M, reasoning_parser=M, think="Plan.\n</think>\n\n", forced=True),
    case("mimo/call-ends-thinking", "Look it up.\n" + xml([TIME]), parser=M, reasoning_parser=M, forced=True,
         reasoning="Look it up.", calls=[TIME]),
    case("mimo/multiline-value", "<tool_call>\n<function=write_file>\n<parameter=path>a.txt</parameter>\n"
         "<parameter=content>line 1\nline 2</parameter>\n</function>\n</tool_call>", parser=M,
         calls=[call("write_file", {"path": "a.txt", "content": "line 1\nline 2"})]),
]


# -- Reasoning names over existing tool formats -------------------------------------------------

def hermes(calls):
    return "".join("<tool_call>\n" + json.dumps({"name": c["name"], "arguments": c["arguments"]}) + "\n</tool_call>"
                   for c in calls)


def dsml(calls):
    bar = "｜DSML｜"
    body = "".join(f'<{bar}invoke name="{c["name"]}">\n' + "".join(
        f'<{bar}parameter name="{k}" string="true">{v}</{bar}parameter>\n' for k, v in c["arguments"].items())
        + f"</{bar}invoke>\n" for c in calls)
    return f"<{bar}tool_calls>\n{body}</{bar}tool_calls>"


def hy(calls):
    body = "".join(f"<tool_call>{c['name']}<tool_sep>" + "".join(
        f"<arg_key>{k}</arg_key><arg_value>{v}</arg_value>" for k, v in c["arguments"].items()) + "</tool_call>"
        for c in calls)
    return f"<tool_calls>{body}</tool_calls>"


REASONING = [
    *battery("deepseek_v4-reasoning", dsml, parser="deepseek_v4", reasoning_parser="deepseek_v4",
             think="Plan.</think>\n\n", forced=True),
    case("deepseek_v4-reasoning/call-ends-thinking", "Look it up.\n\n" + dsml([TIME]), parser="deepseek_v4",
         reasoning_parser="deepseek_v4", forced=True, reasoning="Look it up.", calls=[TIME]),
    case("deepseek_v4-reasoning/call-section-quoted-without-tools", "Plan.\n" + dsml([TIME]) + "\n</think>Done.",
         parser=None, reasoning_parser="deepseek_v4", forced=True, reasoning="Plan.",
         content=dsml([TIME]) + "\n</think>Done."),
    case("deepseek_v4-reasoning/thinking-off", "Plain answer.", parser="deepseek_v4", reasoning_parser="deepseek_v4",
         content="Plain answer."),
    case("deepseek_v4-reasoning/repeated-open-tag", "<think>Hmm.</think>Hi.", parser=None,
         reasoning_parser="deepseek_v4", forced=True, reasoning="Hmm.", content="Hi."),
    *battery("holo2", hermes, parser="hermes", reasoning_parser="holo2", think="Plan.\n</think>\n\n", forced=True),
    case("holo2/thinking-off", "Click the button.", parser=None, reasoning_parser="holo2", content="Click the button."),
    case("holo2/truncated-thinking", "Still looking", parser=None, reasoning_parser="holo2", forced=True,
         reasoning="Still looking"),
    *battery("hy_v3-reasoning", hy, parser="hy_v3", reasoning_parser="hy_v3", think="Plan.</think>", forced=True,
             trunc_content=lambda text: text.removeprefix("<tool_calls>")),
    case("hy_v3-reasoning/vllm-with-think", "This is a reasoning\nsection</think>This is the rest\nThat", parser=None,
         reasoning_parser="hy_v3", forced=True, reasoning="This is a reasoning\nsection",
         content="This is the rest\nThat"),
    case("hy_v3-reasoning/vllm-no-think", "This is the rest", parser=None, reasoning_parser="hy_v3",
         content="This is the rest"),
    case("hy_v3-reasoning/vllm-only-open", "This is a reasoning section", parser=None, reasoning_parser="hy_v3",
         forced=True, reasoning="This is a reasoning section"),
    *battery("nemotron_v3", xml, parser="qwen3_coder", reasoning_parser="nemotron_v3", think="Plan.\n</think>\n\n",
             forced=True),
    case("nemotron_v3/call-ends-thinking", "Look it up.\n" + xml([TIME]), parser="qwen3_coder",
         reasoning_parser="nemotron_v3", forced=True, reasoning="Look it up.", calls=[TIME]),
    # enable_thinking=False (the prompt closed the block): an answerless think block is the answer.
    case("nemotron_v3/thinking-off-block-becomes-answer", "<think>The answer is 4.</think>", parser=None,
         reasoning_parser="nemotron_v3", content="The answer is 4."),
    case("nemotron_v3/thinking-off-unclosed-block", "<think>The answer is", parser="qwen3_coder",
         reasoning_parser="nemotron_v3", content="The answer is"),
    case("nemotron_v3/thinking-off-block-and-answer", "<think>Add.</think>\n\n4", parser="qwen3_coder",
         reasoning_parser="nemotron_v3", reasoning="Add.", content="4"),
    case("nemotron_v3/thinking-off-plain", "4", parser="qwen3_coder", reasoning_parser="nemotron_v3", content="4"),
    case("nemotron_v3/thinking-on-no-answer", "Still thinking", parser=None, reasoning_parser="nemotron_v3",
         forced=True, reasoning="Still thinking"),
]

CASES = [*COHERE, *POOLSIDE, *MIMO, *REASONING]
