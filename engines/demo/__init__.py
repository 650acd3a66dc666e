"""The bundled demo model: its build scripts and the built artifact (package data)."""
