"""A minimal HTTP/1.1 keep-alive server for benchmarks: fixed answers after a fixed delay.

It speaks just enough of three protocols (OpenAI chat completions, Anthropic messages, TGI
/info + chat) to be a fair peer, and spends almost no CPU per request, so a benchmark on two
cores measures the client rather than the server. ``fault_rate`` answers that share of
requests (chosen by a seeded RNG) with 429 "overloaded" or 500, half each.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing as mp
import random
from collections.abc import Iterator
from multiprocessing.queues import Queue
from typing import Any

OPENAI = json.dumps({
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "bench-model",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "The answer is True."},
                 "finish_reason": "stop", "logprobs": None}],
    "usage": {"prompt_tokens": 120, "completion_tokens": 5, "total_tokens": 125},
}).encode()  # fmt: skip
TGI_CHAT = json.dumps({
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "bench-model",
    "system_fingerprint": "3.3.4-native",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "The answer is True."},
                 "finish_reason": "stop", "logprobs": None}],
    "usage": {"prompt_tokens": 120, "completion_tokens": 5, "total_tokens": 125},
}).encode()  # fmt: skip
ANTHROPIC = json.dumps({
    "id": "msg_1", "type": "message", "role": "assistant", "model": "bench-model",
    "content": [{"type": "text", "text": "The answer is True."}], "stop_reason": "end_turn",
    "stop_sequence": None, "usage": {"input_tokens": 120, "output_tokens": 5},
}).encode()  # fmt: skip
INFO = json.dumps({
    "model_id": "bench-model", "max_concurrent_requests": 128, "max_best_of": 2,
    "max_stop_sequences": 4, "max_input_tokens": 8000, "max_total_tokens": 8192,
    "validation_workers": 2, "max_client_batch_size": 4, "router": "text-generation-router",
    "version": "3.3.4",
}).encode()  # fmt: skip
MODELS = json.dumps({"object": "list", "data": [{"id": "bench-model", "object": "model"}],
                     "has_more": False}).encode()  # fmt: skip
OVERLOADED = json.dumps({"error": "Model is overloaded", "error_type": "overloaded"}).encode()
FAILED = json.dumps(
    {"error": "Incomplete generation", "error_type": "incomplete_generation"}
).encode()

ROUTES = {
    (b"POST", b"/v1/chat/completions"): OPENAI,
    (b"POST", b"/tgi/v1/chat/completions"): TGI_CHAT,
    (b"POST", b"/v1/messages"): ANTHROPIC,
    (b"GET", b"/tgi/info"): INFO,
    (b"GET", b"/v1/models"): MODELS,
    (b"GET", b"/tgi/health"): b"",
}


def _response(status: bytes, body: bytes) -> bytes:
    return (
        b"HTTP/1.1 "
        + status
        + b"\r\nContent-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


class Handler(asyncio.Protocol):
    def __init__(self, delay: float, fault_rate: float, rng: random.Random, counts: dict[str, int]):
        self.delay, self.fault_rate, self.rng, self.counts = delay, fault_rate, rng, counts
        self.buf = b""
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end]
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(self.buf) < end + 4 + length:
                return
            self.buf = self.buf[end + 4 + length :]
            method, path = head.split(b" ", 2)[:2]
            self._answer(method, path.split(b"?")[0])

    def _answer(self, method: bytes, path: bytes) -> None:
        body = ROUTES.get((method, path))
        if body is None:
            reply = _response(b"404 Not Found", b'{"error": "not found"}')
        elif method == b"POST" and self.rng.random() < self.fault_rate:
            self.counts["faults"] += 1
            reply = (
                _response(b"429 Too Many Requests", OVERLOADED)
                if self.rng.random() < 0.5
                else _response(b"500 Internal Server Error", FAILED)
            )
        else:
            self.counts["ok"] += method == b"POST"
            reply = _response(b"200 OK", body)
        delay = self.delay if method == b"POST" else 0.0
        asyncio.get_running_loop().call_later(delay, self._send, reply)

    def _send(self, reply: bytes) -> None:
        if not self.transport.is_closing():
            self.transport.write(reply)


async def serve(delay: float, fault_rate: float, port_out: Queue, stop: Any) -> None:  # type: ignore[type-arg]
    loop = asyncio.get_running_loop()
    rng = random.Random(1234)
    counts = {"ok": 0, "faults": 0}
    server = await loop.create_server(
        lambda: Handler(delay, fault_rate, rng, counts), "127.0.0.1", 0, backlog=4096
    )
    port_out.put(server.sockets[0].getsockname()[1])
    await loop.run_in_executor(None, stop.wait)
    server.close()
    port_out.put(counts)


def run(delay: float, fault_rate: float, port_out: Queue, stop: Any) -> None:  # type: ignore[type-arg]
    asyncio.run(serve(delay, fault_rate, port_out, stop))


@contextlib.contextmanager
def running(delay: float = 0.0, fault_rate: float = 0.0) -> Iterator[int]:
    """The server in its own process (so the client has a core to itself); yields its port."""
    ctx = mp.get_context("spawn")
    port_q: Any = ctx.Queue()
    stop = ctx.Event()
    proc = ctx.Process(target=run, args=(delay, fault_rate, port_q, stop), daemon=True)
    proc.start()
    try:
        yield port_q.get(timeout=30)
    finally:
        stop.set()
        proc.join(timeout=10)
