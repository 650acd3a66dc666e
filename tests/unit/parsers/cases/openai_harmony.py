"""gpt-oss harmony cases (``openai`` tool parser / ``openai_gptoss`` reasoning)."""

from parser_case_common import call, case

P = "openai"
A = "<|channel|>analysis<|message|>Need the weather.<|end|>"
S = "<|start|>assistant"

CASES = [
    case("harmony/call-after-channel",
         A + S + '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Tokyo"}<|call|>',
         parser=P, reasoning_parser="openai_gptoss", reasoning="Need the weather.",
         calls=[call("get_weather", {"city": "Tokyo"})]),
    case("harmony/final-answer", A + S + "<|channel|>final<|message|>It is sunny.<|return|>", parser=P,
         reasoning="Need the weather.", content="It is sunny."),
    case("harmony/recipient-in-role", A + S + ' to=functions.get_weather<|channel|>commentary json<|message|>'
         '{"city": "Oslo", "days": 2}<|call|>', parser=P, reasoning="Need the weather.",
         calls=[call("get_weather", {"city": "Oslo", "days": 2})]),
    case("harmony/preamble-then-call", "<|channel|>commentary<|message|>Checking now.<|end|>" + S
         + "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{}<|call|>", parser=P,
         content="Checking now.", calls=[call("get_time")]),
    case("harmony/empty-body", S + "<|channel|>commentary to=functions.get_time<|message|><|call|>", parser=P,
         calls=[call("get_time")]),
    case("harmony/call-token-stripped", '<|channel|>commentary to=functions.get_weather<|message|>{"city": "X"}',
         parser=P, calls=[call("get_weather", {"city": "X"})]),
    case("harmony/analysis-recipient", '<|channel|>analysis to=functions.get_weather<|message|>{"city": "B"}<|call|>',
         parser=P, calls=[call("get_weather", {"city": "B"})]),
    case("harmony/parallel", '<|channel|>commentary to=functions.get_time<|message|>{}<|call|>'
         + S + '<|channel|>commentary to=functions.get_weather<|message|>{"city": "北京"}<|call|>', parser=P,
         calls=[call("get_time"), call("get_weather", {"city": "北京"})]),
    case("harmony/builtin-recipient", '<|channel|>analysis<|message|>search it<|end|>' + S
         + '<|channel|>commentary to=browser.search<|message|>{"query": "x"}<|call|>', parser=P, reasoning="search it",
         calls=[call("browser.search", {"query": "x"}, offered=False)]),
    case("harmony/truncated-call", A + S + '<|channel|>commentary to=functions.get_weather<|message|>{"city": "To',
         parser=P, reasoning="Need the weather.", truncated=True,
         content=S + '<|channel|>commentary to=functions.get_weather<|message|>{"city": "To'),
    case("harmony/non-json-body", '<|channel|>commentary to=functions.get_weather<|message|>Tokyo please<|call|>',
         parser=P, content="<|channel|>commentary to=functions.get_weather<|message|>Tokyo please"),
    case("harmony/plain-text", "Hello without channels.", parser=P, content="Hello without channels."),
    case("harmony/truncated-analysis", "<|channel|>analysis<|message|>Still thin", parser=P, reasoning="Still thin"),
    case("harmony/reasoning-only-parser", A + S + "<|channel|>final<|message|>Done.<|return|>", parser=None,
         reasoning_parser="openai_gptoss", reasoning="Need the weather.", content="Done."),
]
