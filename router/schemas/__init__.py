"""HTTP bodies: lenient inbound Structs (unknown fields ignored) and exact outbound Structs."""
