"""A local server speaking the OpenAI chat-completions protocol, for tests and benchmarks.

It validates requests the way the real API does (auth header, JSON body, field types and
ranges, unknown fields rejected), answers with schema-shaped bodies and OpenAI-style error
objects, and can inject faults. What it answers is decided by a ``responder`` callable.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.servers import faults as fault_kinds

Responder = Callable[[dict[str, Any]], str]

KNOWN_FIELDS = {
    "model", "messages", "temperature", "top_p", "max_tokens", "max_completion_tokens", "n",
    "stop", "seed", "logprobs", "top_logprobs", "stream", "presence_penalty",
    "frequency_penalty", "user", "response_format",
    # Accepted by vLLM, llama.cpp and most compatible servers (not by api.openai.com).
    "repetition_penalty",
}  # fmt: skip


def _error(status: int, message: str, kind: str, param: str | None = None) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": param, "code": None}}
    return web.json_response(body, status=status)


def validate(body: Any) -> str | None:
    """None if ``body`` is a valid chat-completions request, else what is wrong."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    unknown = sorted(set(body) - KNOWN_FIELDS)
    if unknown:
        return f"Unrecognized request argument supplied: {unknown[0]}"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "you must provide a model parameter"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty array"
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in {
            "system",
            "user",
            "assistant",
            "developer",
        }:
            return f"messages[{i}].role is invalid"
        if not isinstance(m.get("content"), str):
            return f"messages[{i}].content must be a string"
    checks = {"temperature": (0.0, 2.0), "top_p": (0.0, 1.0), "repetition_penalty": (0.0, 10.0)}
    for key, (lo, hi) in checks.items():
        if key in body and not (
            isinstance(body[key], int | float)
            and not isinstance(body[key], bool)
            and lo <= body[key] <= hi
        ):
            return f"{key} must be a number in [{lo}, {hi}]"
    if "max_tokens" in body and not (
        isinstance(body["max_tokens"], int) and body["max_tokens"] >= 1
    ):
        return "max_tokens must be a positive integer"
    if body.get("stream"):
        return "this test server does not stream"
    return None


@dataclass
class FakeOpenAI:
    responder: Responder
    api_key: str = "test-key"
    delay_s: float = 0.0
    # Faults (see faults.py) to inject, one per incoming request, before answering normally.
    faults: list[fault_kinds.Fault] = field(default_factory=list)
    served: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    model_ids: tuple[str, ...] = ("test-model",)
    record_requests: bool = True
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # POST /v1/embeddings: the vector of each input text. None: the route answers 404, as
    # when the server had no such route.
    embedder: Callable[[str], list[float]] | None = None
    embedding_requests: list[dict[str, Any]] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/embeddings", self._embeddings)
        return app

    def _authorized(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == f"Bearer {self.api_key}"

    @staticmethod
    def _unauthorized(request: web.Request) -> web.Response:
        # Like the real API, name the key that was refused (a leak we must not repeat).
        given = request.headers.get("Authorization", "").removeprefix("Bearer ")
        return _error(401, f"Incorrect API key provided: {given}.", "invalid_request_error")

    async def _models(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized(request)
        data = [
            {"id": m, "object": "model", "created": 0, "owned_by": "test"} for m in self.model_ids
        ]
        return web.json_response({"object": "list", "data": data})

    async def _json_body(self, request: web.Request) -> Any:
        """The request's JSON body, or the error response OpenAI gives without a valid key
        or a parsable body."""
        if not self._authorized(request):
            return self._unauthorized(request)
        try:
            return await request.json()
        except json.JSONDecodeError:
            return _error(
                400, "We could not parse the JSON body of your request.", "invalid_request_error"
            )

    async def _embeddings(self, request: web.Request) -> web.Response:
        if self.embedder is None:
            return _error(404, "Not found", "invalid_request_error")
        body = await self._json_body(request)
        if isinstance(body, web.Response):
            return body
        texts = body.get("input") if isinstance(body, dict) else None
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(body.get("model"), str) or not body["model"]:
            return _error(400, "you must provide a model parameter", "invalid_request_error")
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return _error(400, "'input' must be a string or a non-empty array of strings",
                          "invalid_request_error")  # fmt: skip
        with self._lock:
            self.embedding_requests.append(body)
        data = [
            {"object": "embedding", "index": i, "embedding": self.embedder(t)}
            for i, t in enumerate(texts)
        ]
        tokens = sum(len(t.split()) for t in texts)
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    @staticmethod
    def _fault_body(status: int) -> web.Response:
        if status == 429:
            return _error(429, "Rate limit reached for requests", "requests")
        return _error(
            status, "The server had an error while processing your request.", "server_error"
        )

    async def _chat(self, request: web.Request) -> web.Response:
        body = await self._json_body(request)
        if isinstance(body, web.Response):
            return body
        problem = validate(body)
        if problem:
            return _error(400, problem, "invalid_request_error")
        if body["model"] not in self.model_ids:
            return _error(
                404, f"The model `{body['model']}` does not exist", "invalid_request_error", "model"
            )
        with self._lock:
            fault = self.faults.pop(0) if self.faults else None
            if self.record_requests:
                self.requests.append(body)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if isinstance(fault, int) and fault == 429:
            fault = "429:0"
        failed = await fault_kinds.apply(fault, request, self._fault_body)
        if failed is not None:
            return failed
        with self._lock:
            self.served += 1
        text = self.responder(body)
        words = len(text.split())
        prompt_words = sum(len(m["content"].split()) for m in body["messages"])
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop",
            "logprobs": None,
        }
        if body.get("logprobs"):
            choice["logprobs"] = {
                "content": [
                    {"token": w, "logprob": -0.5, "bytes": list(w.encode()), "top_logprobs": []}
                    for w in text.split()
                ],
                "refusal": None,
            }
        return web.json_response(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [choice],
                "usage": {
                    "prompt_tokens": prompt_words,
                    "completion_tokens": words,
                    "total_tokens": prompt_words + words,
                },
            }
        )


class ServerThread:
    """Runs an aiohttp app on 127.0.0.1 in a background thread (own event loop)."""

    def __init__(self, app: web.Application, port: int = 0) -> None:
        self._app = app
        self._want_port = port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ServerThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    async def _start(self) -> None:
        # A short grace period: a stopped test server should die like a crashed replica.
        self._runner = web.AppRunner(self._app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(
            self._runner, "127.0.0.1", self._want_port, backlog=1024, reuse_address=True
        )
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
