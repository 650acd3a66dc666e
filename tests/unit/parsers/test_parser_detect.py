"""Detection from real-shaped chat-template fragments, tokens, metadata and model type."""

from __future__ import annotations

import pytest

from parsers import REASONING_PARSERS, TOOL_PARSERS, detect_parsers, explain_detection
from parsers.registry import load_reasoning_parser, load_tool_parser, reasoning_parser_name, tool_parser_name

QWEN25 = """{%- if tools %}{{- '<|im_start|>system\\n' }}# Tools\\n\\nFor each function call, return a json object with
function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>,
\\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n{%- endif %}
{%- for tool_call in message.tool_calls %}{{- '\\n<tool_call>\\n{"name": "' }}{{- tool_call.name }}{{- '"}' }}{%- endfor %}"""
QWEN3 = QWEN25 + """{%- set content = message.content.split('</think>')[-1] %}
{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"""
QWEN3_CODER = """You have access to the following functions:\\n<tools>{% for tool in tools %}<function>
<name>{{ tool.name }}</name></function>{% endfor %}</tools>\\nIf you choose to call a function ONLY reply in the
following format with NO suffix:\\n\\n<tool_call>\\n<function=example_function_name>\\n<parameter=example_parameter_1>
\\nvalue_1\\n</parameter>\\n</function>\\n</tool_call>"""
QWEN35 = QWEN3_CODER + """{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}
{%- set reasoning = content.split('</think>')[0] %}"""
LLAMA31 = """{%- if builtin_tools is defined or tools is not none %}{{- "Environment: ipython\\n" }}{%- endif %}
{%- if tool_call.name in builtin_tools %}{{- '<|python_tag|>' + tool_call.name + '.call(' }}{%- endif %}
{{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" }}"""
LLAMA4 = """{{- '<|header_start|>assistant<|header_end|>\\n\\n' -}}{%- if message.tool_calls %}{{- "<|python_start|>" }}
[{% for tool_call in message.tool_calls %}{{ tool_call.function.name }}(...){% endfor %}]{{- "<|python_end|>" }}{%- endif %}"""
MISTRAL = """{%- if message.tool_calls %}{{- "[TOOL_CALLS]" }}{%- for tool in message.tool_calls %}{{- tool.function.name
+ "[ARGS]" + tool.function.arguments|tojson }}{%- endfor %}{%- endif %}[AVAILABLE_TOOLS]"""
MAGISTRAL = MISTRAL + """{{- "[THINK]" + reasoning + "[/THINK]" }}"""
DEEPSEEK_V3 = """{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>'
+ tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments'] + '\\n' + '```'
+ '<｜tool▁call▁end｜>'}}"""
DEEPSEEK_R1 = DEEPSEEK_V3 + """{% set content = content.split('</think>')[-1] %}{{'<｜Assistant｜><think>\\n'}}"""
DEEPSEEK_V31 = """{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>'+ tool['function']['name'] + '<｜tool▁sep｜>'
+ tool['function']['arguments'] + '<｜tool▁call▁end｜>'}}{% if thinking %}{{'<｜Assistant｜><think>'}}{% else %}
{{'<｜Assistant｜></think>'}}{% endif %}"""
DEEPSEEK_V32 = """{{- '\\n\\n<｜DSML｜function_calls>\\n' -}}{%- for tc in message.tool_calls -%}
<｜DSML｜invoke name="{{ tc.function.name }}">\\n<｜DSML｜parameter name="{{ k }}" string="{{ is_str }}">{{ v }}
</｜DSML｜parameter>{%- endfor -%}</｜DSML｜function_calls>{% if thinking %}<｜Assistant｜><think>{% else %}</think>{% endif %}"""
DEEPSEEK_V4 = DEEPSEEK_V32.replace("function_calls", "tool_calls")
GLM45 = """[gMASK]<sop>{%- for tc in m.tool_calls %}{{- '\\n<tool_call>' + tc.name }}
{% set _args = tc.arguments %}{% for k, v in _args.items() %}
<arg_key>{{ k }}</arg_key>\\n<arg_value>{{ v | tojson if v is not string else v }}</arg_value>{% endfor %}
</tool_call>{%- endfor %}{{- '<|assistant|>' }}{%- if not enable_thinking %}<think></think>{%- endif %}"""
GLM47 = """[gMASK]<sop>{%- for tc in m.tool_calls %}{{- '<tool_call>' + tc.name -}}{% for k, v in tc.arguments.items()
%}<arg_key>{{ k }}</arg_key><arg_value>{{ v }}</arg_value>{% endfor %}</tool_call>{%- endfor %}<think></think>"""
KIMI_K2 = """{%- if message['role'] == 'assistant' and message.tool_calls %}<|tool_calls_section_begin|>
{%- for tool_call in message['tool_calls'] %}<|tool_call_begin|>{{ tool_call['id'] }}<|tool_call_argument_begin|>
{{ tool_call['function']['arguments'] }}<|tool_call_end|>{%- endfor %}<|tool_calls_section_end|>{%- endif %}
<|im_assistant|>assistant<|im_middle|>"""
KIMI_K2_THINKING = KIMI_K2 + "<think>{{ message.reasoning_content }}</think>"
GPT_OSS = """{{- "<|start|>assistant<|channel|>analysis<|message|>" + message.thinking + "<|end|>" }}
{{- "<|start|>assistant to=" }}{{- "functions." + tool_call.name + "<|channel|>commentary " }}
{{- (tool_call.content_type if tool_call.content_type is defined else "json") + "<|constrain|>json<|message|>" }}"""
MINIMAX_M2 = """]~!b[]~b]system\\n{%- if tools %}<tools>...</tools>\\n<minimax:tool_call>\\n<invoke name="tool-name-1">
<parameter name="param-key-1">param-value-1</parameter></invoke>\\n</minimax:tool_call>{%- endif %}[e~[
{{- ']~b]ai' ~ '\\n' ~ '<think>' ~ '\\n' }}{%- set reasoning = content.split('</think>')[0] %}"""
MINIMAX_M1 = """]~b]system ai_setting=MiniMax AI{%- if tools %}<tools>{{ tools }}</tools>\\nWhen making function calls
use this format:\\n<tool_calls>\\n{"name": ..., "arguments": ...}\\n</tool_calls>{%- endif %}[e~["""
SEED_OSS = """<seed:bos>system\\n{%- if tools %}<seed:tool_call>\\n<function=example_function_name>\\n<parameter=x>v
</parameter>\\n</function>\\n</seed:tool_call>{%- endif %}<seed:think>{{ reasoning }}</seed:think><seed:eos>"""
GEMMA4 = """{%- for tc in message.tool_calls -%}<|tool_call>call:{{ tc.function.name }}{
{%- for k, v in tc.function.arguments | items -%}{{ k }}:<|"|>{{ v }}<|"|>{%- endfor -%}}<tool_call|>{%- endfor -%}
<|turn>model\\n{%- if enable_thinking %}<|channel>thought\\n{%- endif %}"""
FUNCTIONGEMMA = """{%- for tc in message.tool_calls %}<start_function_call>call:{{ tc.function.name }}{
{%- for k, v in tc.function.arguments.items() %}{{ k }}:<escape>{{ v }}<escape>{%- endfor %}}<end_function_call>{% endfor %}"""
GRANITE32 = """<|start_of_role|>system<|end_of_role|>{%- if thinking %}Respond to every user query in a comprehensive and
detailed way. You can write down your thoughts and reasoning process before responding. In the thought process,
engage in a comprehensive cycle... Here is my thought process: ... Here is my response: ...{%- endif %}
{%- if message.tool_calls %}<|tool_call|>{{ message.tool_calls | tojson }}{%- endif %}"""
GRANITE4 = """<|start_of_role|>system<|end_of_role|>You are a helpful assistant with access to the following tools.
For each tool call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>\\n{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call>"""
FIREFUNCTION = """{%- if message.tool_calls %}{{- ' functools[' + message.tool_calls | tojson + ']' }}{%- endif %}"""
LFM2 = """{%- if tools %}List of tools: <|tool_list_start|>{{ tools | tojson }}<|tool_list_end|>{%- endif %}
{%- if message.tool_calls %}<|tool_call_start|>[{{ calls }}]<|tool_call_end|>{%- endif %}"""
OLMO3 = """{%- if message.function_calls %}<function_calls>{{ message.function_calls }}</function_calls>{%- endif %}
{{- '<|im_start|>assistant\\n<think>' }}{%- set content = content.split('</think>')[-1] %}"""
INTERNLM = """{%- if tool_call %}<|action_start|><|plugin|>\\n{{ tool_call | tojson }}<|action_end|>{%- endif %}
{%- if interpreter %}<|action_start|><|interpreter|>{%- endif %}"""
APERTUS = """{%- if message.tool_calls %}<|tools_prefix|>[{%- for tc in message.tool_calls -%}{"{{ tc.function.name }}":
{{ tc.function.arguments }}}{%- endfor -%}]<|tools_suffix|>{%- endif %}"""
STEP3 = """<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="{{ name }}">
<steptml:parameter name="{{ k }}">{{ v }}</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>
{{- '<|BOT|>assistant\\n<think>\\n' }}{%- set reasoning = content.split('</think>')[0] %}"""
HUNYUAN = """{%- if message.tool_calls %}<tool_calls>{{ message.tool_calls | tojson }}</tool_calls>{%- endif %}
<think>\\n{{ reasoning }}\\n</think>\\n<answer>\\n{{ content }}\\n</answer>"""
JAMBA = """{%- if message.tool_calls %}<tool_calls>{{ message.tool_calls | tojson }}</tool_calls>{%- endif %}"""
ERNIE = """{%- if message.tool_calls %}<tool_call>\\n{{ tool_call | tojson }}\\n</tool_call>{%- endif %}
{%- set content = content.split('</think>')[-1] %}<response>\\n{{ content }}\\n</response>"""
LONGCAT = """{%- for tc in message.tool_calls %}<longcat_tool_call>{{ tc | tojson }}</longcat_tool_call>{%- endfor %}"""
HY_V3 = """<tool_calls>{% for tc in message.tool_calls %}<tool_call>{{ tc.name }}<tool_sep>{% for k, v in args %}
<arg_key>{{ k }}</arg_key><arg_value>{{ v }}</arg_value>{% endfor %}</tool_call>{% endfor %}</tool_calls>"""
TOOLACE = """{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}{%- if tools is not none %}{{- "To call functions,
answer only in the format [func_name1(params_name1=params_value1), func_name2(params)]\\n" }}{%- endif %}
{%- if message.role == "tool" %}{{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" + message.content }}{%- endif %}"""
GIGACHAT3 = """{%- if message.function_call %}function call<|role_sep|>\\n{{ message.function_call | tojson }}{%- endif %}"""

