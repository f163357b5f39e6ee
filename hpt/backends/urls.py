"""Endpoint URLs: a route joined onto a base URL's path, its query kept where it belongs.

A proxy or gateway may take its key or version in the query (``/v1?api_key=...``,
``?api-version=...``); appending ``/chat/completions`` to the whole string put the route after
the query, and every call was a 404."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit, urlunsplit


def join_route(base: str, route: str) -> str:
    """``base``'s path with ``route`` appended, and ``base``'s query after it."""
    parts = urlsplit(base)
    path = parts.path.rstrip("/") + "/" + route.lstrip("/")
    return urlunsplit(parts._replace(path=path))


def split_query(base: str) -> tuple[str, dict[str, str]]:
    """``base`` without its query, and the query's parameters (for SDKs that take them
    apart, as ``default_query``)."""
    parts = urlsplit(base)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit(parts._replace(query="")), query
