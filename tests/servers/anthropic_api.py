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
import random
import re
import secrets
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web

from tests.servers import faults as fault_kinds
from tests.servers.batches import BatchFaults, BatchLedger, BatchRecord, BatchTiming, Work

Responder = Callable[[dict[str, Any]], str]
VERSIONS = {"2023-06-01", "2026-10-21"}
KNOWN = {"model", "max_tokens", "messages", "system", "stop_sequences", "metadata", "stream",
         "temperature", "top_p", "top_k", "thinking", "tools", "tool_choice", "service_tier",
         "output_config", "cache_control"}  # fmt: skip
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


# The shortest prefix each model caches, in tokens (the prompt-caching page, facts27): the
# longest key a model id starts with applies; "" is any other model.
CACHE_MINIMUMS = {
    "": 1024,
    "claude-opus-4": 1024, "claude-opus-4-1": 1024, "claude-opus-4-5": 4096,
    "claude-opus-4-6": 4096, "claude-opus-4-7": 2048, "claude-opus-4-8": 1024,
    "claude-opus-5": 512, "claude-sonnet-4": 1024, "claude-sonnet-4-5": 1024,
    "claude-sonnet-4-6": 1024, "claude-sonnet-5": 1024, "claude-sonnet-5-5": 512,
    "claude-haiku-4-5": 4096, "claude-haiku-5-5": 512, "claude-3-haiku": 2048,
    "claude-3-5-haiku": 2048, "claude-fable-5": 512, "claude-mythos-5": 512,
}  # fmt: skip
TTLS = {"5m": 300.0, "1h": 3600.0}
MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20  # a breakpoint finds entries up to this many blocks before it
Token = tuple[int, str, int, str]  # (message index, -1 system; role; block index; word)


def cache_minimum(model: str, table: dict[str, int]) -> int:
    return table[max((k for k in table if model.startswith(k)), key=len)]


@dataclass
class Block:
    """A prompt block as the cache sees it: its tokens (a word is a token) and its mark."""

    tokens: list[Token]
    cache_control: dict[str, Any] | None = None

    @property
    def ttl(self) -> str:
        return str((self.cache_control or {}).get("ttl", "5m"))


def prompt_blocks(body: dict[str, Any]) -> list[Block]:
    """The prompt's blocks in the cache's order: system, then the messages; a top-level
    ``cache_control`` (automatic caching) marks the last block."""
    blocks: list[Block] = []
    system = body.get("system") or []
    for j, b in enumerate(
        [{"type": "text", "text": system}] if isinstance(system, str) else system
    ):
        tokens = [(-1, "system", j, w) for w in b["text"].split()]
        blocks.append(Block(tokens, b.get("cache_control")))
    for i, m in enumerate(body["messages"]):
        content = m["content"]
        for j, b in enumerate(
            [{"type": "text", "text": content}] if isinstance(content, str) else content
        ):
            words = b["text"].split() if b.get("type") == "text" else []  # thinking: not input
            blocks.append(Block([(i, m["role"], j, w) for w in words], b.get("cache_control")))
    if body.get("cache_control") and blocks and blocks[-1].cache_control is None:
        blocks[-1].cache_control = body["cache_control"]
    return blocks