TEMPLATES = [
    ("qwen2.5", QWEN25, "hermes", None),
    ("qwen3", QWEN3, "hermes", "qwen3"),
    ("qwen3-coder", QWEN3_CODER, "qwen3_coder", None),
    ("qwen3.5", QWEN35, "qwen3_coder", "qwen3"),
    ("llama3.1", LLAMA31, "llama3_json", None),
    ("llama4", LLAMA4, "llama4_pythonic", None),
    ("mistral", MISTRAL, "mistral", None),
    ("magistral", MAGISTRAL, "mistral", "mistral"),
    ("deepseek-v3", DEEPSEEK_V3, "deepseek_v3", None),
    ("deepseek-r1", DEEPSEEK_R1, "deepseek_v3", "deepseek_r1"),
    ("deepseek-v3.1", DEEPSEEK_V31, "deepseek_v31", "deepseek_v3"),
    ("deepseek-v3.2", DEEPSEEK_V32, "deepseek_v32", "deepseek_v3"),
    ("deepseek-v4", DEEPSEEK_V4, "deepseek_v4", "deepseek_v4"),
    ("glm-4.5", GLM45, "glm45", "glm45"),
    ("glm-4.7", GLM47, "glm47", "glm45"),
    ("kimi-k2", KIMI_K2, "kimi_k2", None),
    ("kimi-k2-thinking", KIMI_K2_THINKING, "kimi_k2", "kimi_k2"),
    ("gpt-oss", GPT_OSS, "openai", "openai_gptoss"),
    ("minimax-m2", MINIMAX_M2, "minimax_m2", "minimax_m2"),
    ("minimax-m1", MINIMAX_M1, "minimax", None),
    ("seed-oss", SEED_OSS, "seed_oss", "seed_oss"),
    ("gemma4", GEMMA4, "gemma4", "gemma4"),
    ("functiongemma", FUNCTIONGEMMA, "functiongemma", None),
    ("granite-3.2", GRANITE32, "granite", "granite"),
    ("granite-4", GRANITE4, "granite4", None),
    ("firefunction", FIREFUNCTION, "phi4_mini_json", None),
    ("lfm2", LFM2, "lfm2", None),
    ("olmo3", OLMO3, "olmo3", "olmo3"),
    ("internlm", INTERNLM, "internlm", None),
    ("apertus", APERTUS, "apertus", None),
    ("step3", STEP3, "step3", "step3"),
    ("hunyuan", HUNYUAN, "hunyuan_a13b", "hunyuan_a13b"),
    ("jamba", JAMBA, "jamba", None),
    ("ernie", ERNIE, "ernie45", "ernie45"),
    ("longcat", LONGCAT, "longcat", None),
    ("hy_v3", HY_V3, "hy_v3", None),
    ("gigachat3", GIGACHAT3, "gigachat3", None),
    ("toolace", TOOLACE, "pythonic", None),
]


