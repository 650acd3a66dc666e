"""Reasoning parser families, configurations of ``parsers.thinking.ReasoningParser``."""
