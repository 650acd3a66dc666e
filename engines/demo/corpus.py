"""Synthetic conversations that teach the demo model to chat, call tools and think.

A conversation is a list of OpenAI-style messages plus an optional tool list, exactly what
a client sends to the server. ``data.py`` renders them with the shipped chat template, so
the model trains on the very text it will be prompted with.

Assistant messages carry a ``reasoning_content`` that decides how they are rendered:
a sentence (thinking mode: ``<think>`` block the model must write), ``"\\n"`` (renders as
the empty ``<think>\\n\\n</think>\\n\\n`` that ``enable_thinking=false`` puts in the prompt),
or nothing (history as a client sends it back; not trained on).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from engines.demo import lexicon as lx

# Renders as "<think>\n\n</think>\n\n": the prompt suffix of enable_thinking=false.
EMPTY_REASONING = "\n"


def _tool(name: str, description: str, params: dict[str, str]) -> dict[str, Any]:
    """An OpenAI function tool whose parameters are all required strings."""
    properties = {key: {"type": "string", "description": text} for key, text in params.items()}
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": list(params)},
        },
    }


WEATHER_TOOL = _tool("get_weather", "Get the current weather in a city.", {"city": "The city name, e.g. Paris."})
SEARCH_TOOL = _tool("web_search", "Search the web and return the top results.", {"query": "The search query."})
FILE_TOOL = _tool("read_file", "Read a text file from the workspace.", {"path": "Path of the file to read."})
CORE_TOOLS = {"weather": WEATHER_TOOL, "search": SEARCH_TOOL, "file": FILE_TOOL}
# The training cities a decoy can start from (a two-word name's first letters end in a space).
SINGLE_WORD_TRAIN_CITIES = tuple(c for c in lx.TRAIN_CITIES if " " not in c)
# Tools that are offered but never needed: the model must pick the relevant one by name.
DISTRACTOR_TOOLS = (
    _tool("get_time", "Get the current time in a timezone.", {"timezone": "IANA timezone name."}),
    _tool("send_email", "Send an email.", {"to": "Recipient address.", "subject": "Subject line.", "body": "Message body."}),
    _tool("calculator", "Evaluate an arithmetic expression.", {"expression": "The expression, e.g. 2+2."}),
    _tool("list_directory", "List the files in a directory.", {"path": "Directory path."}),
    _tool("get_stock_price", "Get the latest price of a stock.", {"symbol": "Ticker symbol."}),
    _tool("translate", "Translate text into another language.", {"text": "Text to translate.", "target_language": "Language code."}),
    _tool("create_event", "Create a calendar event.", {"title": "Event title.", "date": "ISO date."}),
    _tool("run_command", "Run a shell command and return its output.", {"command": "The command line."}),
    _tool("write_file", "Write text to a file.", {"path": "File path.", "content": "Text to write."}),
)


@dataclass
class Conversation:
    """One synthetic chat: messages, the tools offered, and how to render the generation prompt."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    thinking: bool = False
    meta: dict[str, Any] = field(default_factory=dict)


