"""Remote upstream models: proxying, health checks and spillover targets (router-side only)."""
