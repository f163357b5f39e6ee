"""API keys: read from the environment or a .env file, and kept out of everything we write.

A URL may carry credentials too: a user and password (``http://user:pw@host/v1``) or a key in
its query (``?api_key=sk-...``). ``redact_url`` gives the URL without them, the form that is
shown and saved; ``remember_url_credentials`` registers them so that ``redact`` takes them
out of any text (an error a library raised, a traceback)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, unquote_plus

from dotenv import dotenv_values

_SECRETS: set[str] = set()
HIDDEN = "***"
# Query parameters whose value is a credential: api_key, key, access_token, X-Amz-Signature,
# client_secret, password, sig, auth, ...
_SECRET_PARAM = re.compile(r"key|token|secret|passw|pwd|sig|auth|credential|session", re.I)
# A URL's parts, by RFC 3986's own expression (appendix B): it splits any string, so a
# malformed URL still has its credentials found.
_URL_PARTS = re.compile(
    r"(?P<scheme>[^:/?#]+:)?(?://(?P<netloc>[^/?#]*))?(?P<path>[^?#]*)"
    r"(?:\?(?P<query>[^#]*))?(?:#(?P<fragment>.*))?",
    re.DOTALL,
)
# A URL in free text: a scheme, "://", then anything up to white space or a quote.
_URL_IN_TEXT = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")


def load_dotenv_file(path: Path | None = None) -> None:
    """Fill unset environment variables from ``.env`` (the working folder's by default)."""
    path = path or Path.cwd() / ".env"
    if not path.is_file():
        return
    for name, value in dotenv_values(path).items():
        if value is not None and name not in os.environ:
            os.environ[name] = value


def secret_from_env(name: str) -> str | None:
    value = os.environ.get(name) or None
    if value:
        remember_secret(value)
    return value


def remember_secret(value: str) -> None:
    if len(value) >= 6:  # shorter strings would redact ordinary words
        _SECRETS.add(value)


def redact(text: str) -> str:
    """``text`` without the secrets met so far, nor any credentials in a URL."""
    for secret in _SECRETS:
        if secret in text:
            text = text.replace(secret, HIDDEN)
    return redact_urls(text)


def _credentials(url: str) -> tuple[list[str], str]:
    """The credentials in ``url`` and the URL with each replaced by ``***``. The user of a
    user:password pair stays (a name); a user alone is taken for a token and hidden."""
    parts = _URL_PARTS.fullmatch(url)
    assert parts is not None  # every string matches
    found: list[str] = []
    netloc = parts["netloc"] or ""
    userinfo, at, host = netloc.rpartition("@")
    if at:
        user, colon, password = userinfo.partition(":")
        if colon and password:
            found.append(unquote(password))
            netloc = f"{user}:{HIDDEN}@{host}"
        elif user:
            found.append(unquote(user))
            netloc = f"{HIDDEN}{colon}@{host}"
    pieces = []
    for piece in parts["query"].split("&") if parts["query"] else []:
        name, _, value = piece.partition("=")
        if value and _SECRET_PARAM.search(unquote_plus(name)):
            found.append(unquote_plus(value))
            piece = f"{name}={HIDDEN}"
        pieces.append(piece)
    if not found:
        return [], url
    query = "?" + "&".join(pieces) if parts["query"] is not None else ""
    fragment = "#" + parts["fragment"] if parts["fragment"] is not None else ""
    scheme = parts["scheme"] or ""
    start = scheme + "//" if parts["netloc"] is not None else scheme
    return found, f"{start}{netloc}{parts['path']}{query}{fragment}"


def redact_url(url: str) -> str:
    """``url`` with its credentials shown as ``***``: the password of ``user:password@``
    (or a user given alone, a token), and the value of every query parameter named like a
    key, token, secret, password or signature. A URL without them is returned unchanged."""
    return _credentials(url)[1]


def remember_url_credentials(url: str) -> None:
    """Register the credentials ``url`` holds, so ``redact`` takes them out of any text."""
    for value in _credentials(url)[0]:
        remember_secret(value)


def redact_urls(text: str) -> str:
    """``text`` with every URL in it redacted (``redact_url``)."""
    return _URL_IN_TEXT.sub(_redact_match, text)


def _redact_match(match: re.Match[str]) -> str:
    """A URL found in text, redacted; punctuation closing the sentence around it stays."""
    found = match.group(0)
    url = found.rstrip(".,;:!?)]}")
    return redact_url(url) + found[len(url) :]


def without_credentials(data: Any) -> Any:
    """JSON-like ``data`` with every URL in its strings redacted, at any depth."""
    if isinstance(data, str):
        return redact_urls(data)
    if isinstance(data, list):
        return [without_credentials(v) for v in data]
    if isinstance(data, dict):
        return {k: without_credentials(v) for k, v in data.items()}
    return data


def urls_with_credentials(data: Any) -> list[str]:
    """The URLs in JSON-like ``data`` that carry credentials (redacted, as they would be
    saved): the endpoints a resume must be given again."""
    if isinstance(data, str):
        return [redact_url(m.group(0)) for m in _URL_IN_TEXT.finditer(data)
                if _credentials(m.group(0))[0]]  # fmt: skip
    if isinstance(data, list | tuple):
        return [u for v in data for u in urls_with_credentials(v)]
    if isinstance(data, dict):
        return [u for v in data.values() for u in urls_with_credentials(v)]
    return []


def hidden_credentials(data: Any) -> list[str]:
    """The URLs in JSON-like ``data`` whose credentials were redacted (read back from a
    saved file): they cannot be called until the credentials are given again."""
    if isinstance(data, str):
        return [m.group(0) for m in _URL_IN_TEXT.finditer(data)
                if HIDDEN in _credentials(m.group(0))[0]]  # fmt: skip
    if isinstance(data, list | tuple):
        return [u for v in data for u in hidden_credentials(v)]
    if isinstance(data, dict):
        return [u for v in data.values() for u in hidden_credentials(v)]
    return []