class ArgumentSource:
    """Draws tool arguments (cities, queries, paths) for one data split.

    Args:
        rng: Random source owned by the caller (determinism lives there).
        heldout: Draw only from the held-out lists that training never sees.
        invented: Share of training arguments that are made-up words. Zero keeps every
            argument in closed word lists, which a model this small learns to copy reliably
            within minutes; made-up words teach copying of anything, which it learns only
            sometimes (see README.md).
        decoys: Share of the made-up cities that are decoys (``decoy_city``). Zero draws
            nothing extra from ``rng``, so the stream is the one without them.
    """

    def __init__(self, rng: random.Random, *, heldout: bool = False, invented: float = 0.0,
                 decoys: float = 0.0) -> None:
        self.rng = rng
        self.heldout = heldout
        self.invented = invented
        self.decoys = decoys

    def invented_name(self) -> str:
        """A pronounceable made-up word such as "Velkora" that no list contains."""
        while True:
            word = "".join(
                self.rng.choice(lx.ONSETS) + self.rng.choice(lx.VOWELS)
                + (self.rng.choice(lx.CODAS) if self.rng.random() < 0.35 else "")
                for _ in range(self.rng.randint(2, 3))
            ).capitalize()
            if not any(city.lower() in word.lower() for city in lx.HELDOUT_CITIES):
                return word

    def city(self) -> str:
        """A training city (half real, half invented) or a held-out one."""
        if self.heldout:
            return self.rng.choice(lx.HELDOUT_CITIES)
        if self.rng.random() >= self.invented:
            return self.rng.choice(lx.TRAIN_CITIES)
        if self.decoys and self.rng.random() < self.decoys:
            return self.decoy_city()
        name = self.invented_name()
        return f"{self.rng.choice(lx.PLACE_PREFIXES)} {name}" if self.rng.random() < 0.2 else name

    def decoy_city(self) -> str:
        """A made-up city that starts like a training city and goes on otherwise: its first
        letters and an invented tail ("Osvelk"), the whole name and a few letters more
        ("Osloma"), or the name and an invented word ("Tokyo Brenax").

        Where the demo model fails to copy a held-out city, the piece it gets wrong is the one
        where a training name would end or go on (after "Os", "lo" outvotes Osaka's "a"; after
        "Kuala" the closing quote outvotes the space: engines/demo/README.md, "Why the held-out
        misses miss"). Decoys make that the piece to read from the request.
        """
        city = self.rng.choice(SINGLE_WORD_TRAIN_CITIES)
        shape = self.rng.randrange(3)
        while True:
            tail = self.invented_name()
            if shape == 0:
                name = city[: self.rng.randint(2, 4)] + tail.lower()
            elif shape == 1:
                name = city + tail.lower()[: self.rng.randint(1, 3)]
            else:
                name = f"{city} {tail}"
            if not any(held.lower() in name.lower() for held in lx.HELDOUT_CITIES):
                return name

    def query(self) -> str:
        """Two to four search words, sometimes with an invented one mixed in."""
        words = lx.HELDOUT_SEARCH_WORDS if self.heldout else lx.SEARCH_WORDS
        picked = [self.rng.choice(words) for _ in range(self.rng.randint(2, 4))]
        if not self.heldout and self.rng.random() < self.invented:
            picked[self.rng.randrange(len(picked))] = self.invented_name().lower()
        return " ".join(picked)

    def phrase(self) -> str:
        """Two to six words (cities, search words, invented names, numbers) to repeat back."""
        pools = (lx.SEARCH_WORDS, lx.FILE_WORDS, lx.TRAIN_CITIES)
        words = []
        for _ in range(self.rng.randint(2, 6)):
            roll = self.rng.random()
            if roll < 0.4:
                words.append(self.invented_name() if self.rng.random() < 0.5 else self.invented_name().lower())
            elif roll < 0.9:
                words.append(self.rng.choice(self.rng.choice(pools)))
            else:
                words.append(str(self.rng.randint(0, 999)))
        return " ".join(words)

    def path(self) -> str:
        """A relative file path such as ``src/cache_velko.py``."""
        if self.heldout:
            return self.rng.choice(lx.HELDOUT_FILE_NAMES)
        parts = [self.rng.choice(lx.FILE_WORDS) if self.rng.random() >= self.invented else self.invented_name().lower()
                 for _ in range(self.rng.randint(1, 2))]
        name = self.rng.choice("_-").join(parts) + self.rng.choice(lx.FILE_EXTS)
        return name if self.rng.random() < 0.2 else f"{self.rng.choice(lx.FILE_DIRS)}/{name}"


def _assistant(content: str = "", *, reasoning: str | None, calls: list[dict] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for i, c in enumerate(calls)
        ]
    return message


def tool_task(rng: random.Random, args: ArgumentSource, kind: str) -> dict[str, Any]:
    """Everything one tool episode needs: request, call, result and final answer texts.

    Args:
        rng: Random source.
        args: Where arguments come from (training or held-out lists).
        kind: "weather", "search" or "file".
    """
    if kind == "weather":
        city, temp = args.city(), rng.randint(-10, 38)
        unit = "Celsius" if rng.random() < 0.8 else "Fahrenheit"
        temp = temp if unit == "Celsius" else round(temp * 9 / 5 + 32)
        condition = rng.choice(lx.WEATHER_CONDITIONS)
        result = {"city": city, "temperature": temp, "unit": unit.lower(), "condition": condition}
        return {"request": rng.choice(lx.WEATHER_REQUESTS).format(city=city), "name": "get_weather",
                "arguments": {"city": city}, "result": json.dumps(result),
                "answer": rng.choice(lx.WEATHER_ANSWERS).format(city=city, temp=temp, unit=unit, condition=condition),
                "thought": rng.choice(lx.THINK_WEATHER).format(city=city), "value": city}
    if kind == "search":
        query = args.query()
        title = rng.choice(lx.SEARCH_TITLES).format(query=query)
        result = {"query": query, "results": [{"title": title, "url": f"https://example.com/{query.replace(' ', '-')}"}]}
        return {"request": rng.choice(lx.SEARCH_REQUESTS).format(query=query), "name": "web_search",
                "arguments": {"query": query}, "result": json.dumps(result),
                "answer": rng.choice(lx.SEARCH_ANSWERS).format(query=query, title=title),
                "thought": rng.choice(lx.THINK_SEARCH).format(query=query), "value": query}
    path, content = args.path(), rng.choice(lx.FILE_CONTENTS)
    return {"request": rng.choice(lx.FILE_REQUESTS).format(path=path), "name": "read_file",
            "arguments": {"path": path}, "result": content,
            "answer": rng.choice(lx.FILE_ANSWERS).format(path=path, content=content),
            "thought": rng.choice(lx.THINK_FILE).format(path=path), "value": path}


