"""What operators touch: configuration (and, as they land, reload, admin, auth and metrics)."""
