"""A local Text Generation Inference server for contract tests.

Every request body is checked against ../shared/specs/tgi-openapi.json (with JSON Schema),
plus the router's own validation rules that the schema cannot express (top_p below 1, token
budgets from /info); every body it sends is checked against the spec too, and a mismatch is
recorded in ``violations`` for the test to assert on. Errors use TGI's ``ErrorResponse``
shape: 422 validation, 424 generation, 429 overloaded, 500 incomplete generation.

TGI has no reasoning parser: a reasoning model's thinking is part of the text it returns
(a responder's reply, ``<think>`` tags and all). With ``cuts_at_limit`` the reply is cut at
``max_tokens`` / ``max_new_tokens`` (a word a token) with finish_reason "length", as TGI cuts.
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from aiohttp import web
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tests.servers import faults as fault_kinds

SPEC_PATH = Path(__file__).resolve().parents[3] / "shared" / "specs" / "tgi-openapi.json"
# Gets an OpenAI-shaped body ({"messages": [...]}); /generate's prompt arrives as one message.
Responder = Callable[[dict[str, Any]], str]

ERRORS = {
    422: ("Input validation error", "validation"),
    424: ("Request failed during generation", "generation"),
    429: ("Model is overloaded", "overloaded"),
    500: ("Incomplete generation", "incomplete_generation"),
    503: ("unhealthy", "unhealthy"),
}


def _openapi30_to_jsonschema(node: Any) -> Any:
    """Turn OpenAPI 3.0's ``nullable`` into JSON Schema's null type, recursively."""
    if isinstance(node, list):
        return [_openapi30_to_jsonschema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _openapi30_to_jsonschema(v) for k, v in node.items() if k not in ("example",)}
    if out.pop("nullable", False):
        if "type" in out and isinstance(out["type"], str):
            out["type"] = [out["type"], "null"]
        else:
            return {"anyOf": [out, {"type": "null"}]}
    if out.get("default") == "null":
        out.pop("default")
    return out


@cache
def _spec() -> dict[str, Any]:
    spec: dict[str, Any] = json.loads(SPEC_PATH.read_text(encoding="utf-8"))
    return spec


@cache
def _registry() -> Registry:
    schemas = _openapi30_to_jsonschema(copy.deepcopy(_spec()))
    return Registry().with_resource(
        "tgi", Resource.from_contents(schemas, default_specification=DRAFT202012)
    )


def _rebase(node: Any) -> Any:
    """Point the spec's local ``#/components/...`` references at the registered document."""
    if isinstance(node, list):
        return [_rebase(n) for n in node]
    if isinstance(node, dict):
        return {
            k: ("tgi" + v if k == "$ref" and v.startswith("#") else _rebase(v))
            for k, v in node.items()
        }
    return node