def greeting(rng: random.Random) -> str:
    """A greeting in one of many phrasings: composed, in another language, or an instruction."""
    roll = rng.random()
    if roll < 0.15:
        return rng.choice(lx.GREETING_INSTRUCTIONS)
    word = rng.choice(lx.FOREIGN_GREETINGS if roll < 0.35 else lx.GREETING_WORDS)
    text = word + rng.choice(lx.GREETING_ADDRESSES) + rng.choice(lx.GREETING_ENDINGS)
    case = rng.random()
    return text.capitalize() if case < 0.45 else text.upper() if case < 0.5 else text


def _unclear(rng: random.Random) -> str:
    """Keyboard mashing or a stray fragment."""
    text = "".join(rng.choice(lx.UNCLEAR_PIECES) for _ in range(rng.randint(1, 4)))
    return text if rng.random() < 0.7 else " ".join(rng.choice(lx.UNCLEAR_PIECES) for _ in range(rng.randint(2, 4)))


def out_of_domain(rng: random.Random) -> tuple[str, str]:
    """A (request, reply) the demo cannot serve: code, knowledge, errands, other languages,
    noise. The reply is always ``lexicon.CAPABILITY_REPLY``: what the demo can do instead."""
    roll = rng.random()
    if roll < 0.3:
        if rng.random() < 0.75:
            thing = rng.choice(lx.CODE_THINGS)
            language = rng.choice(lx.CODE_LANGUAGES)
            article = "an" if language[0] in "AEIOU" else "a"
            request = f"{rng.choice(lx.CODE_OPENERS)} {article} {language} {thing} that {rng.choice(lx.CODE_TASKS)}"
            request += rng.choice((".", "?", "", "!"))
        else:
            request = rng.choice(lx.CODE_TASK_REQUESTS).format(snippet=rng.choice(lx.CODE_SNIPPETS))
        return request, lx.CAPABILITY_REPLY
    if roll < 0.65:
        request = f"{rng.choice(lx.QUESTION_OPENERS)} {rng.choice(lx.TOPICS)}{rng.choice(('.', '?', '', '!'))}"
        return request if rng.random() < 0.8 else request.lower(), lx.CAPABILITY_REPLY
    if roll < 0.85:
        template = rng.choice(lx.MISC_REQUESTS)
        request = template.format(a=rng.randint(2, 99), b=rng.randint(2, 99), topic=rng.choice(lx.TOPICS))
        return request, lx.CAPABILITY_REPLY
    if roll < 0.95:
        return rng.choice(lx.FOREIGN_SENTENCES), lx.CAPABILITY_REPLY
    return _unclear(rng), lx.CAPABILITY_REPLY


def chat_exchange(rng: random.Random, args: ArgumentSource, *, tools_offered: bool,
                  beyond: float = 0.0) -> tuple[str, str]:
    """A (user text, assistant reply) pair of small talk, a simple fact or a polite refusal;
    with ``beyond``, that share are greetings in many phrasings and requests beyond the demo
    (``greeting``, ``out_of_domain``). At 0 the stream is the one stages one and two train
    on, draw for draw (the shipped weights depend on it)."""
    if beyond and rng.random() < beyond:
        if rng.random() < 0.3:
            return greeting(rng), rng.choice(lx.GREETING_REPLIES)
        return out_of_domain(rng)
    roll = rng.random()
    if roll < 0.3:
        phrase = args.phrase()
        return rng.choice(lx.REPEAT_REQUESTS).format(phrase=phrase), phrase
    if roll < 0.6:
        asks, answers = rng.choice(lx.SMALL_TALK)
        return rng.choice(asks), rng.choice(answers)
    if roll < 0.8:
        country, capital = rng.choice(lx.CAPITALS)
        return (rng.choice(lx.CAPITAL_REQUESTS).format(country=country),
                rng.choice(lx.CAPITAL_ANSWERS).format(country=country, capital=capital))
    if roll < 0.9 or tools_offered:
        return rng.choice(lx.HARD_QUESTIONS), rng.choice(lx.HARD_ANSWERS)
    city = args.city()
    return rng.choice(lx.WEATHER_REQUESTS).format(city=city), rng.choice(lx.NO_TOOL_WEATHER_ANSWERS).format(city=city)


def _reasoning(thinking: bool, trained: bool, thought: str) -> str | None:
    if not trained:
        return None
    return thought if thinking else EMPTY_REASONING