@pytest.mark.parametrize(("label", "template", "tool", "reasoning"), TEMPLATES, ids=[t[0] for t in TEMPLATES])
def test_template_markers(label, template, tool, reasoning):
    found = explain_detection(chat_template=template)
    assert (found["tool_parser"], found["reasoning_parser"]) == (tool, reasoning)
    assert found["tool_reason"].startswith("chat template contains '")
    assert detect_parsers(chat_template=template) == {"tool_parser": tool, "reasoning_parser": reasoning}


def test_template_reason_names_the_markers():
    found = explain_detection(chat_template=QWEN25)
    assert found["tool_reason"] == "chat template contains '<tool_call>' and 'tool_call.name'"


@pytest.mark.parametrize(("tokens", "tool"), [
    (["<|tool_calls_section_begin|>", "<|im_end|>"], "kimi_k2"),
    (["<｜tool▁calls▁begin｜>"], "deepseek_v3"),
    (["[TOOL_CALLS]", "[ARGS]"], "mistral"),
    (["<|python_tag|>", "<|eot_id|>"], "llama3_json"),
    (["<|tool_call_start|>", "<|tool_call_end|>"], "lfm2"),
    (["<minimax:tool_call>"], "minimax_m2"),
    (["<seed:tool_call>"], "seed_oss"),
    (["<|tool_call>", "<tool_call|>"], "gemma4"),
    (["<|channel|>", "<|constrain|>", "<|call|>"], "openai"),
])
def test_decisive_special_tokens(tokens, tool):
    found = explain_detection(special_tokens=tokens)
    assert found["tool_parser"] == tool
    assert found["tool_reason"].startswith("special token ")