def validator(schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(_rebase(_openapi30_to_jsonschema(schema)), registry=_registry())


def _schema(path: str, method: str, status: int | None = None) -> dict[str, Any]:
    op = _spec()["paths"][path][method]
    if status is None:
        return dict(op["requestBody"]["content"]["application/json"]["schema"])
    return dict(op["responses"][str(status)]["content"]["application/json"]["schema"])


def spec_problems(instance: Any, path: str, method: str, status: int | None = None) -> list[str]:
    v = validator(_schema(path, method, status))
    return [f"{'/'.join(map(str, e.path))}: {e.message}" for e in v.iter_errors(instance)]


@dataclass
class FakeTGI:
    responder: Responder = lambda body: "True"
    model_id: str = "test-org/test-model-awq"
    chat_template: bool = True
    max_concurrent_requests: int = 128
    max_input_tokens: int = 4000
    max_total_tokens: int = 4096
    max_stop_sequences: int = 4
    delay_s: float = 0.0
    healthy: bool = True
    faults: fault_kinds.FaultQueue = field(default_factory=fault_kinds.FaultQueue)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    record_requests: bool = True
    # Cut replies at the request's token limit (opt-in: older tests ask for more words than
    # their small limits).
    cuts_at_limit: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/info", self._info)
        app.router.add_get("/health", self._health)
        app.router.add_post("/generate", self._generate)
        app.router.add_post("/", self._compat)
        app.router.add_post("/v1/chat/completions", self._chat)
        return app

    # -- helpers ---------------------------------------------------------------------
    def _error(self, status: int, path: str, message: str | None = None) -> web.Response:
        default, kind = ERRORS[status]
        body = {"error": message or default, "error_type": kind}
        if status in (422, 424, 429, 500):
            self._check(body, path, "post", status)
        return web.json_response(body, status=status)

    def _check(self, body: Any, path: str, method: str, status: int | None = None) -> None:
        problems = spec_problems(body, path, method, status)
        if problems:
            with self._lock:
                self.violations.extend(f"{path} {status or 'request'}: {p}" for p in problems)

    async def _read(self, request: web.Request, path: str) -> dict[str, Any] | web.Response:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return self._error(
                422, path, "Failed to deserialize the JSON body into the target type"
            )
        problems = spec_problems(body, path, "post")
        if problems:
            with self._lock:
                self.violations.extend(f"{path} request: {p}" for p in problems)
            return self._error(422, path, f"Failed to deserialize the JSON body: {problems[0]}")
        if self.record_requests:
            with self._lock:
                self.requests.append((path, body))
        assert isinstance(body, dict)
        return body

    def _rules(self, inputs: str, p: dict[str, Any], path: str) -> web.Response | None:
        """The router's checks beyond the schema (router/src/validation.rs)."""
        if p.get("temperature") is not None and p["temperature"] <= 0:
            return self._error(422, path, "`temperature` must be strictly positive")
        top_p = p.get("top_p")
        if top_p is not None and not 0 < top_p < 1:
            return self._error(422, path, "`top_p` must be > 0.0 and < 1.0")
        stops = p.get("stop") or []
        if len(stops) > self.max_stop_sequences:
            return self._error(
                422,
                path,
                f"`stop` supports up to {self.max_stop_sequences} stop sequences. "
                f"Given: {len(stops)}",
            )
        n_in = len(inputs.split())
        if n_in > self.max_input_tokens:
            return self._error(
                422,
                path,
                f"Input validation error: `inputs` must have less than "
                f"{self.max_input_tokens} tokens. Given: {n_in}",
            )
        new = p.get("max_new_tokens") or p.get("max_tokens") or 100
        if n_in + new > self.max_total_tokens:
            return self._error(
                422,
                path,
                f"Input validation error: `inputs` tokens + `max_new_tokens` must be "
                f"<= {self.max_total_tokens}. Given: {n_in} `inputs` tokens and {new} "
                "`max_new_tokens`",
            )
        return None

    async def _fault(self, request: web.Request, path: str) -> web.Response | None:
        fault = self.faults.next()
        resp = await fault_kinds.apply(fault, request, lambda s: self._error(s, path))
        if resp is None and self.delay_s:
            await asyncio.sleep(self.delay_s)
        return resp

    def _cut(self, text: str, limit: int | None) -> tuple[str, bool]:
        """``text`` within ``limit`` tokens (words), and whether it was cut."""
        words = text.split()
        if not self.cuts_at_limit or limit is None or len(words) <= limit:
            return text, False
        return " ".join(words[:limit]), True

    # -- routes --------------------------------------------------------------------------
    async def _info(self, request: web.Request) -> web.Response:
        body = {
            "model_id": self.model_id,
            "model_sha": None,
            "model_pipeline_tag": "text-generation",
            "max_concurrent_requests": self.max_concurrent_requests,
            "max_best_of": 2,
            "max_stop_sequences": self.max_stop_sequences,
            "max_input_tokens": self.max_input_tokens,
            "max_total_tokens": self.max_total_tokens,
            "validation_workers": 2,
            "max_client_batch_size": 4,
            "router": "text-generation-router",
            "version": "3.3.4",
            "sha": None,
            "docker_label": None,
        }
        self._check(body, "/info", "get", 200)
        return web.json_response(body)

    async def _health(self, request: web.Request) -> web.Response:
        if self.healthy:
            return web.Response(status=200)
        return web.json_response({"error": "unhealthy", "error_type": "healthcheck"}, status=503)

    def _generated(self, inputs: str, p: dict[str, Any]) -> dict[str, Any]:
        reply = self.responder({"messages": [{"role": "user", "content": inputs}]})
        text, cut = self._cut(reply, p.get("max_new_tokens"))
        words = text.split()
        details: dict[str, Any] | None = None
        if p.get("details", True):
            details = {
                "finish_reason": "length" if cut else "eos_token",
                "generated_tokens": len(words),
                "prefill": [
                    {"id": i, "text": w, "logprob": None if i == 0 else -1.0}
                    for i, w in enumerate(inputs.split())
                ]
                if p.get("decoder_input_details")
                else [],
                "seed": p.get("seed"),
                "tokens": [
                    {"id": i, "text": w, "logprob": -0.5, "special": False}
                    for i, w in enumerate(words)
                ],
                "top_tokens": [],
            }
        return {"generated_text": text, "details": details}

    async def _generate(self, request: web.Request) -> web.Response:
        return await self._generate_at(request, "/generate")

    async def _compat(self, request: web.Request) -> web.Response:
        return await self._generate_at(request, "/")

    async def _generate_at(self, request: web.Request, path: str) -> web.Response:
        body = await self._read(request, path)
        if isinstance(body, web.Response):
            return body
        params = body.get("parameters") or {}
        bad = self._rules(body["inputs"], params, path)
        if bad is not None:
            return bad
        fault = await self._fault(request, path)
        if fault is not None:
            return fault
        out = self._generated(body["inputs"], params)
        payload: Any = [out] if path == "/" else out
        self._check(payload, path, "post", 200)
        return web.json_response(payload)

    async def _chat(self, request: web.Request) -> web.Response:
        path = "/v1/chat/completions"
        body = await self._read(request, path)
        if isinstance(body, web.Response):
            return body
        if not self.chat_template:
            return self._error(422, path, "Template error: template not found")
        prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
        params = {k: body.get(k) for k in ("temperature", "top_p", "stop", "max_tokens")}
        if params["temperature"] == 0:
            params["temperature"] = None  # the chat route maps 0 to greedy decoding
        bad = self._rules(prompt, params, path)
        if bad is not None:
            return bad
        fault = await self._fault(request, path)
        if fault is not None:
            return fault
        text, cut = self._cut(self.responder(body), body.get("max_tokens"))
        n_in, n_out = len(prompt.split()), len(text.split())
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "length" if cut else "stop",
            "logprobs": None,
        }
        if body.get("logprobs"):
            choice["logprobs"] = {
                "content": [{"token": w, "logprob": -0.5, "top_logprobs": []} for w in text.split()]
            }
        payload = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_id,
            "system_fingerprint": "3.3.4-native",
            "choices": [choice],
            "usage": {"prompt_tokens": n_in, "completion_tokens": n_out,
                      "total_tokens": n_in + n_out},
        }  # fmt: skip
        self._check(payload, path, "post", 200)
        return web.json_response(payload)
