"""HTTP controllers, one module per API surface."""