def test_reason_strings():
    assert explain_detection(special_tokens=["<|python_tag|>"])["tool_reason"] == "special token <|python_tag|>"
    assert explain_detection(model_type="deepseek_v3")["tool_reason"] == "model_type=deepseek_v3"
    assert explain_detection(pinned_tool="hermes")["tool_reason"] == "pinned in config"
    assert explain_detection(tokenizer_config={"tool_parser_type": "json_tools"})["tool_reason"] == (
        "tokenizer_config tool_parser_type=json_tools")
    assert explain_detection()["tool_reason"] == "none found: output sniffing (auto)"


def test_tool_call_token_alone_is_not_decisive():
    found = explain_detection(special_tokens=["<tool_call>", "</tool_call>"], model_type="qwen3_moe",
                              model_name="Qwen/Qwen3-Coder-30B-A3B-Instruct")
    assert found["tool_parser"] == "qwen3_coder"
    assert found["tool_reason"] == "model_type=qwen3_moe, model name matches 'qwen3-?coder'"


def test_think_token_takes_family_from_model():
    found = explain_detection(special_tokens=["<think>", "</think>"], model_type="deepseek_v3",
                              model_name="deepseek-ai/DeepSeek-R1-0528")
    assert found["reasoning_parser"] == "deepseek_r1"
    assert found["reasoning_reason"].startswith("special token </think>")
    assert explain_detection(special_tokens=["</think>"])["reasoning_parser"] == "qwen3"


@pytest.mark.parametrize(("model_type", "name", "tool", "reasoning"), [
    ("deepseek_v3", None, "deepseek_v3", "deepseek_v3"),
    ("deepseek_v3", "moonshotai/Kimi-K2-Instruct", "kimi_k2", None),  # vLLM recipe: tool parser only
    ("deepseek_v3", "deepseek-ai/DeepSeek-V3.1-Terminus", "deepseek_v31", "deepseek_v3"),
    ("qwen3_moe", "Qwen/Qwen3-30B-A3B", "hermes", "qwen3"),
    ("qwen3_moe", "Qwen/Qwen3-30B-A3B-Instruct-2507", "hermes", None),
    ("llama", "Salesforce/Llama-xLAM-2-8b-fc-r", "xlam", None),
    ("llama", "NousResearch/Hermes-3-Llama-3.1-8B", "hermes", None),
    ("llama", "meta-llama/Llama-3.1-8B-Instruct", "llama3_json", None),
    ("llama", "some-org/qwen3-looking-name", "llama3_json", None),
    ("glm4_moe", None, "glm45", "glm45"),
    ("gpt_oss", None, "openai", "openai_gptoss"),
    ("phi3", "microsoft/Phi-4-mini-instruct", "phi4_mini_json", None),
    ("gemma3", None, "pythonic", None),
])
def test_model_type(model_type, name, tool, reasoning):
    found = explain_detection(model_type=model_type, model_name=name)
    assert (found["tool_parser"], found["reasoning_parser"]) == (tool, reasoning)
    assert found["tool_reason"].startswith(f"model_type={model_type}")


def test_model_name_alone_and_fallback():
    assert detect_parsers(model_name="openai/gpt-oss-120b") == {"tool_parser": "openai", "reasoning_parser": "openai_gptoss"}
    found = explain_detection(model_type="unknown_arch", model_name="my-model")
    assert found == {"tool_parser": "auto", "tool_reason": "none found: output sniffing (auto)",
                     "reasoning_parser": None, "reasoning_reason": "none found: no reasoning markers"}


@pytest.mark.parametrize(("config", "tool"), [
    ({"tool_parser_type": "json_tools"}, "hermes"),
    ({"tool_parser_type": "function_gemma"}, "functiongemma"),
    ({"tool_parser_type": "laguna"}, "glm47"),
    ({"tool_parser_type": "qwen3_coder"}, "qwen3_coder"),
    ({"chat_template_type": "deepseek_v32"}, "deepseek_v32"),
])
def test_checkpoint_metadata(config, tool):
    found = explain_detection(tokenizer_config=config, chat_template=QWEN25)
    assert found["tool_parser"] == tool
    key, value = next(iter(config.items()))
    assert found["tool_reason"] == f"tokenizer_config {key}={value}"


def test_unknown_metadata_falls_through_to_template():
    found = explain_detection(tokenizer_config={"tool_parser_type": "kimi_k3"}, chat_template=KIMI_K2)
    assert found["tool_parser"] == "kimi_k2"


def test_template_and_tokens_read_from_tokenizer_config():
    config = {"chat_template": [{"name": "default", "template": "x"}, {"name": "tool_use", "template": LLAMA31}],
              "added_tokens_decoder": {"1": {"content": "<|eot_id|>"}}}
    assert explain_detection(tokenizer_config=config)["tool_parser"] == "llama3_json"
    config = {"added_tokens_decoder": {"5": {"content": "[TOOL_CALLS]"}}}
    assert explain_detection(tokenizer_config=config)["tool_reason"] == "special token [TOOL_CALLS]"