def cache_problem(body: dict[str, Any]) -> str | None:
    """The 400 for system blocks or ``cache_control`` marks the API refuses (marks: at most
    four, on text blocks, type ephemeral, ttl 5m or 1h, no 1h after a 5m)."""
    marks: list[tuple[str, Any]] = []
    system = body.get("system")
    for j, block in enumerate(system if isinstance(system, list) else []):
        where = f"system.{j}"
        if not isinstance(block, dict) or block.get("type") != "text":
            return f"{where}.type: Input should be 'text'"
        if not (isinstance(block.get("text"), str) and block["text"]):
            return f"{where}.text: text content blocks must be non-empty"
        extra = sorted(set(block) - {"type", "text", "cache_control", "citations"})
        if extra:
            return f"{where}.{extra[0]}: Extra inputs are not permitted"
        if "cache_control" in block:
            marks.append((where, block["cache_control"]))
    for i, m in enumerate(body["messages"]):
        for j, block in enumerate(m["content"] if isinstance(m["content"], list) else []):
            if "cache_control" in block:
                where = f"messages.{i}.content.{j}"
                if block["type"] in ("thinking", "redacted_thinking"):
                    return f"{where}.{block['type']}.cache_control: Extra inputs are not permitted"
                marks.append((where, block["cache_control"]))
    if "cache_control" in body:
        marks.append(("cache_control", body["cache_control"]))
    for where, mark in marks:
        if not isinstance(mark, dict) or mark.get("type") != "ephemeral":
            return f"{where}.cache_control.type: Input should be 'ephemeral'"
        extra = sorted(set(mark) - {"type", "ttl"})
        if extra:
            return f"{where}.cache_control.{extra[0]}: Extra inputs are not permitted"
        if mark.get("ttl", "5m") not in TTLS:
            return f"{where}.cache_control.ttl: Input should be '5m' or '1h'"
    if len(marks) > MAX_BREAKPOINTS:
        return (f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {len(marks)}.")  # fmt: skip
    ttls = [mark.get("ttl", "5m") for _, mark in marks]
    if "5m" in ttls and "1h" in ttls[ttls.index("5m") :]:
        return (
            "A cache_control block with ttl='1h' must not come after one with ttl='5m' "
            "(blocks are processed in the order tools, system, messages)."
        )  # text assumed
    return None


@dataclass
class PromptCache:
    """Anthropic's prompt cache: the prefixes written at breakpoints, per model, each alive
    for its TTL from its last write or read."""

    ttls: dict[str, float] = field(default_factory=lambda: dict(TTLS))
    _entries: dict[tuple[str, int], tuple[float, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def usage(self, model: str, blocks: list[Block], minimum: int) -> dict[str, Any]:
        """The input side of ``usage``: the longest live prefix found at a breakpoint (or up
        to 20 blocks before one) is read; each later breakpoint at least ``minimum`` tokens
        long is written; ``input_tokens`` counts what follows the last of them."""
        ends, chains, total, chained = [], [], 0, 0
        for block in blocks:
            for token in block.tokens:
                chained = hash((chained, token))  # equal prefixes, equal chains
            total += len(block.tokens)
            ends.append(total)
            chains.append((model, chained))
        marked = [i for i, b in enumerate(blocks) if b.cache_control is not None]
        written = {"5m": 0, "1h": 0}
        now = time.monotonic()
        with self._lock:
            read, hit = 0, None
            for i in marked:
                for j in range(i, max(-1, i - LOOKBACK_BLOCKS - 1), -1):
                    entry = self._entries.get(chains[j])
                    if entry is not None and entry[0] > now and ends[j] > read:
                        read, hit = ends[j], chains[j]
                        break
            if hit is not None:
                ttl_s = self._entries[hit][1]
                self._entries[hit] = (now + ttl_s, ttl_s)
            done = read
            for i in marked:
                if ends[i] < minimum or ends[i] <= done:
                    continue
                ttl = blocks[i].ttl
                written[ttl] += ends[i] - done
                done = ends[i]
                self._entries[chains[i]] = (now + self.ttls[ttl], self.ttls[ttl])
        return {
            "input_tokens": total - done,
            "cache_creation_input_tokens": written["5m"] + written["1h"],
            "cache_read_input_tokens": read,
            "cache_creation": {"ephemeral_5m_input_tokens": written["5m"],
                               "ephemeral_1h_input_tokens": written["1h"]},
        }  # fmt: skip


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


# Message Batches' limits (the batch guide): requests per batch, bytes per create.
MAX_BATCH_REQUESTS = 100_000
MAX_BATCH_BYTES = 256 * 2**20
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def batch_problem(body: Any) -> str | None:
    """The 400 for a create body the API refuses at once (its requests' params are checked
    later, one by one)."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    extra = sorted(set(body) - {"requests"})
    if extra:
        return f"{extra[0]}: Extra inputs are not permitted"
    requests = body.get("requests")
    if not isinstance(requests, list) or not requests:
        return "requests: List should have at least 1 item after validation"
    if len(requests) > MAX_BATCH_REQUESTS:
        return f"requests: List should have at most {MAX_BATCH_REQUESTS} items after validation"
    seen: set[str] = set()
    for i, r in enumerate(requests):
        if not isinstance(r, dict) or set(r) != {"custom_id", "params"}:
            return f"requests.{i}: each request needs exactly 'custom_id' and 'params'"
        custom_id = r["custom_id"]
        if not isinstance(custom_id, str) or not CUSTOM_ID.match(custom_id):
            return f"requests.{i}.custom_id: String should match pattern '{CUSTOM_ID.pattern}'"
        if custom_id in seen:
            return f"requests.{i}.custom_id: Duplicate custom_id '{custom_id}'; each must be unique within the batch"  # assumed
        seen.add(custom_id)
        if not isinstance(r["params"], dict):
            return f"requests.{i}.params: Input should be a valid dictionary"
    return None


@dataclass
class AnthropicBatch:
    id: str
    work: Work[dict[str, Any]]  # answers: each request's ``result``
    record: BatchRecord

    def results_by_id(self) -> list[tuple[str, dict[str, Any]]]:
        """Every request's result once the batch ended: the answered ones, then the rest
        canceled (a canceled batch) or expired."""
        gone = {"type": "canceled" if self.work.cancel_at is not None else "expired"}
        return [*self.work.results.items(), *((cid, gone) for cid in self.work.unanswered)]

    def results(self) -> list[dict[str, Any]]:
        return [result for _, result in self.results_by_id()]


def anthropic_timeline(work: Work[Any]) -> list[tuple[str, float]]:
    """A batch's processing statuses and when it reaches each."""
    steps = [("in_progress", work.created)]
    if work.cancel_at is not None:
        steps.append(("canceling", work.cancel_at))
    return [*steps, ("ended", work.ended_at)]


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
    # Valid POSTs to /v1/messages (faulted ones too; batched requests are not).
    direct_calls: int = 0
    # Prompt caching at cache_control breakpoints (direct and batched requests alike): the
    # minimum prefix by model (CACHE_MINIMUMS' rule) and the cache, whose TTLs tests may
    # shorten (``cache.ttls["5m"] = 0.2``).
    cache_minimums: dict[str, int] = field(default_factory=lambda: dict(CACHE_MINIMUMS))
    cache: PromptCache = field(default_factory=PromptCache)
    # Message Batches (see tests.servers.batches; the "fail" fault does not apply: this API
    # validates a batch when it is created).
    batch_timing: BatchTiming = field(default_factory=BatchTiming)
    batch_faults: BatchFaults = field(default_factory=BatchFaults)
    ledger: BatchLedger = field(default_factory=BatchLedger)
    _batches: dict[str, AnthropicBatch] = field(default_factory=dict)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BATCH_BYTES + 2**20)
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/v1/models/{model_id}", self._model)
        app.router.add_post("/v1/messages/batches", self._batch_create)
        app.router.add_get("/v1/messages/batches", self._batch_list)
        app.router.add_get("/v1/messages/batches/{batch_id}", self._batch_get)
        app.router.add_delete("/v1/messages/batches/{batch_id}", self._batch_delete)
        app.router.add_post("/v1/messages/batches/{batch_id}/cancel", self._batch_cancel)
        app.router.add_get("/v1/messages/batches/{batch_id}/results", self._batch_results)
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

    def _refusal(self, body: Any, version: str) -> web.Response | None:
        """The error /v1/messages answers ``body`` with, if any (a batched request is
        errored with the same)."""
        bad = validate(body, version)
        if bad:
            return _error(400, bad)
        if body["model"] not in self._served():
            return _error(404, f"model: {body['model']}")
        model = self.claude.get(body["model"], ANY_FORM)
        bad = (
            thinking_problem(body, model)
            or self._blocks_problem(body["messages"])
            or cache_problem(body)
        )
        return _error(400, bad) if bad else None

    async def _messages(self, request: web.Request) -> web.Response:
        problem = self._auth_problem(request)
        if problem is not None:
            return problem
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return _error(400, "There was an error parsing the body of your request")
        refused = self._refusal(body, request.headers["anthropic-version"])
        if refused is not None:
            return refused
        with self._lock:
            fault = self.faults.pop(0) if self.faults else None
            self.direct_calls += 1
            self.requests.append((dict(request.headers), body))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        failed = await fault_kinds.apply(fault, request, self._fault_body)
        if failed is not None:
            return failed
        return web.json_response(self.message(body))

    def message(self, body: dict[str, Any]) -> dict[str, Any]:
        """The Message answering a valid ``body`` (directly or in a batch)."""
        model = self.claude.get(body["model"], ANY_FORM)
        messages = [{"role": m["role"], "content": _text(m["content"])} for m in body["messages"]]
        if body.get("system"):
            messages.insert(0, {"role": "system", "content": _text(body["system"])})
        content, stop_reason, stop_sequence, usage = self._answer(body, model, messages)
        minimum = cache_minimum(body["model"], self.cache_minimums)
        usage = {**self.cache.usage(body["model"], prompt_blocks(body), minimum), **usage}
        return {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": stop_sequence,
            "usage": usage,
        }

    # Message Batches.

    async def _batch_create(self, request: web.Request) -> web.Response:
        problem = self._auth_problem(request)
        if problem is not None:
            return problem
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return _error(400, "There was an error parsing the body of your request")
        with self._lock:
            self.ledger.create_calls += 1
        failed = await fault_kinds.apply(self.batch_faults.next_create(), request,
                                         self._fault_body)  # fmt: skip
        if failed is not None:
            return failed
        bad = batch_problem(body)
        if bad:
            return _error(400, bad)
        fault = self.batch_faults.next_batch()
        if fault == "fail":
            raise ValueError("Message Batches have no failed status: use a create fault")
        items = [(r["custom_id"], r["params"]) for r in body["requests"]]
        version = request.headers["anthropic-version"]
        batch_id = _id("msgbatch_")
        record = BatchRecord(batch_id, [cid for cid, _ in items], fault)
        work = Work(items, self.batch_timing, fault, time.time(),
                    lambda cid, params: self._batched(version, cid, params))  # fmt: skip
        batch = AnthropicBatch(batch_id, work, record)
        self.ledger.add(record)
        self._batches[batch_id] = batch
        return web.json_response(self._batch_json(batch, request))

    def _batched(self, version: str, custom_id: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request of a batch, answered: its ``result``. Params are checked only now,
        as the API does (asynchronously): a bad request is errored alone."""
        refused = self._refusal(params, version)
        if refused is not None:
            return {"type": "errored", "error": json.loads(refused.text or "{}")}
        if self.batch_faults.request_error is not None:
            status = self.batch_faults.request_error(custom_id, params)
            if status is not None:
                kind = ERROR_TYPES.get(status, "api_error")
                message = "Internal server error" if status >= 500 else "Invalid request"
                error = {"type": "error", "error": {"type": kind, "message": message},
                         "request_id": _id("req_")}  # fmt: skip
                return {"type": "errored", "error": error}
        return {"type": "succeeded", "message": self.message(params)}

    def _batch_json(self, batch: AnthropicBatch, request: web.Request) -> dict[str, Any]:
        """The MessageBatch object as of now (answering what is due first)."""
        now = time.time()
        work = batch.work
        work.advance(now)
        steps = [(s, t) for s, t in anthropic_timeline(work) if t <= now]
        batch.record.transitions = steps
        status = steps[-1][0]
        counts = {"processing": len(work.items), "succeeded": 0, "errored": 0,
                  "canceled": 0, "expired": 0}  # fmt: skip
        if status == "ended":  # until then, everything is processing
            counts = dict.fromkeys(counts, 0) | Counter(r["type"] for r in batch.results())
        return {
            "id": batch.id, "type": "message_batch", "processing_status": status,
            "request_counts": counts, "created_at": _rfc3339(work.created),
            "expires_at": _rfc3339(work.deadline), "archived_at": None,
            "ended_at": _rfc3339(work.ended_at) if status == "ended" else None,
            "cancel_initiated_at": None if work.cancel_at is None else _rfc3339(work.cancel_at),
            "results_url": f"{request.scheme}://{request.host}/v1/messages/batches/{batch.id}"
                           "/results" if status == "ended" else None,
        }  # fmt: skip

    def _batch(self, request: web.Request) -> AnthropicBatch | web.Response:
        problem = self._auth_problem(request)
        if problem is not None:
            return problem
        batch = self._batches.get(request.match_info["batch_id"])
        if batch is None:
            return _error(404, f"message_batch: {request.match_info['batch_id']} not found")
        return batch

    async def _batch_get(self, request: web.Request) -> web.Response:
        batch = self._batch(request)
        if isinstance(batch, web.Response):
            return batch
        return web.json_response(self._batch_json(batch, request))

    async def _batch_cancel(self, request: web.Request) -> web.Response:
        """Cancels a batch in progress; one canceling or ended is returned as it is."""
        batch = self._batch(request)
        if isinstance(batch, web.Response):
            return batch
        if self._batch_json(batch, request)["processing_status"] == "in_progress":
            batch.work.cancel(time.time())
        return web.json_response(self._batch_json(batch, request))

    async def _batch_delete(self, request: web.Request) -> web.Response:
        batch = self._batch(request)
        if isinstance(batch, web.Response):
            return batch
        if self._batch_json(batch, request)["processing_status"] != "ended":
            return _error(
                400, f"Batch {batch.id} cannot be deleted while it is processing; cancel it first."
            )  # text assumed
        del self._batches[batch.id]
        return web.json_response({"id": batch.id, "type": "message_batch_deleted"})

    async def _batch_results(self, request: web.Request) -> web.Response:
        batch = self._batch(request)
        if isinstance(batch, web.Response):
            return batch
        if self._batch_json(batch, request)["processing_status"] != "ended":
            return _error(404, f"Results for batch {batch.id} are not available yet.")  # assumed
        lines = [{"custom_id": cid, "result": result} for cid, result in batch.results_by_id()]
        random.Random(batch.id).shuffle(lines)  # "not guaranteed to be in request order"
        data = "".join(json.dumps(line) + "\n" for line in lines).encode()
        return web.Response(body=data, content_type="application/binary")

    async def _batch_list(self, request: web.Request) -> web.Response:
        problem = self._auth_problem(request)
        if problem is not None:
            return problem
        limit = request.query.get("limit", "20")
        if not limit.isdigit() or not 1 <= int(limit) <= 1000:
            return _error(400, "limit: Input should be between 1 and 1000")
        ids = list(reversed(self._batches))  # newest first
        after, before = request.query.get("after_id"), request.query.get("before_id")
        for cursor in (after, before):
            if cursor is not None and cursor not in self._batches:
                return _error(400, f"Invalid cursor: {cursor}")
        if after is not None:
            ids = ids[ids.index(after) + 1 :]
        if before is not None:
            ids = ids[: ids.index(before)][-int(limit) :]
        page = [self._batch_json(self._batches[i], request) for i in ids[: int(limit)]]
        return web.json_response({
            "data": page, "has_more": len(ids) > len(page),
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
        })  # fmt: skip

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
