"""OpenAI Responses (what Codex speaks): controller, input items, output items, stored conversations."""
