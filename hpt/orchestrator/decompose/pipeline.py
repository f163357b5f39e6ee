"""``hpt decompose``'s pipeline: the output folder (new, continued or resumed), the models
checked before any is called, the build, and the files written last."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Literal

from hpt.backends import ResponseCache
from hpt.backends.embeddings import (
    ST_PREFIX,
    EmbeddingSpecError,
    SentenceTransformerSpec,
    endpoint_for,
    open_embeddings,
)
from hpt.orchestrator.decompose.builder import Builder
from hpt.orchestrator.decompose.dedup import EXACT_NOTE
from hpt.orchestrator.decompose.logs import ReplyLog, StateLog, fingerprint
from hpt.orchestrator.decompose.settings import (
    PROMPTS,
    REPLIES_FILE,
    STATE_FILE,
    SUMMARY_FILE,
    DecomposeSpec,
    Note,
)
from hpt.orchestrator.decompose.sources import load_depth3
from hpt.orchestrator.decompose.summary import DecomposeSummary
from hpt.orchestrator.models import ModelBackends, ResolvedModel
from hpt.orchestrator.spec import ConfigError
from hpt.prompts import PromptSet
from hpt.results.rundir import RunDirError
from hpt.tasks.depthqa.graph import write_graph_dir


def prepare_out(out: Path, resume: bool) -> Literal["new", "continue", "resume"]:
    """A new folder starts; an unfinished one (a checkpoint, no summary) continues; a finished
    one (with ``decompose_summary.json``) runs again from its checkpoint only with ``resume``:
    only steps not in the checkpoint call the model (those whose calls failed, or new ones
    after a larger --limit), and the graph is rewritten."""
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return "new"
    if not out.is_dir():
        raise RunDirError(f"{out} is a file; --out takes a folder")
    if not (out / STATE_FILE).is_file():
        raise RunDirError(
            f"{out} is not empty and holds no {STATE_FILE} (it is not a decompose folder); "
            "choose another --out"
        )
    if (out / SUMMARY_FILE).is_file():
        if not resume:
            raise RunDirError(
                f"{out} already holds a finished graph ({SUMMARY_FILE}); pass --resume to run "
                "it again from its checkpoint (only steps not in it call the model), or choose "
                "another --out"
            )
        return "resume"
    return "continue"


def _check_header(state: StateLog, spec: DecomposeSpec, label: str) -> None:
    """The checkpoint's answers came from one model at one setting: refuse to mix."""
    mine = {"model": label, "params": spec.params.model_dump(mode="json")}
    inputs = fingerprint(mine)
    old = state.entries.get(("header", "run"))
    if old is None:
        state.put("header", "run", inputs, mine)
        return
    # What the header says, not its fingerprint: a damaged fingerprint alone is no mix.
    if fingerprint({"model": old.get("model"), "params": old.get("params")}) != inputs:
        raise RunDirError(
            f"{spec.out} was built with model {old.get('model')!r} and params "
            f"{old.get('params')} (says {state.path.name}); this run has {label!r} and "
            f"{mine['params']}. Continue with the same model and generation options, or "
            "choose another --out"
        )


def resolve_embedding(spec: DecomposeSpec) -> ResolvedModel | SentenceTransformerSpec | None:
    """The embedding model, checked to be one with an embeddings endpoint or a
    sentence-transformers model this machine can load (fails before any model is called)."""
    if not spec.embedding_model:
        return None
    try:
        if spec.embedding_base_url and spec.embedding_model.startswith(ST_PREFIX):
            raise EmbeddingSpecError(
                "--embedding-base-url is for endpoint models; a sentence-transformers model "
                "runs on this machine"
            )
        local = SentenceTransformerSpec.parse(spec.embedding_model)
        if local is not None:
            return local
        resolved = spec.resolve(spec.embedding_model)
        if spec.embedding_base_url:
            resolved = ResolvedModel(
                resolved.label, resolved.config.with_endpoint(spec.embedding_base_url)
            )
        endpoint_for(resolved.config)
    except EmbeddingSpecError as exc:
        raise ConfigError(f"--embedding-model {spec.embedding_model}: {exc}") from None
    return resolved


async def run_decompose(spec: DecomposeSpec, note: Note | None = None) -> DecomposeSummary:
    """Build the graph into ``spec.out``; see the package's docstring."""
    say = note or (lambda _: None)
    sources = await asyncio.to_thread(load_depth3, spec.questions, spec.limit)
    mode = prepare_out(spec.out, spec.resume)
    if mode != "new":
        say(f"continuing from the checkpoint in {spec.out / STATE_FILE}")
    prompts = await asyncio.to_thread(PromptSet.load, PROMPTS)
    resolved = spec.resolve(spec.model)
    embedding = resolve_embedding(spec)
    spec.out.mkdir(parents=True, exist_ok=True)
    state = StateLog(spec.out / STATE_FILE)
    _check_header(state, spec, resolved.label)
    replies = ReplyLog(spec.out / REPLIES_FILE)
    # A rerun of a finished folder is unfinished until it ends.
    (spec.out / SUMMARY_FILE).unlink(missing_ok=True)
    async with contextlib.AsyncExitStack() as stack:
        cache = await stack.enter_async_context(ResponseCache()) if spec.cache else None
        model = await ModelBackends(stack, cache).open(resolved)
        embedder = None
        if embedding is not None:
            source, label = (
                (embedding.config, embedding.label)
                if isinstance(embedding, ResolvedModel)
                else (embedding, embedding.identity)
            )
            embedder = await stack.enter_async_context(
                open_embeddings(source, label=label, cache=spec.cache)
            )
        builder = Builder(spec, prompts, model, embedder, state, replies, say)
        graph = await builder.run(sources)
        summary = builder.summary(graph, None if embedder else EXACT_NOTE)
    await asyncio.to_thread(write_graph_dir, graph, spec.out)
    await asyncio.to_thread(
        (spec.out / SUMMARY_FILE).write_text, summary.model_dump_json(indent=2), "utf-8"
    )
    return summary
