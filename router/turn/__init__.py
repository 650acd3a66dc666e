"""The API-neutral path of one turn: chat template, tokens, sampling and limits, text generation, stops, output parsing."""
