"""Reasoning-parser cases without tool parsing: tags, forced-open prompts, truncation."""

from parser_case_common import call, case

CASES = [
    case("qwen3/think", "<think>\nLet me add.\n</think>\n\n2 + 2 = 4.", parser=None, reasoning_parser="qwen3",
         reasoning="Let me add.", content="2 + 2 = 4."),
    case("qwen3/no-think", "Just 4.", parser=None, reasoning_parser="qwen3", content="Just 4."),
    case("qwen3/empty-think", "<think>\n\n</think>\n\nHi!", parser=None, reasoning_parser="qwen3", content="Hi!"),
    case("qwen3/forced-open", "I should add.\n</think>\n\n4", parser=None, reasoning_parser="qwen3", forced=True,
         reasoning="I should add.", content="4"),
    case("qwen3/forced-open-repeated-tag", "<think>\nAdd.\n</think>4", parser=None, reasoning_parser="qwen3",
         forced=True, reasoning="Add.", content="4"),
    case("qwen3/forced-open-truncated", "Still going", parser=None, reasoning_parser="qwen3", forced=True,
         reasoning="Still going"),
    case("qwen3/opened-truncated", "<think>Still going", parser=None, reasoning_parser="qwen3", reasoning="Still going"),
    case("qwen3/think-tag-mid-content", "Use <think> tags for reasoning.", parser=None, reasoning_parser="qwen3",
         content="Use <think> tags for reasoning."),
    case("qwen3/split-close-tag-text", "<think>a</thin k</think>b", parser=None, reasoning_parser="qwen3",
         reasoning="a</thin k", content="b"),
    case("deepseek_r1/implicit", "Hmm, 2+2.\n</think>\n\n**4**", parser=None, reasoning_parser="deepseek_r1",
         reasoning="Hmm, 2+2.", content="**4**"),
    case("deepseek_v3/thinking-off", "Plain answer.", parser=None, reasoning_parser="deepseek_v3",
         content="Plain answer."),
    case("glm45/think", "<think>ok</think>Fine.", parser=None, reasoning_parser="glm45", reasoning="ok", content="Fine."),
    case("glm47-alias/think", "<think>ok</think>Fine.", parser=None, reasoning_parser="glm47", reasoning="ok",
         content="Fine."),
    case("kimi_k2/think", "<think>ok</think>Fine.", parser=None, reasoning_parser="kimi_k2", reasoning="ok",
         content="Fine."),
    case("minimax_m2/implicit", "ok\n</think>\nFine.", parser=None, reasoning_parser="minimax_m2", reasoning="ok",
         content="Fine."),
    case("seed_oss/think", "<seed:think>ok</seed:think>Fine.", parser=None, reasoning_parser="seed_oss", reasoning="ok",
         content="Fine."),
    case("mistral/think", "[THINK]ok[/THINK]Fine.", parser=None, reasoning_parser="mistral", reasoning="ok",
         content="Fine."),
    case("gemma4/thought", "<|channel>thought\nok<channel|>Fine.", parser=None, reasoning_parser="gemma4",
         reasoning="ok", content="Fine."),
    case("granite/heres", "Here's my thought process: ok Here's my response: Fine.", parser=None,
         reasoning_parser="granite", reasoning="ok", content="Fine."),
    case("granite/no-reasoning", "Fine.", parser=None, reasoning_parser="granite", content="Fine."),
    case("hunyuan/answer", "<think>\nok\n</think>\n<answer>\nFine.\n</answer>", parser=None,
         reasoning_parser="hunyuan_a13b", reasoning="ok", content="Fine."),
    case("ernie45/response", "ok\n</think>\n\n<response>\nFine.\n</response>", parser=None, reasoning_parser="ernie45",
         reasoning="ok", content="Fine."),
    case("step3/implicit", "ok</think>Fine.", parser=None, reasoning_parser="step3", reasoning="ok", content="Fine."),
    case("step3p5/tagged", "<think>\nok\n</think>\nFine.", parser=None, reasoning_parser="step3p5", reasoning="ok",
         content="Fine."),
    case("olmo3/forced", "ok</think>Fine.", parser=None, reasoning_parser="olmo3", forced=True, reasoning="ok",
         content="Fine."),
    case("minimax_m2_append_think/keeps-block", "ok\n</think>\nFine.", parser=None,
         reasoning_parser="minimax_m2_append_think", content="<think>ok\n</think>\nFine."),
    case("sglang-alias/deepseek-r1", "ok</think>Fine.", parser=None, reasoning_parser="deepseek-r1", reasoning="ok",
         content="Fine."),
    case("none/plain", "  Hello  ", parser=None, reasoning_parser=None, content="Hello"),
]

