"""A local server speaking the OpenAI chat-completions protocol, for tests and benchmarks.

It validates requests the way the real API does (auth header, JSON body, field types and
ranges, unknown fields rejected), answers with schema-shaped bodies and OpenAI-style error
objects, and can inject faults. What it answers is decided by a ``responder`` callable.

Reasoning, as the real services speak it (opt-in: a responder that returns a ``Reply``):
the thinking comes back in vLLM's ``reasoning`` field, llama.cpp's ``reasoning_content`` or
inline ``<think>`` tags (``reasoning_format``), counted in
``usage.completion_tokens_details.reasoning_tokens``, and the reply is cut at the token limit
(thinking first, since it counts toward it) with finish_reason "length". With
``openai_rules``, model ids of ``OPENAI_MODELS`` are answered as api.openai.com answers them:
a reasoning model's thinking is counted but never returned, and what it refuses (temperature,
top_p, logprobs, max_tokens, an effort it does not take) gets OpenAI's own 400 body.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

from tests.servers import faults as fault_kinds


@dataclass(frozen=True)
class Reply:
    """A reasoning model's reply: its thinking apart from its answer."""

    text: str
    reasoning: str | None = None


Responder = Callable[[dict[str, Any]], "str | Reply"]
ReasoningFormat = Literal["reasoning", "reasoning_content", "inline"]

OPENAI_FIELDS = {
    "model", "messages", "temperature", "top_p", "max_tokens", "max_completion_tokens", "n",
    "stop", "seed", "logprobs", "top_logprobs", "stream", "presence_penalty",
    "frequency_penalty", "user", "response_format", "reasoning_effort",
}  # fmt: skip
# Accepted by vLLM, llama.cpp and most compatible servers (not by api.openai.com);
# repeat_penalty is llama.cpp's name, thinking_token_budget vLLM's.
OPEN_SERVER_FIELDS = {
    "repetition_penalty", "repeat_penalty", "chat_template_kwargs", "thinking_token_budget",
}  # fmt: skip
KNOWN_FIELDS = OPENAI_FIELDS | OPEN_SERVER_FIELDS
# The SDK's ReasoningEffort (openai/types/shared/reasoning_effort.py).
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


@dataclass(frozen=True)
class OpenAIModel:
    """How api.openai.com treats a model: the effort values of each (as hpt's sources
    list them, hpt.backends.openai_reasoning), and what its reasoning models refuse."""

    efforts: tuple[str, ...] = ()  # the reasoning_effort values it takes; () refuses the field
    default_effort: str | None = None  # None: not a reasoning model
    sampling_at_none: bool = False  # takes temperature, top_p, logprobs at effort "none"


_LOW_HIGH = ("low", "medium", "high")
OPENAI_MODELS = {
    "gpt-4o": OpenAIModel(),
    "gpt-4.1": OpenAIModel(),
    "gpt-5-chat-latest": OpenAIModel(),
    "o3-mini": OpenAIModel(_LOW_HIGH, "medium"),
    "o1-mini": OpenAIModel((), "medium"),
    "gpt-5": OpenAIModel(("minimal", *_LOW_HIGH), "medium"),
    "gpt-5-pro": OpenAIModel(("high",), "high"),
    "gpt-5.1": OpenAIModel(("none", *_LOW_HIGH), "none", sampling_at_none=True),
    "gpt-5.1-chat-latest": OpenAIModel(("medium",), "medium"),
    "gpt-5.6-sol": OpenAIModel(("none", *_LOW_HIGH, "xhigh", "max"), "medium", True),
    "gpt-6-astra": OpenAIModel((*_LOW_HIGH, "xhigh", "max"), "medium"),
    # A model newer than hpt's table.
    "gpt-7": OpenAIModel(("none", *_LOW_HIGH, "xhigh", "max"), "medium", True),
}


def _error(
    status: int, message: str, kind: str, param: str | None = None, code: str | None = None
) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return web.json_response(body, status=status)


def _unsupported_parameter(name: str, extra: str = "") -> web.Response:
    return _error(400, f"Unsupported parameter: '{name}' is not supported with this model.{extra}",
                  "invalid_request_error", name, "unsupported_parameter")  # fmt: skip


def openai_refusal(body: dict[str, Any], model: OpenAIModel) -> web.Response | None:
    """api.openai.com's 400 for what ``model`` does not take in ``body``, if anything (the
    texts reported from the API: https://github.com/gabrii/Cursor-Azure-GPT-5/issues/33
    (temperature), https://github.com/openai/openai-agents-python/issues/2089 (an effort),
    https://wiki.engram.work/05-knowledge-base/gpt-5.1-chat-api-parameters-fix.html
    (max_tokens), https://github.com/BoundaryML/baml/pull/2708 (an unsupported parameter))."""
    effort = body.get("reasoning_effort")
    if model.default_effort is None:
        return _unsupported_parameter("reasoning_effort") if effort is not None else None
    if effort is not None and effort not in model.efforts:
        if not model.efforts:
            return _unsupported_parameter("reasoning_effort")
        values = [f"'{e}'" for e in model.efforts]
        listed = values[0] if len(values) == 1 else f"{', '.join(values[:-1])}, and {values[-1]}"
        return _error(400, f"Unsupported value: '{effort}' is not supported with the "
                      f"'{body['model']}' model. Supported values are: {listed}.",
                      "invalid_request_error", "reasoning_effort", "unsupported_value")  # fmt: skip
    if "max_tokens" in body:
        return _unsupported_parameter("max_tokens", " Use 'max_completion_tokens' instead.")
    at_none = model.sampling_at_none and (effort or model.default_effort) == "none"
    if at_none:
        return None
    for name in ("temperature", "top_p"):
        if name in body and body[name] != 1:
            return _error(400, f"Unsupported value: '{name}' does not support {body[name]} with "
                          "this model. Only the default (1) value is supported.",
                          "invalid_request_error", name, "unsupported_value")  # fmt: skip
    if body.get("logprobs"):
        return _unsupported_parameter("logprobs")
    return None


