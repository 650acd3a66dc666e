"""rapid-mlx router: the HTTP process (config, registry, API adapters, auth, metrics, reload, CLI)."""
