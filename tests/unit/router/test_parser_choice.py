"""Parser choice for a checkpoint directory: pins, detection, and the sniffing fallback that
``rapid-mlx models`` reports when detection names no tool parser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from router.cli import main
from router.turn.parser_choice import ParserChoice, ParserConfigError, choose_parsers

GEMMA2 = """{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}
{% endif %}{% for message in messages %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim
+ '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}"""
QWEN25 = """{%- if tools %}For each function call, return a json object with function name and arguments within
<tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}
\\n</tool_call><|im_end|>\\n{%- endif %}{%- for tool_call in message.tool_calls %}{{- tool_call.name }}{%- endfor %}"""
COMMAND_R_PLUS_TOOL_USE = """{%- for tool in tools %}{{- '```python\\ndef ' + tool.name + '(' }}{%- endfor %}
{{-'<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>Write \\'Action:\\' followed by a json-formatted list of actions that you
want to perform in order to produce a good response to the user\\'s last input.<|END_OF_TURN_TOKEN|>'}}"""
SNIFFED = "none detected (auto: sniffs the output; chat template has no tool-call format)"


def checkpoint(root: Path, name: str, *, model_type: str, tokenizer_config: dict | None = None) -> Path:
    path = root / name
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"model_type": model_type}))
    if tokenizer_config is not None:
        (path / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    return path


@pytest.fixture
def gemma2(tmp_path: Path) -> Path:
    return checkpoint(tmp_path, "gemma-2-2b-it", model_type="gemma2", tokenizer_config={"chat_template": GEMMA2})


def test_no_detected_tool_parser_falls_back_to_sniffing(gemma2: Path):
    choice = choose_parsers(gemma2, tool_parser="auto", reasoning_parser="auto", model_name=str(gemma2))
    assert choice == ParserChoice("auto", "chat template has no tool-call format", None, "chat template has no thinking",
                                  tool_sniffed=True)
    assert choice.tool_line() == SNIFFED
    assert choice.reasoning_line() == "none (chat template has no thinking)"


def test_template_file_is_read_when_the_tokenizer_config_has_none(tmp_path: Path):
    path = checkpoint(tmp_path, "gemma-2-9b-it", model_type="gemma2", tokenizer_config={})
    (path / "chat_template.jinja").write_text(GEMMA2)
    assert choose_parsers(path, tool_parser="auto", reasoning_parser="auto", model_name=str(path)).tool_line() == SNIFFED


def test_generic_actions_template_falls_back_to_sniffing(tmp_path: Path):
    config = {"chat_template": [{"name": "default", "template": "{{ bos_token }}"},
                                {"name": "tool_use", "template": COMMAND_R_PLUS_TOOL_USE}]}
    path = checkpoint(tmp_path, "c4ai-command-r-plus", model_type="cohere", tokenizer_config=config)
    choice = choose_parsers(path, tool_parser="auto", reasoning_parser="auto", model_name=str(path))
    assert (choice.tool_parser, choice.tool_sniffed) == ("auto", True)
    assert choice.tool_line().startswith("none detected (auto: sniffs the output; chat template teaches a format no parser")


def test_nothing_to_go_on_is_sniffing_too(tmp_path: Path):
    path = checkpoint(tmp_path, "my-model", model_type="unknown_arch")
    choice = choose_parsers(path, tool_parser="auto", reasoning_parser="auto", model_name=str(path))
    assert (choice.tool_parser, choice.tool_sniffed) == ("auto", True)
    assert choice.tool_line() == (
        "none detected (auto: sniffs the output; no template marker, special token or model type names a format)")


def test_detected_parser_is_not_a_fallback(tmp_path: Path):
    path = checkpoint(tmp_path, "qwen2.5-7b-instruct", model_type="qwen2", tokenizer_config={"chat_template": QWEN25})
    choice = choose_parsers(path, tool_parser="auto", reasoning_parser="auto", model_name=str(path))
    assert (choice.tool_parser, choice.tool_sniffed) == ("hermes", False)
    assert choice.tool_line() == "hermes (chat template contains '<tool_call>' and 'tool_call.name')"


def test_pins_are_unchanged(gemma2: Path):
    pinned = choose_parsers(gemma2, tool_parser="pythonic", reasoning_parser="deepseek-r1", model_name=str(gemma2))
    assert pinned == ParserChoice("pythonic", "pinned in config", "deepseek_r1", "pinned in config")
    assert pinned.tool_line() == "pythonic (pinned in config)"
    disabled = choose_parsers(gemma2, tool_parser="none", reasoning_parser="none", model_name=str(gemma2))
    assert (disabled.tool_parser, disabled.reasoning_parser, disabled.tool_sniffed) == (None, None, False)
    assert disabled.tool_line() == 'none (disabled in config (tool_parser = "none"))'
    with pytest.raises(ParserConfigError, match="unknown tool parser 'nope'"):
        choose_parsers(gemma2, tool_parser="nope", reasoning_parser="auto")


def test_models_listing_says_sniffing(gemma2: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    config = tmp_path / "rapidmlx.toml"
    config.write_text(f'[models.g2]\npath = "{gemma2}"\n\n[models.pinned]\npath = "{gemma2}"\ntool_parser = "pythonic"\n')
    assert main(["models", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert f"  tool parser: {SNIFFED}\n  reasoning parser: none (chat template has no thinking)\n" in out
    assert "  tool parser: pythonic (pinned in config)\n" in out
    assert out.count("  required tool calls: prompting only (constrained decoding covers hermes, llama3_json, qwen3_coder, qwen3_xml)\n") == 2


def test_models_listing_says_when_required_calls_are_constrained(gemma2: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    config = tmp_path / "rapidmlx.toml"
    config.write_text(f'[models.coder]\npath = "{gemma2}"\ntool_parser = "qwen3_xml"\n')
    assert main(["models", "--config", str(config)]) == 0
    assert "  required tool calls: constrained decoding (the family's format, arguments by their schemas)\n" in capsys.readouterr().out