def validate(body: Any, known: set[str] = KNOWN_FIELDS) -> str | None:
    """None if ``body`` is a valid chat-completions request, else what is wrong."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    unknown = sorted(set(body) - known)
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
    for key in ("max_tokens", "max_completion_tokens"):
        if key in body and not (isinstance(body[key], int) and body[key] >= 1):
            return f"{key} must be a positive integer"
    if "reasoning_effort" in body and body["reasoning_effort"] not in EFFORTS:
        return f"Invalid value: {body['reasoning_effort']!r}. Supported values are: " + ", ".join(
            f"'{e}'" for e in EFFORTS
        )
    kwargs = body.get("chat_template_kwargs")
    if kwargs is not None and not isinstance(kwargs, dict):
        return "chat_template_kwargs must be an object"
    budget = body.get("thinking_token_budget")
    if budget is not None and not (isinstance(budget, int) and budget >= 0):
        return "thinking_token_budget must be a non-negative integer"
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
    # How a Reply's thinking comes back: vLLM's ``reasoning`` field, ``reasoning_content``
    # (llama.cpp's server with --reasoning-format deepseek, vLLM before 0.16), or inline tags
    # in the content (a server without a reasoning parser).
    reasoning_format: ReasoningFormat = "reasoning"
    # Report usage.completion_tokens_details.reasoning_tokens (vLLM does with a reasoning
    # parser; llama.cpp's server does not).
    counts_reasoning: bool = True
    # Answer OPENAI_MODELS' ids as api.openai.com does; refuse open servers' own fields.
    openai_rules: bool = False

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
        problem = validate(body, OPENAI_FIELDS if self.openai_rules else KNOWN_FIELDS)
        if problem:
            return _error(400, problem, "invalid_request_error")
        if body["model"] not in self.model_ids:
            return _error(
                404, f"The model `{body['model']}` does not exist", "invalid_request_error", "model"
            )
        openai_model = OPENAI_MODELS.get(body["model"]) if self.openai_rules else None
        if openai_model is not None:
            refused = openai_refusal(body, openai_model)
            if refused is not None:
                return refused
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
        reply = self.responder(body)
        if isinstance(reply, Reply):
            if openai_model is not None and openai_model.default_effort is None:
                reply = Reply(reply.text)  # a model that does not reason
            text, message, finish, usage = self._reasoned(body, reply, openai_model is not None)
        else:
            text, finish = reply, "stop"
            message = {"role": "assistant", "content": text}
            usage = {"completion_tokens": len(text.split())}
        prompt_words = sum(len(m["content"].split()) for m in body["messages"])
        choice: dict[str, Any] = {
            "index": 0,
            "message": message,
            "finish_reason": finish,
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
                    **usage,
                    "total_tokens": prompt_words + usage["completion_tokens"],
                },
            }
        )

    def _reasoned(
        self, body: dict[str, Any], reply: Reply, hidden: bool
    ) -> tuple[str, dict[str, Any], str, dict[str, Any]]:
        """A reasoning reply as sent: (answer, message, finish_reason, usage). One word is
        one token; thinking comes first and counts toward the limit (max_completion_tokens bounds both), so a reply
        cut inside it has no answer and no closing tag. ``hidden``: OpenAI's models return
        only the thinking's token count (their chat message has no reasoning field), 0 for
        those that do not reason."""
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        thought, answer = (reply.reasoning or "").split(), reply.text.split()
        text, reasoning, finish = reply.text, reply.reasoning, "stop"
        closed = True
        if limit is not None and len(thought) + len(answer) > limit:
            finish, closed = "length", limit > len(thought)
            thought, answer = thought[:limit], answer[: max(0, limit - len(thought))]
            text = " ".join(answer)
            reasoning = " ".join(thought) if reply.reasoning is not None else None
        usage: dict[str, Any] = {"completion_tokens": len(thought) + len(answer)}
        counted = hidden or (self.counts_reasoning and self.reasoning_format != "inline")
        if counted:
            usage["completion_tokens_details"] = {
                "accepted_prediction_tokens": 0, "audio_tokens": 0,
                "reasoning_tokens": len(thought), "rejected_prediction_tokens": 0,
            }  # fmt: skip
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if hidden or reasoning is None:
            return text, message, finish, usage
        if self.reasoning_format == "inline":
            message["content"] = (
                f"<think>\n{reasoning}\n</think>\n\n{text}" if closed else f"<think>\n{reasoning}"
            )
        elif self.reasoning_format == "reasoning":
            message.update(content=text or None, reasoning=reasoning)  # vLLM: null content
        else:
            message["reasoning_content"] = reasoning
        return text, message, finish, usage


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
