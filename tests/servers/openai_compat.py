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
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

from tests.servers import faults as fault_kinds
from tests.servers.batches import BatchFaults, BatchLedger, BatchRecord, BatchTiming, Work


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


# The Batch API's limits (the batch guide) and the models whose batched requests get no
# prompt-cache hits ("pre-GPT-5 models are not supported", cookbook Prompt Caching 201).
MAX_FILE_BYTES = 200 * 2**20
MAX_BATCH_REQUESTS = 50_000
NO_BATCH_CACHE = frozenset({"gpt-4o", "gpt-4.1", "o3-mini", "o1-mini"})
FILE_PURPOSES = {"assistants", "batch", "fine-tune", "vision", "user_data", "evals"}
BATCH_ENDPOINTS = {
    "/v1/responses", "/v1/chat/completions", "/v1/embeddings", "/v1/completions",
    "/v1/moderations", "/v1/images/generations", "/v1/images/edits", "/v1/videos",
}  # fmt: skip
# What a request not run gets in the error file (batch_expired: the batch guide's text).
NOT_RUN = {
    "expired": ("batch_expired",
                "This request could not be executed before the completion window expired."),
    "cancelled": ("batch_cancelled",
                  "This request was not executed because the batch was cancelled."),  # assumed
}  # fmt: skip


def _id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


@dataclass
class StoredFile:
    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int = field(default_factory=lambda: int(time.time()))

    def json(self) -> dict[str, Any]:
        return {"id": self.id, "object": "file", "bytes": len(self.data),
                "created_at": self.created_at, "filename": self.filename,
                "purpose": self.purpose, "status": "processed", "status_details": None,
                "expires_at": self.created_at + 30 * 86400}  # fmt: skip


@dataclass
class OpenAIBatch:
    id: str
    request: dict[str, Any]  # the create body
    model: str | None
    work: Work[dict[str, Any]]  # answers: output/error file lines
    errors: list[dict[str, Any]]  # why it fails validation
    record: BatchRecord
    output_file_id: str | None = None
    error_file_id: str | None = None
    files_made: bool = False


def _batch_error(code: str, message: str, line: int | None = None,
                 param: str | None = None) -> dict[str, Any]:  # fmt: skip
    return {"code": code, "line": line, "message": message, "param": param}


