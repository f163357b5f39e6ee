"""``hpt annotate``'s browser page: a small HTTP server on loopback showing one sample of the
representative set at a time with the four criteria and their 1-5 buttons. Each annotation
the page posts back is validated and appended to the annotations file at once, so stopping
the server (Ctrl-C) loses nothing saved. It stops by itself when every sample is scored or
skipped. Posts carry a per-session token, so no other page the browser has open can write
annotations."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Callable
from datetime import datetime
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ValidationError

from hpt.errors import validation_message
from hpt.results.annotations import append_annotation, read_annotations
from hpt.results.penalties import Annotation, Scores
from hpt.viewer.loopback import listening


class PageCriterion(BaseModel):
    key: str
    name: str
    definition: str


class PageSample(BaseModel):
    id: str
    # (label, text) in the order shown: the sample's fields.
    blocks: list[tuple[str, str]]
    answer: str
    category: str | None = None


class PageSession(BaseModel):
    """What one annotator scores in one session, and where it is saved."""

    dataset: str
    title: str
    annotator: str
    guidance: str
    criteria: list[PageCriterion]
    samples: list[PageSample]
    path: Path


def _asset(name: str) -> str:
    return resources.files("hpt.viewer").joinpath("assets", name).read_text("utf-8")


class AnnotationServer:
    def __init__(self, session: PageSession) -> None:
        self.session = session
        self.token = secrets.token_urlsafe(16)
        self.by_id = {s.id: s for s in session.samples}
        scored = read_annotations(session.path)
        self.done = {
            a.sample_id
            for a in scored
            if a.annotator == session.annotator and a.kind == "human" and a.sample_id in self.by_id
        }
        self.skipped: set[str] = set()
        self.saved = 0
        self.finished = asyncio.Event()

    def next_sample(self) -> PageSample | None:
        return next((s for s in self.session.samples if s.id not in self.done | self.skipped), None)

    def state(self) -> dict[str, Any]:
        following = self.next_sample()
        return {
            "scored": len(self.done),
            "total": len(self.session.samples),
            "skipped": len(self.skipped),
            "sample": following.model_dump() if following else None,
        }

    def page(self) -> str:
        config = {
            "annotator": self.session.annotator,
            "guidance": self.session.guidance,
            "criteria": [c.model_dump() for c in self.session.criteria],
            "token": self.token,
        }
        # Inside <script>, "</" would end the element.
        data = json.dumps(config).replace("<", "\\u003c")
        title = f"{self.session.title} · {self.session.annotator}"
        return Template(_asset("annotate.html")).safe_substitute(
            title=title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"),
            css=_asset("annotate.css"),
            config=data,
            script=_asset("annotate.js"),
        )

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024)
        app.router.add_get("/", self._index)
        app.router.add_get("/api/next", self._next)
        app.router.add_post("/api/annotate", self._annotate)
        app.router.add_post("/api/skip", self._skip)
        return app

    async def _index(self, request: web.Request) -> web.Response:
        return web.Response(text=self.page(), content_type="text/html")

    async def _next(self, request: web.Request) -> web.Response:
        return web.json_response(self.state())

    async def _posted(self, request: web.Request) -> tuple[str, dict[str, Any]]:
        """The posted sample id and body, or an HTTPException saying what is wrong."""
        if request.headers.get("X-HPT-Token") != self.token:
            raise _refused(403, "this page's session token is missing or wrong; reload it")
        try:
            body = await request.json()
        except ValueError:
            raise _refused(400, "the body is not JSON") from None
        sample_id = body.get("sample_id") if isinstance(body, dict) else None
        if sample_id not in self.by_id:
            raise _refused(400, f"{sample_id!r} is not a sample of the representative set")
        return sample_id, body

    async def _annotate(self, request: web.Request) -> web.Response:
        sample_id, body = await self._posted(request)
        try:
            scores = Scores.model_validate(body.get("scores"))
        except ValidationError as exc:
            raise _refused(400, validation_message(exc, whole="scores")) from None
        annotation = Annotation(
            dataset=self.session.dataset, sample_id=sample_id,
            annotator=self.session.annotator, kind="human", scores=scores,
            at=datetime.now().isoformat(timespec="seconds"),
        )  # fmt: skip
        await asyncio.to_thread(append_annotation, self.session.path, annotation)
        self.done.add(sample_id)
        self.skipped.discard(sample_id)
        self.saved += 1
        return self._answer()

    async def _skip(self, request: web.Request) -> web.Response:
        sample_id, _ = await self._posted(request)
        self.skipped.add(sample_id)
        return self._answer()

    def _answer(self) -> web.Response:
        state = self.state()
        if state["sample"] is None:  # after this answer has gone out
            asyncio.get_running_loop().call_later(0.2, self.finished.set)
        return web.json_response(state)


def _refused(status: int, message: str) -> web.HTTPException:
    kind = web.HTTPForbidden if status == 403 else web.HTTPBadRequest
    return kind(text=json.dumps({"error": message}), content_type="application/json")


async def serve_annotations(
    server: AnnotationServer, port: int = 0, ready: Callable[[str], None] | None = None
) -> None:
    """Serve the page on 127.0.0.1:``port`` (0: any free port) until every sample is scored
    or skipped; ``ready`` gets the page's URL once it listens. Cancel it to stop early."""
    async with listening(server.app(), port) as url:
        if ready is not None:
            ready(url)
        if server.next_sample() is None:
            server.finished.set()
        await server.finished.wait()
