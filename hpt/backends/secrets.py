"""API keys: read from the environment or a .env file, and kept out of everything we write."""

from __future__ import annotations

import os
from pathlib import Path

from dotenv import dotenv_values

_SECRETS: set[str] = set()


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
    for secret in _SECRETS:
        if secret in text:
            text = text.replace(secret, "***")
    return text