# -- Gemma 4 channel markers (vLLM gemma4 reasoning parser / unified gemma4 parser) -------------
G4_CALL = "<|tool_call>call:get_time{}<tool_call|>"
CASES += [
    case("gemma4/unnamed-channel", "<|channel>ok<channel|>Fine.", parser=None, reasoning_parser="gemma4",
         reasoning="ok", content="Fine."),
    case("gemma4/other-channel-name-kept", "<|channel>thousand reasons<channel|>Done", parser=None,
         reasoning_parser="gemma4", reasoning="thousand reasons", content="Done"),
    case("gemma4/thought-without-newline-kept", "<|channel>thought about it<channel|>x", parser=None,
         reasoning_parser="gemma4", reasoning="thought about it", content="x"),
    case("gemma4/empty-thought", "<|channel>thought\n<channel|>Hi.", parser=None, reasoning_parser="gemma4",
         content="Hi."),
    case("gemma4/bare-thought-label", "<|channel>thought<channel|>Hi.", parser=None, reasoning_parser="gemma4",
         content="Hi."),
    case("gemma4/multiline-thought", "<|channel>thought\nLine1\nLine2<channel|>Answer", parser=None,
         reasoning_parser="gemma4", reasoning="Line1\nLine2", content="Answer"),
    case("gemma4/truncated-thought", "<|channel>thought\nStill thinking", parser=None, reasoning_parser="gemma4",
         reasoning="Still thinking"),
    case("gemma4/forced-open-label", "thought\nplan<channel|>Fine.", parser=None, reasoning_parser="gemma4",
         forced=True, reasoning="plan", content="Fine."),
    case("gemma4/stray-close-dropped", "Answer<channel|> goes on.", parser=None, reasoning_parser="gemma4",
         content="Answer goes on."),
    # vLLM reports the block as reasoning; ours may not follow content, so it is dropped.
    case("gemma4/channel-after-content", "Before\n<|channel>thought\nr<channel|>\nrest", parser=None,
         reasoning_parser="gemma4", content="Before\n\nrest"),
    case("gemma4/tool-call-ends-channel-alone", "<|channel>thought\nplan " + G4_CALL, parser=None,
         reasoning_parser="gemma4", reasoning="plan", content=G4_CALL),
    case("gemma4/tool-call-ends-channel", "<|channel>thought\nplan\n" + G4_CALL + "<turn|>", parser="gemma4",
         reasoning_parser="gemma4", reasoning="plan", calls=[call("get_time")]),
    case("gemma4/channel-marker-in-call-args",
         '<|tool_call>call:write_file{path:<|"|>t.jinja<|"|>,content:<|"|><|channel>x<channel|><|"|>}<tool_call|>',
         parser="gemma4", reasoning_parser="gemma4",
         calls=[call("write_file", {"path": "t.jinja", "content": "<|channel>x<channel|>"})]),
]

