"""Tool-call parser families, one module per format family (loaded via ``parsers.registry``)."""
