"""Which output parsers a model uses, and why: config pins, then the checkpoint's own files.

Runs in the router when a model's tokenizer loads; the result sits on the ModelHandle and
is shown by ``rapid-mlx models``.  When detection finds no tool parser, the model still
gets ``auto`` (output sniffing), so a call it makes anyway is not lost as text.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from parsers import explain_detection, reasoning_parser_name, tool_parser_name
from parsers.registry import load_reasoning_parser

logger = logging.getLogger(__name__)


# The tool parser that stands in when detection names none.
SNIFFING_TOOL_PARSER = "auto"


@dataclass(frozen=True)
class ParserChoice:
    tool_parser: str | None
    tool_reason: str
    reasoning_parser: str | None
    reasoning_reason: str
    tool_sniffed: bool = False
    """True when detection named no tool parser and ``tool_parser`` is the sniffing fallback."""

    def tool_line(self) -> str:
        """The tool parser and why, as ``rapid-mlx models`` prints it."""
        if self.tool_sniffed:
            return f"none detected ({SNIFFING_TOOL_PARSER}: sniffs the output; {self.tool_reason})"
        return f"{self.tool_parser or 'none'} ({self.tool_reason})"

    def reasoning_line(self) -> str:
        return f"{self.reasoning_parser or 'none'} ({self.reasoning_reason})"


class ParserConfigError(ValueError):
    """A pinned parser name is not one we know."""


def _pin(value: str, canonical) -> str | None:
    """'auto' → None (detect); 'none' → '' (disabled); a name → its canonical spelling."""
    if value == "auto":
        return None
    if value == "none":
        return ""
    try:
        return canonical(value)
    except (KeyError, ValueError) as exc:
        raise ParserConfigError(str(exc)) from None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def choose_parsers(model_dir: Path, *, tool_parser: str, reasoning_parser: str, chat_template: str | None = None,
                   special_tokens: list[str] | None = None, model_name: str | None = None) -> ParserChoice:
    """Pinned names win; 'none' disables; 'auto' detects from the checkpoint (DESIGN.md order).

    Raises:
        ParserConfigError: a pinned name is unknown.
    """
    pinned_tool = _pin(tool_parser, tool_parser_name)
    pinned_reasoning = _pin(reasoning_parser, reasoning_parser_name)
    tokenizer_config = _read_json(model_dir / "tokenizer_config.json")
    if chat_template is None:
        chat_template = tokenizer_config.get("chat_template") if isinstance(tokenizer_config.get("chat_template"), str) else None
        template_file = model_dir / "chat_template.jinja"
        if chat_template is None and template_file.is_file():
            chat_template = template_file.read_text()
    detected = explain_detection(
        chat_template=chat_template,
        model_type=_read_json(model_dir / "config.json").get("model_type"),
        model_name=model_name,
        special_tokens=special_tokens,
        tokenizer_config=tokenizer_config,
        pinned_tool=pinned_tool or None,
        pinned_reasoning=pinned_reasoning or None,
    )
    reasoning = (None, "disabled in config (reasoning_parser = \"none\")") if pinned_reasoning == "" else (
        detected["reasoning_parser"], detected["reasoning_reason"])
    if pinned_tool == "":
        return ParserChoice(None, "disabled in config (tool_parser = \"none\")", *reasoning)
    if detected["tool_parser"] in (None, SNIFFING_TOOL_PARSER) and not pinned_tool:
        return ParserChoice(SNIFFING_TOOL_PARSER, _sniffing_reason(detected), *reasoning, tool_sniffed=True)
    return ParserChoice(detected["tool_parser"], detected["tool_reason"], *reasoning)


def _sniffing_reason(detected: dict[str, str | None]) -> str:
    """Why detection named no tool parser (its own wording when it fell back to sniffing itself)."""
    if detected["tool_parser"] is None:
        return str(detected["tool_reason"])
    return "no template marker, special token or model type names a format"


def prompt_opens_thinking(prompt_text: str, reasoning_parser: str | None) -> bool:
    """Whether the rendered prompt ends inside an open think block of this family's tags."""
    if reasoning_parser is None:
        return False
    parser = load_reasoning_parser(reasoning_parser)
    opens = getattr(parser, "open_tags", ())
    closes = getattr(parser, "close_tags", ())
    last_open = max((prompt_text.rfind(tag) for tag in opens), default=-1)
    last_close = max((prompt_text.rfind(tag) for tag in closes), default=-1)
    return last_open > last_close


def prompt_closes_thinking(prompt_text: str, reasoning_parser: str | None) -> bool:
    """Whether the rendered prompt ends with a closed think block (thinking turned off: Qwen3's
    ``enable_thinking=False`` writes an empty one), so the output starts with the answer."""
    if reasoning_parser is None:
        return False
    closes = getattr(load_reasoning_parser(reasoning_parser), "close_tags", ())
    return prompt_text.rstrip().endswith(tuple(closes))


def pin_problems(model_id: str, *, tool_parser: str, reasoning_parser: str) -> list[str]:
    """One line per pinned parser name that is unknown, named by its TOML path (for validate and reload)."""
    problems = []
    for key, value, canonical in (("tool_parser", tool_parser, tool_parser_name), ("reasoning_parser", reasoning_parser, reasoning_parser_name)):
        try:
            _pin(value, canonical)
        except ParserConfigError as exc:
            problems.append(f"models.{model_id}.{key}: {exc}")
    return problems
