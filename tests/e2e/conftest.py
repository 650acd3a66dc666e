"""SDK clients for whichever live ``server`` fixture the test module defines."""

from __future__ import annotations

import anthropic
import openai
import pytest


@pytest.fixture
def oai(server) -> openai.OpenAI:
    return server.openai()


@pytest.fixture
def claude(server) -> anthropic.Anthropic:
    return server.anthropic()
