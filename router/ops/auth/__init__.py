"""Client keys: who may call which route and model, and how often (the `[[keys]]` tables)."""