def parse_batch_file(
    data: bytes, endpoint: str, model_ids: tuple[str, ...]
) -> tuple[list[tuple[str, dict[str, Any]]], str | None, list[dict[str, Any]]]:
    """A batch input file's requests (custom_id, body), its one model, and why it fails
    validation (errors.data[]; empty if it passes). Bodies are checked when run, as direct
    requests are: a bad one fails alone (error codes other than empty_file and the
    documented batch_expired follow a third-party list, stdapi-ai/stdapi.ai#240)."""
    items: list[tuple[str, dict[str, Any]]] = []
    errors: list[dict[str, Any]] = []
    model: str | None = None
    lines = [line for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    if not lines:
        return [], None, [_batch_error("empty_file", "The batch input file is empty.")]
    if len(lines) > MAX_BATCH_REQUESTS:
        return [], None, [_batch_error("too_many_tasks", f"The batch input file has "
                                       f"{len(lines)} requests; at most {MAX_BATCH_REQUESTS}.")]  # fmt: skip
    seen: set[str] = set()
    for n, text in enumerate(lines, 1):
        try:
            line = json.loads(text)
        except json.JSONDecodeError:
            errors.append(_batch_error("invalid_json_line", "This line is not parseable as "
                                       "valid JSON.", n))  # fmt: skip
            continue
        if not isinstance(line, dict):
            errors.append(_batch_error("invalid_json_line", "Each line must be a JSON object.", n))
            continue
        custom_id, body = line.get("custom_id"), line.get("body")
        for name, ok in (("custom_id", isinstance(custom_id, str) and custom_id),
                         ("method", "method" in line), ("url", "url" in line),
                         ("body", isinstance(body, dict))):  # fmt: skip
            if not ok:
                errors.append(_batch_error("missing_required_parameter",
                                           f"Missing required parameter: '{name}'.", n, name))  # fmt: skip
                break
        else:
            assert isinstance(custom_id, str) and isinstance(body, dict)
            if custom_id in seen:
                errors.append(_batch_error("duplicate_custom_id", "The custom_id for this "
                                           "request is a duplicate of another request.", n,
                                           "custom_id"))  # fmt: skip
            elif line["method"] != "POST":
                errors.append(_batch_error("invalid_method", "The method must be 'POST'.", n,
                                           "method"))  # fmt: skip
            elif line["url"] != endpoint:
                errors.append(_batch_error("url_mismatch", f"The url provided for this request "
                                           f"does not match the batch endpoint {endpoint}.", n,
                                           "url"))  # fmt: skip
            elif not isinstance(body.get("model"), str):
                errors.append(_batch_error("missing_required_parameter",
                                           "Missing required parameter: 'body.model'.", n,
                                           "body.model"))  # fmt: skip
            elif model is not None and body["model"] != model:
                errors.append(_batch_error("model_mismatch", "The model for this request "
                                           f"({body['model']}) does not match the model of "
                                           f"earlier requests ({model}); a batch file may use "
                                           "only one model.", n, "body.model"))  # fmt: skip
            elif body["model"] not in model_ids:
                errors.append(_batch_error("model_not_found", f"The model `{body['model']}` "
                                           "does not exist or you do not have access to it.", n,
                                           "body.model"))  # fmt: skip
            model = model or body.get("model")
            seen.add(custom_id)
            items.append((custom_id, body))
    return items, model, errors


def openai_timeline(work: Work[Any]) -> list[tuple[str, float]]:
    """A batch's statuses and when it reaches each, as far as known."""
    steps = [("validating", work.created)]
    cancel = work.cancel_at
    if cancel is not None and cancel < work.start:
        return [*steps, ("cancelling", cancel), ("cancelled", work.ended_at)]
    if work.failed:
        return [*steps, ("failed", work.start)]
    steps.append(("in_progress", work.start))
    if cancel is not None:
        return [*steps, ("cancelling", cancel), ("cancelled", work.ended_at)]
    if work.expires:
        return [*steps, ("expired", work.deadline)]
    return [*steps, ("finalizing", work.processed_by), ("completed", work.ended_at)]


def batch_request_error(status: int) -> dict[str, Any]:
    """The body of a request failing inside a batch with ``status`` (a fault)."""
    if status == 429:
        return {"error": {"message": "Rate limit reached for requests", "type": "requests",
                          "param": None, "code": "rate_limit_exceeded"}}  # fmt: skip
    kind = "invalid_request_error" if status < 500 else "server_error"
    message = ("The server had an error while processing your request." if status >= 500
               else "The request was refused (a fault the test server injects).")  # fmt: skip
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def batch_usage(bodies: list[dict[str, Any]]) -> dict[str, Any]:
    """A batch's ``usage``: its answered requests' usage summed."""

    def total(key: str, detail: str | None = None) -> int:
        if detail is None:
            return sum(b["usage"][key] for b in bodies)
        return sum((b["usage"].get(key) or {}).get(detail, 0) for b in bodies)

    return {
        "input_tokens": total("prompt_tokens"),
        "input_tokens_details": {"cached_tokens": total("prompt_tokens_details", "cached_tokens")},
        "output_tokens": total("completion_tokens"),
        "output_tokens_details": {
            "reasoning_tokens": total("completion_tokens_details", "reasoning_tokens")
        },
        "total_tokens": total("total_tokens"),
    }


Token = tuple[int, str, str]  # (message index, role, word): one word is one token


def prompt_tokens(messages: list[dict[str, Any]]) -> list[Token]:
    """A prompt's tokens, a sequence so that prompts sharing a prefix share its tokens."""
    return [(i, m["role"], w) for i, m in enumerate(messages) for w in m["content"].split()]


@dataclass
class Prefixes:
    """The prompt prefixes a server has seen, per model, every ``step`` tokens."""

    _seen: set[tuple[str, int]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def seen(self, model: str, tokens: list[Token], step: int) -> int:
        """The longest prefix of ``tokens`` (a multiple of ``step``) seen before; then
        remembers this prompt's."""
        marks, chained = [], 0
        for n, token in enumerate(tokens, 1):
            chained = hash((chained, token))  # a prefix's hash: equal prefixes, equal chains
            if n % step == 0:
                marks.append((model, chained))
        with self._lock:
            hit = 0
            for k, mark in enumerate(marks, 1):
                if mark not in self._seen:
                    break
                hit = k * step
            self._seen.update(marks)
        return hit


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
    # Valid POSTs to /v1/chat/completions (faulted ones too; batched requests are not).
    direct_calls: int = 0
    # Automatic prompt caching, as api.openai.com reports it: a prompt of at least
    # ``cache_min_tokens`` tokens has ``usage.prompt_tokens_details.cached_tokens``, the
    # longest prefix of it this server has seen for the model (direct or batched), in
    # ``cache_step`` increments and 0 under the minimum. A shorter prompt's usage has no
    # details at all (as before caching; vLLM also omits them).
    prompt_cache: bool = True
    cache_min_tokens: int = 1024
    cache_step: int = 128
    # Models whose batched requests get no cache hits (OpenAI: models before GPT-5).
    no_batch_cache: frozenset[str] = NO_BATCH_CACHE
    # The Files and Batches APIs (POST /v1/batches takes endpoint /v1/chat/completions).
    batch_timing: BatchTiming = field(default_factory=BatchTiming)
    batch_faults: BatchFaults = field(default_factory=BatchFaults)
    ledger: BatchLedger = field(default_factory=BatchLedger)
    _prefixes: Prefixes = field(default_factory=lambda: Prefixes())
    _files: dict[str, StoredFile] = field(default_factory=dict)
    _batches: dict[str, OpenAIBatch] = field(default_factory=dict)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_FILE_BYTES + 2**20)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_post("/v1/files", self._file_create)
        app.router.add_get("/v1/files/{file_id}", self._file_get)
        app.router.add_delete("/v1/files/{file_id}", self._file_delete)
        app.router.add_get("/v1/files/{file_id}/content", self._file_content)
        app.router.add_post("/v1/batches", self._batch_create)
        app.router.add_get("/v1/batches", self._batch_list)
        app.router.add_get("/v1/batches/{batch_id}", self._batch_get)
        app.router.add_post("/v1/batches/{batch_id}/cancel", self._batch_cancel)
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

    def _refusal(self, body: Any) -> web.Response | None:
        """The error the chat-completions route answers ``body`` with, if any (a batched
        request fails with the same status and body)."""
        problem = validate(body, OPENAI_FIELDS if self.openai_rules else KNOWN_FIELDS)
        if problem:
            return _error(400, problem, "invalid_request_error")
        if body["model"] not in self.model_ids:
            return _error(
                404, f"The model `{body['model']}` does not exist", "invalid_request_error", "model"
            )
        openai_model = OPENAI_MODELS.get(body["model"]) if self.openai_rules else None
        return openai_refusal(body, openai_model) if openai_model is not None else None

    async def _chat(self, request: web.Request) -> web.Response:
        body = await self._json_body(request)
        if isinstance(body, web.Response):
            return body
        refused = self._refusal(body)
        if refused is not None:
            return refused
        with self._lock:
            fault = self.faults.pop(0) if self.faults else None
            self.direct_calls += 1
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
        return web.json_response(self.completion(body))

    def completion(self, body: dict[str, Any], batched: bool = False) -> dict[str, Any]:
        """The chat.completion object answering a valid ``body`` (directly or in a batch)."""
        openai_model = OPENAI_MODELS.get(body["model"]) if self.openai_rules else None
        reply = self.responder(body)
        if isinstance(reply, Reply):
            if openai_model is not None and openai_model.default_effort is None:
                reply = Reply(reply.text)  # a model that does not reason
            text, message, finish, usage = self._reasoned(body, reply, openai_model is not None)
        else:
            text, finish = reply, "stop"
            message = {"role": "assistant", "content": text}
            usage = {"completion_tokens": len(text.split())}
        tokens = prompt_tokens(body["messages"])
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
        prompt: dict[str, Any] = {"prompt_tokens": len(tokens)}
        cached = self._cached_tokens(body["model"], tokens, batched)
        if cached is not None:
            prompt["prompt_tokens_details"] = {"cached_tokens": cached, "audio_tokens": 0}
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [choice],
            "usage": {
                **prompt,
                **usage,
                "total_tokens": len(tokens) + usage["completion_tokens"],
            },
        }

    def _cached_tokens(self, model: str, tokens: list[Token], batched: bool) -> int | None:
        """``usage.prompt_tokens_details.cached_tokens`` of a prompt; None: not reported
        (caching off, or a prompt under the minimum, which no provider can cache)."""
        if not self.prompt_cache or len(tokens) < self.cache_min_tokens:
            return None
        if batched and model in self.no_batch_cache:
            return 0
        seen = self._prefixes.seen(model, tokens, self.cache_step)
        return seen if seen >= self.cache_min_tokens else 0

    # The Files API: batch input files in, output and error files out.

    async def _file_create(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized(request)
        if not request.content_type.startswith("multipart/"):
            return _error(400, "Invalid Content-Type header (expected multipart/form-data).",
                          "invalid_request_error")  # fmt: skip
        form = await request.post()
        purpose, upload = form.get("purpose"), form.get("file")
        if purpose not in FILE_PURPOSES:
            return _error(400, f"Invalid value for 'purpose': {purpose!r}.",
                          "invalid_request_error", "purpose")  # fmt: skip
        if not isinstance(upload, web.FileField):
            return _error(400, "Missing required parameter: 'file'.", "invalid_request_error",
                          "file")  # fmt: skip
        data = upload.file.read()
        if purpose == "batch" and not upload.filename.endswith(".jsonl"):
            return _error(400, "Invalid file format for Batch API. Must be .jsonl",
                          "invalid_request_error", "file")  # fmt: skip
        if len(data) > MAX_FILE_BYTES:
            return _error(400, f"The file is {len(data)} bytes; the Batch API takes files up "
                          f"to {MAX_FILE_BYTES} bytes.", "invalid_request_error", "file")  # fmt: skip
        stored = StoredFile(_id("file-"), upload.filename, str(purpose), data)
        self._files[stored.id] = stored
        return web.json_response(stored.json())

    def _stored(self, request: web.Request) -> StoredFile | web.Response:
        if not self._authorized(request):
            return self._unauthorized(request)
        file_id = request.match_info["file_id"]
        stored = self._files.get(file_id)
        if stored is None:
            return _error(404, f"No such File object: {file_id}", "invalid_request_error", "id")
        return stored

    async def _file_get(self, request: web.Request) -> web.Response:
        stored = self._stored(request)
        return stored if isinstance(stored, web.Response) else web.json_response(stored.json())

    async def _file_content(self, request: web.Request) -> web.Response:
        stored = self._stored(request)
        if isinstance(stored, web.Response):
            return stored
        return web.Response(body=stored.data, content_type="application/octet-stream")

    async def _file_delete(self, request: web.Request) -> web.Response:
        stored = self._stored(request)
        if isinstance(stored, web.Response):
            return stored
        del self._files[stored.id]
        return web.json_response({"id": stored.id, "object": "file", "deleted": True})

    # The Batches API (see tests.servers.batches for the timing and faults).

    def _create_problem(self, body: Any) -> web.Response | None:
        if not isinstance(body, dict):
            return _error(400, "request body must be a JSON object", "invalid_request_error")
        known = {"input_file_id", "endpoint", "completion_window", "metadata",
                 "output_expires_after"}  # fmt: skip
        unknown = sorted(set(body) - known)
        if unknown:
            return _error(400, f"Unrecognized request argument supplied: {unknown[0]}",
                          "invalid_request_error")  # fmt: skip
        stored = self._files.get(body.get("input_file_id"))  # type: ignore[arg-type]
        if stored is None:
            return _error(404, f"No such File object: {body.get('input_file_id')}",
                          "invalid_request_error", "input_file_id")  # fmt: skip
        if stored.purpose != "batch":
            return _error(400, f"The input file {stored.id} must be uploaded with purpose "
                          "'batch'.", "invalid_request_error", "input_file_id")  # fmt: skip
        endpoint = body.get("endpoint")
        if endpoint not in BATCH_ENDPOINTS:
            return _error(400, f"Invalid value for 'endpoint': {endpoint!r}.",
                          "invalid_request_error", "endpoint")  # fmt: skip
        if endpoint != "/v1/chat/completions":
            return _error(400, "this test server batches /v1/chat/completions only",
                          "invalid_request_error", "endpoint")  # fmt: skip
        if body.get("completion_window") != "24h":
            return _error(400, "Invalid value for 'completion_window': only '24h' is "
                          "supported.", "invalid_request_error", "completion_window")  # fmt: skip
        metadata = body.get("metadata")
        if metadata is not None and not (
            isinstance(metadata, dict)
            and len(metadata) <= 16
            and all(isinstance(k, str) and len(k) <= 64 for k in metadata)
            and all(isinstance(v, str) and len(v) <= 512 for v in metadata.values())
        ):
            return _error(400, "metadata: at most 16 string pairs, keys up to 64 characters "
                          "and values up to 512.", "invalid_request_error", "metadata")  # fmt: skip
        return None

    async def _batch_create(self, request: web.Request) -> web.Response:
        body = await self._json_body(request)
        if isinstance(body, web.Response):
            return body
        with self._lock:
            self.ledger.create_calls += 1
        fault = self.batch_faults.next_create()
        failed = await fault_kinds.apply("429:0" if fault == 429 else fault, request,
                                         self._fault_body)  # fmt: skip
        if failed is not None:
            return failed
        problem = self._create_problem(body)
        if problem is not None:
            return problem
        data = self._files[body["input_file_id"]].data
        items, model, errors = parse_batch_file(data, body["endpoint"], self.model_ids)
        batch_fault = self.batch_faults.next_batch()
        if batch_fault == "fail" and not errors:
            # The failure users meet most: too many tokens queued for the model.
            errors = [_batch_error("token_limit_exceeded", f"Enqueued token limit reached for "
                                   f"{model} in organization org-test. Limit: 90,000 enqueued "
                                   "tokens. Please try submitting your batch again after some "
                                   "in_progress batches have completed.")]  # fmt: skip
        batch_id = _id("batch_")
        record = BatchRecord(batch_id, [cid for cid, _ in items], batch_fault)
        work = Work(items, self.batch_timing, "fail" if errors else batch_fault, time.time(),
                    self._batched)  # fmt: skip
        batch = OpenAIBatch(batch_id, body, model, work, errors, record)
        self.ledger.add(record)
        self._batches[batch_id] = batch
        return web.json_response(self._batch_json(batch))

    def _batched(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """One request of a batch, answered: its output (or error) file line."""
        refused = self._refusal(body)
        status = None
        if refused is None and self.batch_faults.request_error is not None:
            status = self.batch_faults.request_error(custom_id, body)
        if refused is not None:
            status, payload = refused.status, json.loads(refused.text or "{}")
        elif status is not None:
            payload = batch_request_error(status)
        else:
            status, payload = 200, self.completion(body, batched=True)
        response = {"status_code": status, "request_id": _id("req_"), "body": payload}
        return {"id": _id("batch_req_"), "custom_id": custom_id, "response": response,
                "error": None}  # fmt: skip

    def _batch_json(self, batch: OpenAIBatch) -> dict[str, Any]:
        """The Batch object as of now (answering what is due first)."""
        now = time.time()
        work = batch.work
        work.advance(now)
        steps = [(s, t) for s, t in openai_timeline(work) if t <= now]
        batch.record.transitions = steps
        status = steps[-1][0]
        if status in NOT_RUN or status == "completed":
            self._make_files(batch, status)
        at = {s: int(t) for s, t in steps}
        done = list(work.results.values())
        ok = [line["response"]["body"] for line in done if line["response"]["status_code"] == 200]
        counted = status not in ("validating", "failed") and "in_progress" in at
        return {
            "id": batch.id, "object": "batch", "endpoint": batch.request["endpoint"],
            "errors": {"object": "list", "data": batch.errors} if status == "failed" else None,
            "input_file_id": batch.request["input_file_id"], "completion_window": "24h",
            "status": status, "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id, "created_at": int(work.created),
            "in_progress_at": at.get("in_progress"), "expires_at": int(work.deadline),
            "finalizing_at": at.get("finalizing"), "completed_at": at.get("completed"),
            "failed_at": at.get("failed"), "expired_at": at.get("expired"),
            "cancelling_at": at.get("cancelling"), "cancelled_at": at.get("cancelled"),
            "request_counts": {"total": len(work.items) if counted else 0,
                               "completed": len(ok), "failed": len(done) - len(ok)},
            "metadata": batch.request.get("metadata"), "model": batch.model,
            "usage": batch_usage(ok),
        }  # fmt: skip

    def _make_files(self, batch: OpenAIBatch, status: str) -> None:
        """The output file (answers with status 200) and the error file (the others, and
        the requests not run), once the batch ends; either is absent when empty."""
        if batch.files_made:
            return
        batch.files_made = True
        lines = list(batch.work.results.values())
        out = [line for line in lines if line["response"]["status_code"] == 200]
        err = [line for line in lines if line["response"]["status_code"] != 200]
        if status in NOT_RUN:
            code, message = NOT_RUN[status]
            err += [{"id": _id("batch_req_"), "custom_id": cid, "response": None,
                     "error": {"code": code, "message": message}}
                    for cid in batch.work.unanswered]  # fmt: skip
        shuffle = random.Random(batch.id).shuffle  # the service's order is not the input's
        for kind, found in (("output", out), ("error", err)):
            if not found:
                continue
            shuffle(found)
            data = "".join(json.dumps(line) + "\n" for line in found).encode()
            stored = StoredFile(_id("file-"), f"{batch.id}_{kind}.jsonl", "batch_output", data)
            self._files[stored.id] = stored
            setattr(batch, f"{kind}_file_id", stored.id)

    def _batch(self, request: web.Request) -> OpenAIBatch | web.Response:
        if not self._authorized(request):
            return self._unauthorized(request)
        batch_id = request.match_info["batch_id"]
        batch = self._batches.get(batch_id)
        if batch is None:
            return _error(404, f"No batch found with id '{batch_id}'.", "invalid_request_error")
        return batch

    async def _batch_get(self, request: web.Request) -> web.Response:
        batch = self._batch(request)
        return (
            batch if isinstance(batch, web.Response) else web.json_response(self._batch_json(batch))
        )

    async def _batch_cancel(self, request: web.Request) -> web.Response:
        batch = self._batch(request)
        if isinstance(batch, web.Response):
            return batch
        status = self._batch_json(batch)["status"]
        if status in ("validating", "in_progress"):
            batch.work.cancel(time.time())
        elif status not in ("cancelling", "cancelled"):
            return _error(409, f"Cannot cancel a batch with status '{status}'.",
                          "invalid_request_error")  # fmt: skip
        return web.json_response(self._batch_json(batch))

    async def _batch_list(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized(request)
        limit = request.query.get("limit", "20")
        if not limit.isdigit() or not 1 <= int(limit) <= 100:
            return _error(400, "Invalid 'limit': must be an integer between 1 and 100.",
                          "invalid_request_error", "limit")  # fmt: skip
        ids = list(reversed(self._batches))  # newest first
        after = request.query.get("after")
        if after is not None:
            if after not in self._batches:
                return _error(400, f"Invalid 'after': no batch {after!r}.",
                              "invalid_request_error", "after")  # fmt: skip
            ids = ids[ids.index(after) + 1 :]
        page = [self._batch_json(self._batches[i]) for i in ids[: int(limit)]]
        return web.json_response({
            "object": "list", "data": page, "has_more": len(ids) > len(page),
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
        })  # fmt: skip

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
