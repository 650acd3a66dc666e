"""Telling a browser's page load from an API client's request."""

from __future__ import annotations

from litestar.connection import ASGIConnection


def wants_html(connection: ASGIConnection) -> bool:
    """A browser navigating: its Accept header names HTML first (API clients send JSON, or */*)."""
    first = connection.headers.get("accept", "").split(",")[0]
    return first.split(";")[0].strip().lower() == "text/html"