def offered_tools(rng: random.Random, needed: list[str]) -> list[dict[str, Any]]:
    """The needed core tools plus a shuffled handful of others, in random order."""
    tools = [CORE_TOOLS[k] for k in needed]
    others = [t for k, t in CORE_TOOLS.items() if k not in needed] + list(DISTRACTOR_TOOLS)
    tools += rng.sample(others, rng.randint(0 if needed else 1, 3))
    rng.shuffle(tools)
    return tools


def system_prompt(rng: random.Random, *, long: bool = False) -> str | None:
    """A short system prompt, none, or (``long``) an agent-style wall of instructions."""
    if long:
        return " ".join(rng.choice(lx.AGENT_SENTENCES) for _ in range(rng.randint(20, 60)))
    return rng.choice(lx.SYSTEM_PROMPTS) if rng.random() < 0.6 else None


def _episode_kinds(rng: random.Random, with_tools: bool) -> list[str]:
    kinds = []
    for _ in range(rng.choice((1, 1, 2, 2, 3))):
        if with_tools and rng.random() < 0.6:
            kinds.append(rng.choices(("weather", "search", "file"), weights=(0.4, 0.3, 0.3))[0])
        else:
            kinds.append("chat")
    return kinds


def _drill(rng: random.Random, args: ArgumentSource, thinking: bool) -> Conversation:
    """Several "repeat after me" exchanges in a row: dense copying practice, no tools."""
    messages: list[dict[str, Any]] = []
    for _ in range(rng.randint(3, 6)):
        phrase = args.phrase()
        messages += [{"role": "user", "content": rng.choice(lx.REPEAT_REQUESTS).format(phrase=phrase)},
                     _assistant(phrase, reasoning="The user wants me to repeat the text." if thinking else EMPTY_REASONING)]
    return Conversation(messages=messages, thinking=thinking, meta={"kinds": ["drill"]})


def make_conversation(
    rng: random.Random, args: ArgumentSource, *, long_prompt: bool = False, drill_fraction: float = 0.15,
    beyond: float = 0.0,
) -> Conversation:
    """One training conversation of one to three episodes (chat exchanges or tool tasks).

    Args:
        rng: Random source; the same state gives the same conversation.
        args: Source of tool arguments.
        long_prompt: Prefix an agent-sized system prompt and offer every tool.
        drill_fraction: Share of conversations that are copying drills (``_drill``).
        beyond: Share of chat exchanges beyond the demo (``chat_exchange``).
    """
    thinking = rng.random() < 0.5
    if not long_prompt and rng.random() < drill_fraction:
        return _drill(rng, args, thinking)
    # Half of the conversations train on every assistant turn; the rest render earlier
    # turns the way clients send history back (no reasoning) and train on the last only.
    train_history = rng.random() < 0.5
    with_tools = long_prompt or rng.random() < 0.7
    kinds = _episode_kinds(rng, with_tools)
    messages: list[dict[str, Any]] = []
    prompt = system_prompt(rng, long=long_prompt)
    if prompt:
        messages.append({"role": "system", "content": prompt})
    for i, kind in enumerate(kinds):
        trained = train_history or i == len(kinds) - 1
        if kind == "chat":
            user, reply = chat_exchange(rng, args, tools_offered=with_tools, beyond=beyond)
            messages += [{"role": "user", "content": user},
                         _assistant(reply, reasoning=_reasoning(thinking, trained, rng.choice(lx.THINK_CHAT)))]
            continue
        task = tool_task(rng, args, kind)
        call = {"name": task["name"], "arguments": task["arguments"]}
        messages += [
            {"role": "user", "content": task["request"]},
            _assistant(reasoning=_reasoning(thinking, trained, task["thought"]), calls=[call]),
            {"role": "tool", "content": task["result"]},
            _assistant(task["answer"], reasoning=_reasoning(thinking, trained, rng.choice(lx.THINK_RESULT))),
        ]
    tools = None
    if with_tools:
        needed = sorted({k for k in kinds if k != "chat"})
        tools = list(CORE_TOOLS.values()) + list(DISTRACTOR_TOOLS) if long_prompt else offered_tools(rng, needed)
        rng.shuffle(tools)
    return Conversation(messages=messages, tools=tools, thinking=thinking, meta={"kinds": kinds})


def conversations(
    seed: int, count: int, *, long_fraction: float = 0.0, drill_fraction: float = 0.15, invented: float = 0.0,
    beyond: float = 0.0, decoys: float = 0.0,
) -> list[Conversation]:
    """``count`` training conversations drawn from a private RNG seeded with ``seed``."""
    rng = random.Random(seed)
    args = ArgumentSource(rng, invented=invented, decoys=decoys)
    return [make_conversation(rng, args, long_prompt=rng.random() < long_fraction, drill_fraction=drill_fraction,
                              beyond=beyond)
            for _ in range(count)]