def test_detection_order():
    everything = dict(chat_template=MISTRAL, special_tokens=["<|python_tag|>"], model_type="glm4_moe",
                      tokenizer_config={"tool_parser_type": "kimi_k2"})
    assert explain_detection(**everything, pinned_tool="pythonic")["tool_reason"] == "pinned in config"
    assert explain_detection(**everything)["tool_parser"] == "kimi_k2"
    everything.pop("tokenizer_config")
    assert explain_detection(**everything)["tool_parser"] == "mistral"
    everything.pop("chat_template")
    assert explain_detection(**everything)["tool_parser"] == "llama3_json"
    everything.pop("special_tokens")
    assert explain_detection(**everything)["tool_parser"] == "glm45"


def test_pins_accept_aliases_and_reject_unknown():
    found = explain_detection(pinned_tool="qwen25", pinned_reasoning="deepseek-r1")
    assert (found["tool_parser"], found["reasoning_parser"]) == ("hermes", "deepseek_r1")
    with pytest.raises(ValueError, match=r"unknown tool parser 'nope'; known: .*hermes"):
        explain_detection(pinned_tool="nope")


@pytest.mark.parametrize(("alias", "canonical"), [
    ("qwen25", "hermes"), ("json_tools", "hermes"), ("Hermes_2_Pro", "hermes"), ("deepseekv3", "deepseek_v3"),
    ("deepseekv31", "deepseek_v31"), ("gpt-oss", "openai"), ("minimax-m2", "minimax_m2"), ("llama3", "llama3_json"),
    ("function_gemma", "functiongemma"), ("laguna", "glm47"), ("granite_20b_fc", "granite-20b-fc"),
    ("qwen3_coder_xml", "qwen3_coder"), ("apertus2509", "apertus"), ("interns1", "internlm"),
])
def test_tool_aliases(alias, canonical):
    assert tool_parser_name(alias) == canonical


@pytest.mark.parametrize(("alias", "canonical"), [
    ("deepseek-r1", "deepseek_r1"), ("gpt-oss", "openai_gptoss"), ("kimi", "kimi_k2"), ("glm47", "glm45"),
    ("minimax-append-think", "minimax_m2_append_think"), ("deepseek", "deepseek_r1"),
])
def test_reasoning_aliases(alias, canonical):
    assert reasoning_parser_name(alias) == canonical


@pytest.mark.parametrize("name", sorted(TOOL_PARSERS))
def test_every_tool_parser_loads(name):
    assert load_tool_parser(name) is not None


@pytest.mark.parametrize("name", sorted(REASONING_PARSERS))
def test_every_reasoning_parser_loads(name):
    assert load_reasoning_parser(name) is not None


def test_required_names_registered():
    tools = {"hermes", "qwen3_coder", "qwen3_xml", "llama3_json", "pythonic", "llama4_pythonic", "olmo3", "lfm2",
             "mistral", "deepseek_v3", "deepseek_v31", "deepseek_v32", "deepseek_v4", "glm45", "glm47", "kimi_k2",
             "openai", "minimax_m2", "minimax", "granite", "granite4", "granite-20b-fc", "phi4_mini_json", "xlam",
             "functiongemma", "gemma4", "seed_oss", "hunyuan_a13b", "internlm", "step3", "step3p5", "longcat",
             "ernie45", "jamba", "apertus", "gigachat3", "hy_v3", "auto"}
    reasoning = {"deepseek_r1", "deepseek_v3", "qwen3", "glm45", "kimi_k2", "minimax_m2", "minimax_m2_append_think",
                 "openai_gptoss", "mistral", "seed_oss", "granite", "hunyuan_a13b", "ernie45", "gemma4", "step3p5",
                 "olmo3"}
    assert tools <= set(TOOL_PARSERS)
    assert reasoning <= set(REASONING_PARSERS)


# --- Templates that show no format of their own: no parser rather than a guess -------------------

