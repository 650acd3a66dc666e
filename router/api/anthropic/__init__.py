"""Anthropic Messages (what Claude Code speaks): controller, request translation, bodies."""
