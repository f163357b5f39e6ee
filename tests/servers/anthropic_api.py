"""A local server speaking Anthropic's Messages API, for contract tests.

It checks what the real API checks: a key (``x-api-key`` or ``Authorization: Bearer``), an
``anthropic-version`` header, the body's fields and types, alternating roles starting with
``user``, and — for version 2026-10-21 — no ``temperature``/``top_p``/``top_k``. Errors use
the API's ``{"type": "error", "error": {...}}`` shape, 429s carry ``retry-after`` and the
``anthropic-ratelimit-*`` headers, and 529 is ``overloaded_error``.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web

from tests.servers import faults as fault_kinds

Responder = Callable[[dict[str, Any]], str]
VERSIONS = {"2023-06-01", "2026-10-21"}
KNOWN = {"model", "max_tokens", "messages", "system", "stop_sequences", "metadata", "stream",
         "temperature", "top_p", "top_k", "thinking", "tools", "tool_choice", "service_tier"}  # fmt: skip
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def _error(status: int, message: str) -> web.Response:
    body = {
        "type": "error",
        "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message},
        "request_id": f"req_{uuid.uuid4().hex[:24]}",
    }
    return web.json_response(body, status=status)


def validate(body: Any, version: str) -> str | None:
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    unknown = sorted(set(body) - KNOWN)
    if unknown:
        return f"{unknown[0]}: Extra inputs are not permitted"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: Field required"
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        return "max_tokens: Field required (a positive integer)"
    if "system" in body and not isinstance(body["system"], str | list):
        return "system: Input should be a valid string"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        if not isinstance(m.get("content"), str | list):
            return f"messages.{i}.content: Input should be a valid string"
        if i and messages[i - 1]["role"] == m["role"]:
            return "messages: roles must alternate between 'user' and 'assistant'"
    if messages[0]["role"] != "user":
        return "messages: first message must use the 'user' role"
    sampling = sorted(k for k in ("temperature", "top_p", "top_k") if k in body)
    if sampling and version != "2023-06-01":
        return f"{sampling[0]}: is deprecated for this API version; remove it"
    t = body.get("temperature")
    if t is not None and not (isinstance(t, int | float) and 0 <= t <= 1):
        return "temperature: Input should be less than or equal to 1"
    stops = body.get("stop_sequences", [])
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        return "stop_sequences: Input should be a list of strings"
    if body.get("stream"):
        return "this test server does not stream"
    return None


@dataclass
class FakeAnthropic:
    responder: Responder = lambda body: "True"
    api_key: str = "test-anthropic-key"
    model_ids: tuple[str, ...] = ("claude-test-1",)
    delay_s: float = 0.0
    faults: list[fault_kinds.Fault] = field(default_factory=list)
    requests: list[tuple[dict[str, str], dict[str, Any]]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_get("/v1/models", self._models)
        return app

    def _auth_problem(self, request: web.Request) -> web.Response | None:
        key = request.headers.get("x-api-key") or request.headers.get(
            "Authorization", ""
        ).removeprefix("Bearer ")
        if key != self.api_key:
            return _error(401, "invalid x-api-key")
        if request.headers.get("anthropic-version") not in VERSIONS:
            return _error(400, "anthropic-version: header is required")
        return None

    async def _models(self, request: web.Request) -> web.Response:
        problem = self._auth_problem(request)
        if problem is not None:
            return problem
        data = [
            {"type": "model", "id": m, "display_name": m, "created_at": "2026-01-01T00:00:00Z"}
            for m in self.model_ids
        ]
        return web.json_response(
            {"data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]}
        )

    @staticmethod
    def _fault_body(status: int) -> web.Response:
        if status == 429:
            resp = _error(429, "Number of request tokens has exceeded your rate limit.")
            reset = datetime.now(UTC) + timedelta(seconds=1)
            resp.headers["anthropic-ratelimit-requests-remaining"] = "0"
            resp.headers["anthropic-ratelimit-requests-reset"] = reset.isoformat()
            return resp
        if status == 529:
            return _error(529, "Overloaded")
        return _error(status, "Internal server error")

    async def _messages(self, request: web.Request) -> web.Response:
        problem = self._auth_problem(request)
        if problem is not None:
            return problem
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return _error(400, "There was an error parsing the body of your request")
        bad = validate(body, request.headers["anthropic-version"])
        if bad:
            return _error(400, bad)
        if body["model"] not in self.model_ids:
            return _error(404, f"model: {body['model']}")
        with self._lock:
            fault = self.faults.pop(0) if self.faults else None
            self.requests.append((dict(request.headers), body))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        failed = await fault_kinds.apply(fault, request, self._fault_body)
        if failed is not None:
            return failed
        messages = list(body["messages"])
        if body.get("system"):
            messages.insert(0, {"role": "system", "content": body["system"]})
        text = self.responder({"messages": messages})
        stop_reason, stop_sequence = "end_turn", None
        for s in body.get("stop_sequences", []):
            if s in text:
                text, stop_reason, stop_sequence = text[: text.index(s)], "stop_sequence", s
                break
        words = sum(len(str(m["content"]).split()) for m in messages)
        return web.json_response(
            {
                "id": f"msg_{uuid.uuid4().hex[:24]}",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [{"type": "text", "text": text}],
                "stop_reason": stop_reason,
                "stop_sequence": stop_sequence,
                "usage": {"input_tokens": words, "output_tokens": len(text.split())},
            }
        )