GEMMA2 = """{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}
{% endif %}{% for message in messages %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}
{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim
+ '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}"""
PHI35 = """{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}{{'<|system|>\\n'
+ message['content'] + '<|end|>\\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\\n' + message['content']
+ '<|end|>\\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}
{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}"""
COMMAND_R_PLUS_DEFAULT = """{{ bos_token }}{% for message in loop_messages %}{% if message['role'] == 'user' %}
{{ '<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' + content.strip() + '<|END_OF_TURN_TOKEN|>' }}{% elif message['role'] ==
'assistant' %}{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' + content.strip() + '<|END_OF_TURN_TOKEN|>' }}{% endif %}
{% endfor %}{% if add_generation_prompt %}{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' }}{% endif %}"""
COMMAND_R_PLUS_TOOL_USE = """{{-'\\n\\n## Available Tools\\nHere is a list of tools that you have available to you:\\n\\n'}}
{%- for tool in tools %}{{- '```python\\ndef ' + tool.name + '(' }}{%- endfor %}{{- '<|END_OF_TURN_TOKEN|>'}}
{%- for message in loop_messages %}{%- if message.role == 'assistant' and message.tool_calls is defined %}
{{- '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' }}{{- '\\nAction:\\n```json\\n[\\n' }}{%- for tool_call in message.tool_calls %}
{{- '"tool_name": "'|indent(8, first=true) + tool_call.name + '",\\n' }}{{- '"parameters": '|indent(8, first=true) }}
{{- tool_call.arguments|tojson(indent=4)|indent(8) }}{%- endfor %}{{- "\\n]```\\n" }}{%- elif message.role == 'tool' %}
{{- '<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><results>\\n' }}{{- message.content|trim }}{{- '</results><|END_OF_TURN_TOKEN|>' }}
{%- endif %}{%- endfor %}{{-'<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>Write \\'Action:\\' followed by a
json-formatted list of actions that you want to perform in order to produce a good response to the user\\'s last
input. You should use the `directly-answer` tool if calling the other tools is unnecessary.<|END_OF_TURN_TOKEN|>'}}"""
COMMAND_R_PLUS_CONFIG = {"chat_template": [{"name": "default", "template": COMMAND_R_PLUS_DEFAULT},
                                           {"name": "tool_use", "template": COMMAND_R_PLUS_TOOL_USE}],
                         "added_tokens_decoder": {"255000": {"content": "<|START_OF_TURN_TOKEN|>"},
                                                  "255001": {"content": "<|END_OF_TURN_TOKEN|>"}}}
QWQ = QWEN25.replace("{%- endfor %}", "{%- endfor %}{%- set content = message.content.split('</think>')[-1] %}") + """
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}"""
# Templates that do handle tools, in a shape no marker names: the model name still decides.
XLAM = """{%- if tools %}{{- 'You have access to the following tools:\\n' + tools | tojson }}{%- endif %}
{%- if message.tool_calls %}{{- message.tool_calls | map(attribute='function') | list | tojson }}{%- endif %}"""
PHI4_MINI = """{% if 'tools' in message and message['tools'] is not none %}{{ '<|' + message['role'] + '|>' + message['content']
+ '<|tool|>' + message['tools'] + '<|/tool|>' + '<|end|>' }}{% endif %}"""


@pytest.mark.parametrize(("template", "config", "model_type", "name"), [
    # Today's guesses were: pythonic (model name 'gemma'), auto, auto.
    (GEMMA2, None, "gemma2", "google/gemma-2-9b-it"),
    (PHI35, None, "phi3", "microsoft/Phi-3.5-mini-instruct"),
    (None, COMMAND_R_PLUS_CONFIG, "cohere", "CohereForAI/c4ai-command-r-plus-08-2024"),
], ids=["gemma2", "phi3.5", "command-r-plus"])
def test_template_without_a_tool_format_reports_no_tool_parser(template, config, model_type, name):
    found = explain_detection(chat_template=template, tokenizer_config=config, model_type=model_type, model_name=name)
    assert found["tool_parser"] is None
    assert found["reasoning_parser"] is None
    assert detect_parsers(chat_template=template, tokenizer_config=config, model_type=model_type,
                          model_name=name) == {"tool_parser": None, "reasoning_parser": None}


def test_no_tool_format_reasons():
    assert explain_detection(chat_template=GEMMA2)["tool_reason"] == "chat template has no tool-call format"
    assert explain_detection(tokenizer_config=COMMAND_R_PLUS_CONFIG)["tool_reason"] == (
        "chat template teaches a format no parser reads "
        "(Command R/R+ generic JSON actions: 'json-formatted list of actions')")
    assert explain_detection(chat_template=PHI35)["reasoning_reason"] == "chat template has no thinking"


def test_no_tool_format_template_beats_tokens_and_model_but_not_pins_or_metadata():
    assert explain_detection(chat_template=GEMMA2, special_tokens=["[TOOL_CALLS]"], model_type="gemma3")["tool_parser"] is None
    pinned = explain_detection(chat_template=GEMMA2, model_name="google/gemma-2-9b-it", pinned_tool="pythonic")
    assert (pinned["tool_parser"], pinned["tool_reason"]) == ("pythonic", "pinned in config")
    meta = explain_detection(chat_template=PHI35, tokenizer_config={"tool_parser_type": "json_tools"})
    assert meta["tool_parser"] == "hermes"


@pytest.mark.parametrize(("template", "model_type", "name", "tool"), [
    (XLAM, "llama", "Salesforce/Llama-xLAM-2-8b-fc-r", "xlam"),
    (PHI4_MINI, "phi3", "microsoft/Phi-4-mini-instruct", "phi4_mini_json"),
])
def test_template_with_unmarked_tool_handling_keeps_the_model_choice(template, model_type, name, tool):
    assert explain_detection(chat_template=template, model_type=model_type, model_name=name)["tool_parser"] == tool


