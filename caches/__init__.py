"""Prefix cache (radix tree over token ids), KV quantization policy and disk persistence.

Imported by engine workers only; it takes token ids and opaque cache states (mlx-lm cache
objects), never request objects. ``prefix_cache.PrefixCache`` is the in-memory tier.
"""