# -- Qwen3: a call opened inside an unclosed think block (vLLM qwen3 reasoning parser) ---------
XML_CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
CASES += [
    case("qwen3/tool-call-ends-unclosed-think", "<think>I need the weather.\n\n" + XML_CALL, parser="hermes",
         reasoning_parser="qwen3", reasoning="I need the weather.", calls=[call("get_weather", {"city": "Paris"})]),
    case("qwen3/forced-tool-call-ends-think", "I need the weather.\n" + XML_CALL + "<|im_end|>", parser="hermes",
         reasoning_parser="qwen3", forced=True, reasoning="I need the weather.",
         calls=[call("get_weather", {"city": "Paris"})]),
    case("qwen3/tool-call-ends-think-alone", "Read it first.\n\n" + XML_CALL, parser=None,
         reasoning_parser="qwen3", forced=True, reasoning="Read it first.", content=XML_CALL),
    case("qwen3/tool-call-gap-before-function",
         "<think>Check.<tool_call> \n\n<function=get_time>\n</function>\n</tool_call>", parser="qwen3_coder",
         reasoning_parser="qwen3", reasoning="Check.", calls=[call("get_time")]),
    case("qwen3/quoted-tool-call-stays-reasoning", "<think>I could emit <tool_call> here, or not.</think>Done.",
         parser="hermes", reasoning_parser="qwen3", reasoning="I could emit <tool_call> here, or not.",
         content="Done."),
    case("qwen3/quoted-tool-call-then-real-call",
         "<think>Format: <tool_call><fn>. So:\n" + XML_CALL, parser="hermes", reasoning_parser="qwen3",
         reasoning="Format: <tool_call><fn>. So:", calls=[call("get_weather", {"city": "Paris"})]),
    # vLLM only ends reasoning at <tool_call> when <function follows: a JSON body stays reasoning.
    case("qwen3/json-call-in-unclosed-think-stays-reasoning",
         '<think>Maybe <tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>', parser="hermes",
         reasoning_parser="qwen3", reasoning='Maybe <tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'),
    case("qwen3/truncated-after-tool-call-tag", "<think>Then <tool_call>\n", parser="hermes",
         reasoning_parser="qwen3", reasoning="Then <tool_call>"),
]

# -- Kimi K2: the tool section ends the think block (vLLM kimi_k2 reasoning parser) -----------
K2_SECTION = ("<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0<|tool_call_argument_begin|>{}"
              "<|tool_call_end|><|tool_calls_section_end|>")
CASES += [
    case("kimi_k2/section-ends-think-alone", "<think>Need the time." + K2_SECTION, parser=None,
         reasoning_parser="kimi_k2", reasoning="Need the time.", content=K2_SECTION),
    case("kimi_k2/forced-section-ends-think", "Need the time.\n" + K2_SECTION + "<|im_end|>", parser="kimi_k2",
         reasoning_parser="kimi_k2", forced=True, reasoning="Need the time.",
         calls=[call("get_time", id="functions.get_time:0")]),
    case("kimi_k2/singular-section-ends-think",
         "<think>Need it.<|tool_call_section_begin|><|tool_call_begin|>functions.get_time:0"
         "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_call_section_end|>", parser="kimi_k2",
         reasoning_parser="kimi_k2", reasoning="Need it.", calls=[call("get_time", id="functions.get_time:0")]),
]

# -- Mistral [THINK] blocks around content (vLLM mistral reasoning parser) ---------------------
CASES += [
    case("mistral/stray-close-no-open", "Just the answer[/THINK] and more.", parser=None, reasoning_parser="mistral",
         content="Just the answer and more."),
    case("mistral/close-only-at-start", "[/THINK]It is 4.", parser=None, reasoning_parser="mistral",
         content="It is 4."),
    case("mistral/leading-newline-think", "\n[THINK]r[/THINK]\nrest", parser=None, reasoning_parser="mistral",
         reasoning="r", content="rest"),
    case("mistral/think-unterminated", "[THINK]Still going", parser=None, reasoning_parser="mistral",
         reasoning="Still going"),
    # vLLM reports a block after content as reasoning; ours may not follow content, so it is dropped.
    case("mistral/think-mid-content", "Let me check. [THINK]hmm[/THINK]It is 4.", parser=None,
         reasoning_parser="mistral", content="Let me check. It is 4."),
    case("mistral/think-mid-content-unterminated", "Answer first. [THINK]then thinking", parser=None,
         reasoning_parser="mistral", content="Answer first."),
    case("mistral/stray-close-before-call", '[/THINK][TOOL_CALLS]get_weather[ARGS]{"city": "G"}', parser="mistral",
         reasoning_parser="mistral", calls=[call("get_weather", {"city": "G"})]),
    case("mistral/think-tags-in-call-args",
         '[THINK]Write it.[/THINK][TOOL_CALLS]write_file[ARGS]{"path": "a.md", "content": "[THINK]x[/THINK]"}',
         parser="mistral", reasoning_parser="mistral", reasoning="Write it.",
         calls=[call("write_file", {"path": "a.md", "content": "[THINK]x[/THINK]"})]),
]
