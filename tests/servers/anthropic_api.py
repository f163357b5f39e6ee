"""A local server speaking Anthropic's Messages API, for contract tests.

It checks what the real API checks: a key (``x-api-key`` or ``Authorization: Bearer``), an
``anthropic-version`` header, the body's fields and types, alternating roles starting with
``user``, and — for version 2026-10-21 — no ``temperature``/``top_p``/``top_k``. Errors use
the API's ``{"type": "error", "error": {...}}`` shape, 429s carry ``retry-after`` and the
``anthropic-ratelimit-*`` headers, and 529 is ``overloaded_error``.

Thinking, for the models given a ``Claude`` description (``FakeAnthropic.claude``; any other
model takes every form): each generation's thinking forms, efforts and sampling rules with
the real API's 400 texts, a budget of at least 1024 and below ``max_tokens``; ``thinking``
blocks signed (and ``redacted_thinking`` ones, opt-in) and every one sent back verified;
``output_tokens_details.thinking_tokens``; ``max_tokens`` counting the thinking (a word is a
token). A responder scripts the thinking as a leading ``<think>...</think>``; a model not
thinking drops it. ``GET /v1/models/{id}`` serves ``capabilities`` for a model that opts in.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import secrets
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
         "temperature", "top_p", "top_k", "thinking", "tools", "tool_choice", "service_tier",
         "output_config"}  # fmt: skip
EFFORTS = ("low", "medium", "high", "xhigh", "max")
THINKING_TYPES = ("enabled", "adaptive", "disabled", "between_tools")
DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
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


@dataclass(frozen=True)
class Claude:
    """How one served model thinks: the rules of its generation, as the real API enforces
    them (the presets below, from each generation's documentation)."""

    enabled: bool = True  # thinking.type "enabled" with budget_tokens
    adaptive: bool = False
    disabled: bool = True
    between_tools: bool = False
    efforts: tuple[str, ...] = ()  # output_config.effort values; (): no effort parameter
    off_up_to: str | None = None  # thinking off only at this effort or below
    thinks_unasked: bool = False  # thinks when the request has no ``thinking``
    fixed_sampling: bool = False  # non-default temperature/top_p/top_k: 400
    omits_thinking: bool = False  # display "omitted" unless asked: signed, without its text
    capabilities: bool = False  # GET /v1/models/{id} serves its capabilities

    @property
    def thinks(self) -> bool:
        return self.enabled or self.adaptive

    def takes(self, kind: str) -> bool:
        return bool(getattr(self, kind))

    def capability_json(self) -> dict[str, Any]:
        def yes(flag: bool) -> dict[str, bool]:
            return {"supported": flag}

        return {
            "batch": yes(True), "citations": yes(True), "image_input": yes(True),
            "pdf_input": yes(True), "structured_outputs": yes(True),
            "effort": {"supported": bool(self.efforts),
                       **{e: yes(e in self.efforts) for e in EFFORTS}},
            "thinking": {"supported": self.thinks,
                         "types": {t: yes(self.takes(t)) for t in THINKING_TYPES}},
        }  # fmt: skip


SONNET_3_5 = Claude(enabled=False)  # no thinking
SONNET_4_5 = Claude()  # the budget form only
OPUS_4_5 = Claude(efforts=("low", "medium", "high"))  # the budget form, and effort beside it
OPUS_4_6 = Claude(adaptive=True, efforts=("low", "medium", "high", "max"))  # both forms
OPUS_4_7 = Claude(enabled=False, adaptive=True, efforts=EFFORTS, fixed_sampling=True,
                  omits_thinking=True)  # fmt: skip
OPUS_5 = Claude(enabled=False, adaptive=True, efforts=EFFORTS, off_up_to="high",
                thinks_unasked=True, fixed_sampling=True, omits_thinking=True)  # fmt: skip
FABLE_5 = Claude(enabled=False, adaptive=True, disabled=False, efforts=EFFORTS,
                 thinks_unasked=True, fixed_sampling=True, omits_thinking=True)  # fmt: skip
SONNET_5_5 = Claude(enabled=False, adaptive=True, disabled=False, between_tools=True,
                    efforts=EFFORTS, thinks_unasked=True, fixed_sampling=True,
                    omits_thinking=True)  # fmt: skip
# A model the test did not describe takes every form and effort.
ANY_FORM = Claude(adaptive=True, between_tools=True, efforts=EFFORTS)


def thinking_problem(body: dict[str, Any], model: Claude) -> str | None:
    """The 400 the real API gives a request whose thinking ``model`` cannot take."""
    thinking = body.get("thinking")
    if thinking is not None:
        kind = thinking.get("type") if isinstance(thinking, dict) else None
        if kind not in THINKING_TYPES:
            return f"thinking.type: Input tag {kind!r} does not match any of the expected tags"
        if not model.takes(kind):
            if kind in ("enabled", "disabled") and model.adaptive:
                return (
                    f'"thinking.type.{kind}" is not supported for this model. Use '
                    '"thinking.type.adaptive" and "output_config.effort" to control thinking '
                    "behavior."
                )
            return f'"thinking.type.{kind}" is not supported for this model.'  # text assumed
        if kind == "enabled":
            budget = thinking.get("budget_tokens")
            if not isinstance(budget, int) or budget < 1024:
                return (
                    "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
                )
            if body["max_tokens"] <= budget:
                return (
                    "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult "
                    f"our documentation at {DOCS}#max-tokens-and-context-window-size"
                )
    config = body.get("output_config")
    effort = config.get("effort") if isinstance(config, dict) else None
    if effort is not None:
        if not model.efforts:
            return "This model does not support the effort parameter."
        if effort not in model.efforts:
            return f"output_config.effort '{effort}' is not supported on this model."  # assumed
        off = thinking is not None and thinking["type"] in ("disabled", "between_tools")
        if off and model.off_up_to and EFFORTS.index(effort) > EFFORTS.index(model.off_up_to):
            return (
                f"output_config.effort '{effort}' is not supported when thinking is disabled on "
                f"this model. Use effort '{model.off_up_to}' or below, or enable thinking."
            )
    sampling = [k for k in ("temperature", "top_p", "top_k") if k in body]
    if model.fixed_sampling and sampling:
        if {"temperature", "top_p"} <= set(sampling):
            return ("`temperature` and `top_p` cannot both be specified for this model. Please "
                    "use only one.")  # fmt: skip
        if body.get("temperature", 1) != 1 or body.get("top_p", 1) != 1 or "top_k" in body:
            return f"`{sampling[0]}` is deprecated for this model."
    if thinks(body, model):
        if body.get("temperature", 1) != 1:
            return (
                "`temperature` may only be set to 1 when thinking is enabled. Please consult "
                f"our documentation at {DOCS}#important-considerations-when-using-extended-thinking"
            )
        if "top_k" in body or body.get("top_p", 1) < 0.95:
            return f"`{'top_k' if 'top_k' in body else 'top_p'}` is not supported when thinking is enabled."  # assumed
    return None


def thinks(body: dict[str, Any], model: Claude) -> bool:
    thinking = body.get("thinking")
    if thinking is None:
        return model.thinks_unasked
    return bool(thinking["type"] in ("enabled", "adaptive"))


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
class Signer:
    """Signatures of thinking blocks: a nonce and an HMAC of the text as returned, so a block
    sent back with any change (its text, its signature) fails, as the real API's do."""

    key: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    def sign(self, text: str) -> str:
        nonce = secrets.token_bytes(12)
        return base64.b64encode(nonce + self._mac(nonce, text)).decode()

    def valid(self, signature: Any, text: Any) -> bool:
        if not isinstance(signature, str) or not isinstance(text, str):
            return False
        try:
            raw = base64.b64decode(signature, validate=True)
        except ValueError:
            return False
        return hmac.compare_digest(raw[12:], self._mac(raw[:12], text))

    def _mac(self, nonce: bytes, text: str) -> bytes:
        return hmac.new(self.key, nonce + text.encode(), hashlib.sha256).digest()


# What a redacted block's opaque ``data`` seals (the real one is encrypted thinking).
REDACTED_DATA = "redacted thinking"


def _text(content: str | list[Any]) -> str:
    """What the model reads of a turn: its text (earlier thinking is the API's business)."""
    if isinstance(content, str):
        return content
    return "".join(b["text"] for b in content if b.get("type") == "text")


def scripted(reply: str) -> tuple[str | None, str]:
    """A responder's reply as (thinking, answer): a leading <think>...</think> is thinking."""
    head = reply.lstrip()
    if not head.startswith("<think>") or "</think>" not in head:
        return None, reply
    thought, _, answer = head.removeprefix("<think>").partition("</think>")
    return thought.strip(), answer.strip()


@dataclass
class FakeAnthropic:
    responder: Responder = lambda body: "True"
    api_key: str = "test-anthropic-key"
    model_ids: tuple[str, ...] = ("claude-test-1",)
    delay_s: float = 0.0
    faults: list[fault_kinds.Fault] = field(default_factory=list)
    requests: list[tuple[dict[str, str], dict[str, Any]]] = field(default_factory=list)
    # Models served with their generation's thinking rules (served besides model_ids).
    claude: dict[str, Claude] = field(default_factory=dict)
    # Each thinking answer also carries a redacted_thinking block.
    redact: bool = False
    signer: Signer = field(default_factory=Signer)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/v1/models/{model_id}", self._model)
        return app

    def _served(self) -> list[str]:
        return [*self.model_ids, *(m for m in self.claude if m not in self.model_ids)]

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
        data = [_info(m) for m in self._served()]
        return web.json_response(
            {"data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]}
        )

    async def _model(self, request: web.Request) -> web.Response:
        problem = self._auth_problem(request)
        if problem is not None:
            return problem
        model_id = request.match_info["model_id"]
        if model_id not in self._served():
            return _error(404, f"model: {model_id}")
        info = _info(model_id)
        described = self.claude.get(model_id)
        if described is not None and described.capabilities:
            info["capabilities"] = described.capability_json()
        return web.json_response(info)

    def _blocks_problem(self, messages: list[dict[str, Any]]) -> str | None:
        """The 400 for a content block sent back otherwise than it was returned."""
        for i, m in enumerate(messages):
            for j, block in enumerate(m["content"] if isinstance(m["content"], list) else []):
                where = f"messages.{i}.content.{j}"
                kind = block.get("type") if isinstance(block, dict) else None
                if kind == "text" and not (isinstance(block.get("text"), str) and block["text"]):
                    return f"{where}.text: text content blocks must be non-empty"
                if kind == "thinking" and not self.signer.valid(
                    block.get("signature"), block.get("thinking")
                ):
                    return f"{where}: Invalid `signature` in `thinking` block"
                if kind == "redacted_thinking" and not self.signer.valid(
                    block.get("data"), REDACTED_DATA
                ):
                    return f"{where}: Invalid `data` in `redacted_thinking` block"  # assumed
                if kind not in ("text", "thinking", "redacted_thinking"):
                    return (
                        f"{where}.type: Input tag {kind!r} does not match any of the expected tags"
                    )
        return None

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
        if body["model"] not in self._served():
            return _error(404, f"model: {body['model']}")
        model = self.claude.get(body["model"], ANY_FORM)
        bad = thinking_problem(body, model) or self._blocks_problem(body["messages"])
        if bad:
            return _error(400, bad)
        with self._lock:
            fault = self.faults.pop(0) if self.faults else None
            self.requests.append((dict(request.headers), body))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        failed = await fault_kinds.apply(fault, request, self._fault_body)
        if failed is not None:
            return failed
        messages = [{"role": m["role"], "content": _text(m["content"])} for m in body["messages"]]
        if body.get("system"):
            messages.insert(0, {"role": "system", "content": body["system"]})
        content, stop_reason, stop_sequence, usage = self._answer(body, model, messages)
        usage["input_tokens"] = sum(len(str(m["content"]).split()) for m in messages)
        return web.json_response(
            {
                "id": f"msg_{uuid.uuid4().hex[:24]}",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": content,
                "stop_reason": stop_reason,
                "stop_sequence": stop_sequence,
                "usage": usage,
            }
        )

    def _answer(
        self, body: dict[str, Any], model: Claude, messages: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], str, str | None, dict[str, Any]]:
        """The reply's content blocks, stop reason and sequence, and output usage: the
        thinking first where the model thinks, then the answer, within max_tokens."""
        thought, text = scripted(self.responder({"messages": messages}))
        stop_reason, stop_sequence = "end_turn", None
        for s in body.get("stop_sequences", []):
            if s in text:
                text, stop_reason, stop_sequence = text[: text.index(s)], "stop_sequence", s
                break
        limit = body["max_tokens"]
        content: list[dict[str, Any]] = []
        usage: dict[str, Any] = {}
        thinking_tokens = 0
        if thinks(body, model):
            words = (thought or f"Considering: {messages[-1]['content']}").split()
            if len(words) >= limit:  # cut off while thinking: no answer
                words, text, stop_reason, stop_sequence = words[:limit], "", "max_tokens", None
            thinking_tokens = len(words)
            usage["output_tokens_details"] = {"thinking_tokens": thinking_tokens}
            display = (body.get("thinking") or {}).get("display")
            omitted = display == "omitted" or (display is None and model.omits_thinking)
            shown = "" if omitted else " ".join(words)
            content.append({"type": "thinking", "thinking": shown,
                            "signature": self.signer.sign(shown)})  # fmt: skip
            if self.redact:
                content.append({"type": "redacted_thinking",
                                "data": self.signer.sign(REDACTED_DATA)})  # fmt: skip
        if stop_reason != "max_tokens":
            words = text.split()
            room = limit - thinking_tokens
            if len(words) > room:
                text, stop_reason, stop_sequence = " ".join(words[:room]), "max_tokens", None
            content.append({"type": "text", "text": text})
        usage["output_tokens"] = thinking_tokens + len(text.split())
        return content, stop_reason, stop_sequence, usage


def _info(model_id: str) -> dict[str, Any]:
    return {"type": "model", "id": model_id, "display_name": model_id,
            "created_at": "2026-01-01T00:00:00Z", "lifecycle": "active",
            "max_input_tokens": 200000, "max_tokens": 64000}  # fmt: skip
