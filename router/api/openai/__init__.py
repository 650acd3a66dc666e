"""OpenAI Chat Completions and legacy Completions: controllers, bodies, translation."""
