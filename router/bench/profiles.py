"""Synthetic agent conversations with the sizes real coding agents send.

The text is meaningless but deterministic from a seed; what matters is its shape: a long
system prompt and tool schemas that every turn repeats, a task, then one assistant tool call
and one tool result per turn. Sizes are counted in words drawn from common English and code
vocabulary, which nearly every tokenizer keeps as single tokens (the servers' usage fields
report the real counts, and the bench records those; a tokenizer that splits words, such as
the demo model's, counts more).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from engines.demo.tiny import CORPUS_WORDS

# The words the bench checkpoints' tokenizer is trained on (router/bench/models.py): single
# tokens there, and common enough English to be single tokens in any real tokenizer.
_VOCABULARY = CORPUS_WORDS

# Tool names of the shapes coding agents register; the profile takes as many as it needs.
_TOOL_NAMES = (
    "read_file", "write_file", "edit_file", "run_shell", "search_code", "list_directory", "glob_files",
    "grep", "web_fetch", "web_search", "todo_write", "spawn_task", "notebook_edit", "ask_user",
    "apply_patch", "view_image",
)


# Measured with the bench checkpoints' tokenizer on this filler (capitals, full stops and the
# JSON around tool schemas included); real BPE tokenizers land close to it.
TOKENS_PER_WORD = 1.45


def words_for(tokens: int) -> int:
    return max(1, round(tokens / TOKENS_PER_WORD))


@dataclass(frozen=True)
class Profile:
    """Sizes, in tokens, of what one agent resends each turn."""

    name: str
    system_tokens: int
    tools: int
    tool_description_tokens: int
    task_tokens: int = 80


PROFILES = {
    # Claude Code: about 12k tokens of system prompt and tool schemas, a dozen and more tools.
    "claude-code": Profile("claude-code", system_tokens=8500, tools=14, tool_description_tokens=200),
    # Codex CLI: about 5k.
    "codex": Profile("codex", system_tokens=3800, tools=6, tool_description_tokens=120),
    # A small agent: about 2.5k.
    "small": Profile("small", system_tokens=1550, tools=4, tool_description_tokens=90),
    # Not an agent's size: for checking the bench itself in seconds.
    "tiny": Profile("tiny", system_tokens=150, tools=2, tool_description_tokens=30, task_tokens=20),
}


def words(rng: random.Random, count: int) -> str:
    """``count`` words of sentence-shaped filler."""
    out, sentence = [], 0
    for _ in range(count):
        word = rng.choice(_VOCABULARY)
        out.append(word.capitalize() if sentence == 0 else word)
        sentence += 1
        if sentence >= rng.randint(8, 16):
            out[-1] += "."
            sentence = 0
    return " ".join(out)


def _tool_schema(rng: random.Random, name: str, description_tokens: int) -> dict[str, Any]:
    properties = {
        "path": {"type": "string", "description": words(rng, 12)},
        "query": {"type": "string", "description": words(rng, 12)},
        "limit": {"type": "integer", "description": words(rng, 8)},
    }
    return {"name": name, "description": words(rng, words_for(description_tokens)),
            "parameters": {"type": "object", "properties": properties, "required": ["path"]}}


@dataclass
class AgentPrefix:
    """What every turn of a session starts with: system prompt and tools."""

    system: str
    tools: list[dict[str, Any]]  # neutral: name, description, parameters (a JSON schema)

    @classmethod
    def build(cls, profile: Profile, seed: int) -> AgentPrefix:
        rng = random.Random(seed)
        system = words(rng, words_for(profile.system_tokens))
        tools = [_tool_schema(rng, _TOOL_NAMES[i % len(_TOOL_NAMES)] + ("" if i < len(_TOOL_NAMES) else f"_{i}"),
                              profile.tool_description_tokens) for i in range(profile.tools)]
        return cls(system, tools)


@dataclass
class ToolStep:
    call_id: str
    name: str
    arguments: dict[str, Any]
    result: str


@dataclass
class AgentSession:
    """One agent session's history, grown a tool call and a tool result at a time."""

    prefix: AgentPrefix
    task: str
    rng: random.Random
    steps: list[ToolStep] = field(default_factory=list)

    @classmethod
    def start(cls, prefix: AgentPrefix, profile: Profile, seed: int) -> AgentSession:
        rng = random.Random(seed)
        return cls(prefix, "Task: " + words(rng, words_for(profile.task_tokens)), rng)

    def add_step(self, result_tokens: int) -> None:
        """Append the assistant's next tool call and its result (about ``result_tokens`` long)."""
        tool = self.rng.choice(self.prefix.tools)
        arguments = {"path": f"src/{self.rng.choice(_VOCABULARY)}/{self.rng.choice(_VOCABULARY)}.py"}
        self.steps.append(ToolStep(f"call_{len(self.steps)}_{self.rng.randrange(1 << 30):08x}", tool["name"], arguments,
                                   words(self.rng, words_for(result_tokens))))

    def openai_request(self) -> dict[str, Any]:
        """``messages`` and ``tools`` of an OpenAI chat request."""
        messages: list[dict[str, Any]] = [{"role": "system", "content": self.prefix.system}, {"role": "user", "content": self.task}]
        for step in self.steps:
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": step.call_id, "type": "function", "function": {"name": step.name, "arguments": json.dumps(step.arguments)}}]})
            messages.append({"role": "tool", "tool_call_id": step.call_id, "content": step.result})
        return {"messages": messages, "tools": [{"type": "function", "function": tool} for tool in self.prefix.tools]}

    def request(self, api: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the request in ``api``'s shape, the same as OpenAI chat for rendering the prompt locally)."""
        prompt = self.openai_request()
        return (prompt if api == "openai" else self.anthropic_request()), prompt

    def anthropic_request(self) -> dict[str, Any]:
        """``system``, ``messages`` and ``tools`` of an Anthropic Messages request."""
        messages: list[dict[str, Any]] = [{"role": "user", "content": self.task}]
        for step in self.steps:
            messages.append({"role": "assistant", "content": [
                {"type": "tool_use", "id": step.call_id, "name": step.name, "input": step.arguments}]})
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": step.call_id, "content": step.result}]})
        tools = [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in self.prefix.tools]
        return {"system": self.prefix.system, "messages": messages, "tools": tools}


def independent_prompt(seed: int, prompt_tokens: int) -> list[dict[str, Any]]:
    """A single-message chat that shares nothing with any other seed's (burst traffic)."""
    rng = random.Random(seed)
    return [{"role": "user", "content": f"Request {seed:x}. " + words(rng, words_for(prompt_tokens))}]