def test_blank_template_is_no_evidence():
    found = explain_detection(chat_template="  ", model_type="llama", model_name="meta-llama/Llama-3.1-8B-Instruct")
    assert found["tool_parser"] == "llama3_json"


# --- Reasoning: QwQ opens the block in its prompt; instruct releases do not think ----------------

def test_qwq_template_gets_deepseek_r1():
    found = explain_detection(chat_template=QWQ, model_type="qwen2", model_name="Qwen/QwQ-32B")
    assert (found["tool_parser"], found["reasoning_parser"]) == ("hermes", "deepseek_r1")
    assert found["reasoning_reason"] == "chat template contains '</think>' and '<|im_start|>assistant\\\\n<think>\\\\n'"
    # Rendered with real newlines (a template file written that way) it is the same format.
    assert explain_detection(chat_template=QWQ.replace("\\n", "\n"))["reasoning_parser"] == "deepseek_r1"


def test_forced_open_qwen_templates_keep_their_own_parsers():
    assert explain_detection(chat_template=QWEN35)["reasoning_parser"] == "qwen3"  # vLLM: qwen3 for Qwen3.5
    assert explain_detection(chat_template=QWEN3)["reasoning_parser"] == "qwen3"  # hybrid: the model writes <think>


@pytest.mark.parametrize(("model_type", "name", "reasoning"), [
    ("qwen2", "Qwen/QwQ-32B", "deepseek_r1"),
    ("qwen2", "Qwen/QwQ-32B-Preview", None),  # thinks in plain prose, no tags
    (None, "mlx-community/QwQ-32B-4bit", "deepseek_r1"),
])
def test_qwq_by_model(model_type, name, reasoning):
    assert explain_detection(model_type=model_type, model_name=name)["reasoning_parser"] == reasoning


THINK_TOKENS = ["<think>", "</think>", "<|tool_calls_section_begin|>", "<|im_middle|>"]


@pytest.mark.parametrize(("template", "model_type", "name", "tokens", "reasoning"), [
    (KIMI_K2, "kimi_k2", "moonshotai/Kimi-K2-Instruct-0905", THINK_TOKENS, None),
    (KIMI_K2_THINKING, "kimi_k2", "moonshotai/Kimi-K2-Thinking", THINK_TOKENS, "kimi_k2"),
    (None, "kimi_k2", "moonshotai/Kimi-K2-Instruct", THINK_TOKENS, None),
    (None, "kimi_k2", "moonshotai/Kimi-K2-Thinking", THINK_TOKENS, "kimi_k2"),
    (None, "deepseek_v3", "mlx-community/Kimi-K2-Thinking-4bit", None, "kimi_k2"),
    (None, "kimi_k2", "moonshotai/Kimi-K2-Instruct", None, None),
], ids=["instruct-template", "thinking-template", "instruct-tokens", "thinking-tokens", "thinking-name", "instruct-name"])
def test_kimi_k2_instruct_has_no_reasoning_parser(template, model_type, name, tokens, reasoning):
    found = explain_detection(chat_template=template, model_type=model_type, model_name=name, special_tokens=tokens)
    assert (found["tool_parser"], found["reasoning_parser"]) == ("kimi_k2", reasoning)


def test_kimi_k2_instruct_reasons():
    found = explain_detection(chat_template=KIMI_K2, model_type="kimi_k2", special_tokens=THINK_TOKENS)
    assert found["reasoning_reason"] == "chat template has no thinking"
    found = explain_detection(model_type="kimi_k2", model_name="moonshotai/Kimi-K2-Instruct", special_tokens=THINK_TOKENS)
    assert found["reasoning_reason"] == "model name matches 'kimi.*instruct' (a release without thinking)"


def test_non_thinking_release_sharing_a_think_vocabulary():
    found = explain_detection(special_tokens=["<tool_call>", "<think>", "</think>"], model_type="qwen3_moe",
                              model_name="Qwen/Qwen3-Coder-30B-A3B-Instruct")
    assert (found["tool_parser"], found["reasoning_parser"]) == ("qwen3_coder", None)


def test_template_without_thinking_beats_reasoning_tokens():
    # Mistral Small 3.2 shares Magistral's vocabulary ([THINK] included) but its template has no thinking.
    assert explain_detection(chat_template=MISTRAL, special_tokens=["[THINK]", "[/THINK]"])["reasoning_parser"] is None
    assert explain_detection(chat_template=MAGISTRAL, special_tokens=["[THINK]", "[/THINK]"])["reasoning_parser"] == "mistral"


# --- Names vLLM added late: Cohere Command, Poolside Laguna, MiMo, Nemotron 3, Hunyuan v3, DeepSeek V4 ---

