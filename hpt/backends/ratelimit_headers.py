"""How long a server asks us to wait, read from its rate-limit headers.

Covers ``Retry-After`` (seconds or an HTTP date), ``retry-after-ms``, OpenAI's
``x-ratelimit-{remaining,reset}-{requests,tokens}`` (durations such as ``1m30.5s`` or ``20ms``)
and Anthropic's ``anthropic-ratelimit-*-{remaining,reset}`` (RFC 3339 times).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from datetime import datetime
from email.utils import parsedate_to_datetime

# Never sleep longer than this on a server's word; the retry budget bounds the rest.
MAX_HONOURED_WAIT_S = 120.0

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _duration_s(text: str) -> float | None:
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def _until_s(text: str, now: float) -> float | None:
    """Seconds from ``now`` (epoch) until an HTTP date or an RFC 3339 time."""
    when: datetime | None
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
    if when is None or when.tzinfo is None:
        return None
    return when.timestamp() - now


def _get(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        value = headers.get(name.title())
    return value


def wait_from_headers(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The wait the headers ask for, in seconds (capped), or None if they name none."""
    now = time.time() if now is None else now
    waits: list[float] = []
    ms = _get(headers, "retry-after-ms")
    if ms is not None:
        try:
            waits.append(float(ms) / 1000.0)
        except ValueError:
            pass
    retry_after = _get(headers, "retry-after")
    if retry_after is not None:
        seconds = _duration_s(retry_after)
        if seconds is None:
            seconds = _until_s(retry_after, now)
        if seconds is not None:
            waits.append(seconds)
    if not waits:
        # No explicit wait: wait for whichever exhausted limit resets last.
        for kind in ("requests", "tokens", "input-tokens", "output-tokens"):
            remaining = _get(headers, f"x-ratelimit-remaining-{kind}")
            reset = _get(headers, f"x-ratelimit-reset-{kind}")
            if remaining is not None and reset is not None and remaining.strip() == "0":
                seconds = _duration_s(reset)
                if seconds is not None:
                    waits.append(seconds)
            remaining = _get(headers, f"anthropic-ratelimit-{kind}-remaining")
            reset = _get(headers, f"anthropic-ratelimit-{kind}-reset")
            if remaining is not None and reset is not None and remaining.strip() == "0":
                seconds = _until_s(reset, now)
                if seconds is not None:
                    waits.append(seconds)
    if not waits:
        return None
    return min(max(max(waits), 0.0), MAX_HONOURED_WAIT_S)
