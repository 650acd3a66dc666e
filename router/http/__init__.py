"""HTTP plumbing below the API controllers: route methods, header and body timeouts."""