COHERE_CMD3 = """{%- if message.tool_calls %}<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>
{{- message.tool_plan }}<|END_THINKING|><|START_ACTION|>[{% for tc in message.tool_calls %}
    {"tool_call_id": "{{ tool_idx.value }}", "tool_name": "{{ tc['function']['name'] }}", "parameters":
{{ tc['function']['arguments']|tojson }}}{% endfor %}
]<|END_ACTION|><|END_OF_TURN_TOKEN|>{%- else %}<|START_RESPONSE|>{{ message.content }}<|END_RESPONSE|>{%- endif %}"""
COHERE_CMD4 = COHERE_CMD3.replace("<|START_RESPONSE|>", "<|START_TEXT|>").replace("<|END_RESPONSE|>", "<|END_TEXT|>") + """
{%- if add_generation_prompt -%}<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>{% if reasoning %}<|START_THINKING|>
{% else %}<|START_THINKING|><|END_THINKING|>{% endif %}{%- endif %}"""
LAGUNA = """{%- for m in messages %}{%- if m.role == 'assistant' %}<assistant>{%- if m.reasoning_content %}<think>
{{ m.reasoning_content }}</think>{%- endif %}{%- for tc in m.tool_calls %}<tool_call>{{ tc.function.name }}
{%- for k, v in tc.function.arguments.items() %}<arg_key>{{ k }}</arg_key><arg_value>{{ v }}</arg_value>{%- endfor %}
</tool_call>{%- endfor %}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}<assistant>{%- endif %}"""
MIMO = QWEN35
NEMOTRON3 = QWEN3_CODER + """{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- if enable_thinking %}
{{- '<think>\\n' }}{%- else %}{{- '<think></think>' }}{%- endif %}{%- endif %}"""
HY3 = HY_V3 + """<\uff5creasoning_mode\uff5c>reasoning_effort:{{ reasoning_effort }}<\uff5chy_User\uff5c>{{ content }}
<\uff5chy_Assistant\uff5c>{%- if reasoning_effort != 'no_think' %}<think>{%- else %}<think></think>{%- endif %}"""

NEW_FAMILY_TEMPLATES = [
    ("cohere-command-a", COHERE_CMD3, "cohere_command3", "cohere_command3"),
    ("cohere-command-4", COHERE_CMD4, "cohere_command4", "cohere_command4"),
    ("poolside-laguna", LAGUNA, "poolside_v1", "poolside_v1"),
    ("mimo-v2-flash", MIMO, "qwen3_coder", "qwen3"),  # vLLM's mimo names are these two parsers
    ("nemotron-3", NEMOTRON3, "qwen3_coder", "nemotron_v3"),
    ("hy3", HY3, "hy_v3", "hy_v3"),
    ("deepseek-v4", DEEPSEEK_V4, "deepseek_v4", "deepseek_v4"),
]


@pytest.mark.parametrize(("label", "template", "tool", "reasoning"), NEW_FAMILY_TEMPLATES,
                         ids=[t[0] for t in NEW_FAMILY_TEMPLATES])
def test_new_family_template_markers(label, template, tool, reasoning):
    found = explain_detection(chat_template=template)
    assert (found["tool_parser"], found["reasoning_parser"]) == (tool, reasoning)
    assert found["tool_reason"].startswith("chat template contains '")
    assert found["reasoning_reason"].startswith("chat template contains '")


def test_command_r_plus_is_not_taken_for_command_a():
    # Command R+ teaches plain "Action:" JSON; only <|START_ACTION|> is Command A / 4.
    assert explain_detection(tokenizer_config=COMMAND_R_PLUS_CONFIG)["tool_parser"] is None


@pytest.mark.parametrize(("name", "tool", "reasoning"), [
    ("CohereLabs/c4ai-command-a-03-2025", "cohere_command3", "cohere_command3"),
    ("CohereLabs/c4ai-command-r7b-12-2024", "cohere_command3", "cohere_command3"),
    ("poolside/Laguna-XS-2.1", "poolside_v1", "poolside_v1"),
    ("XiaomiMiMo/MiMo-V2-Flash", "qwen3_coder", "qwen3"),
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "qwen3_coder", "nemotron_v3"),
    ("Hcompany/Holo2-8B", "auto", "holo2"),  # a Qwen3-style template carries no Holo2 marker
    ("tencent/Hy3-preview", "hy_v3", "hy_v3"),
    ("deepseek-ai/DeepSeek-V4-Flash", "deepseek_v4", "deepseek_v4"),
])
def test_new_family_model_names(name, tool, reasoning):
    found = explain_detection(model_name=name)
    assert (found["tool_parser"], found["reasoning_parser"]) == (tool, reasoning)


def test_deepseek_v4_model_type_gets_its_reasoning_parser():
    assert detect_parsers(model_type="deepseek_v4") == {"tool_parser": "deepseek_v4", "reasoning_parser": "deepseek_v4"}


def test_new_vllm_names_registered():
    assert {"cohere_command3", "cohere_command4", "poolside_v1"} <= set(TOOL_PARSERS)
    assert {"deepseek_v4", "holo2", "hy_v3", "nemotron_v3", "poolside_v1", "cohere_command3",
            "cohere_command4"} <= set(REASONING_PARSERS)
    # vLLM registers these names on the very class of another name: aliases here.
    assert (tool_parser_name("mimo"), reasoning_parser_name("mimo")) == ("qwen3_coder", "qwen3")
    assert tool_parser_name("llama4_json") == "llama3_json"
