"""Test support code: model builders and server processes (no tests here)."""
