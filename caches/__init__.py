"""Prefix cache (radix tree over token ids), KV quantization policy and disk persistence.

Imported by engine workers only; it takes token ids and opaque cache states, never request
objects. The prefix-cache issue fills this package in; nothing here is used yet.
"""
