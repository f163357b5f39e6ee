"""``hpt decompose``: build a DepthQA question graph from depth-3 questions (DepthQA section 3.3,
appendix A, prompts in appendix J.1 tables 20-26).

The steps, each a phase over every question:

1. a reference answer for each depth-3 question that has none (table 20);
2. up to four depth-2 sub-questions of each (system table 22, user table 23);
3. a reference answer for each depth-2 question (table 21);
4. up to four depth-1 sub-questions of each depth-2 question (table 24);
5. deduplication (``deduplicate``), with embeddings from ``--embedding-model`` or, without
   one, by exact (normalised) text;
6. augmentation: a question that lost sub-questions to deduplication gets as many new ones as
   it lost, never more than four in all (tables 25 and 26); a new depth-2 question is answered
   and decomposed like the others. Deduplication runs once, before augmentation, so what
   augmentation adds is not deduplicated again (the paper's table 4 still shows a 0.93 pair
   "after deduplication and augmentation");
7. a reference answer for each depth-1 question left (table 21) -- last, so that questions
   deduplication removes are never answered.

Sub-questions are read from the model's JSON reply and validated; a reply that is not the
asked-for shape is asked again (``JSON_ATTEMPTS`` tries in all, each with its own cache seed).
A question that never gets valid JSON keeps no sub-questions and is listed in the summary. A
list longer than four is cut to its first four (the paper's own examples list five and six,
so models often do; a cut costs nothing, a refusal a call) and the cuts are counted.

Ids follow the hub's: the n-th depth-3 row of the input (counted before --limit) is group
``n`` with nodes ``n_d3``, ``n_d2_nK``, ``n_d1_nK``; depth-3 questions keep their qid and the
generated ones are numbered ``d2_qN`` and ``d1_qN``.

Every reply the model gave is appended to ``decompose_replies.jsonl`` beside what was read
from it (``ReplyLog``), so a question left without sub-questions shows why.

Resuming: every finished step is appended to ``decompose_state.jsonl`` in the output folder,
keyed by what it was computed from (a hash of the prompt, or of the questions deduplicated).
A rerun replays the steps whose inputs are unchanged and calls the model for the rest; every
call also goes through hpt's response cache, so even a step lost from the checkpoint costs
nothing the second time. The graph files and ``decompose_summary.json`` are written last; the
summary marks a finished folder, which a rerun refuses unless ``resume`` is set.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from hpt.backends import (
    BackendError,
    FatalBackendError,
    GenerationParams,
    ManagedBackend,
    Message,
    ResponseCache,
)
from hpt.backends.embeddings import (
    ST_PREFIX,
    Embedder,
    EmbeddingSpecError,
    SentenceTransformerSpec,
    cosine,
    endpoint_for,
    open_embeddings,
)
from hpt.errors import validation_message
from hpt.orchestrator.models import ModelBackends, ModelSettings, ResolvedModel
from hpt.orchestrator.spec import ConfigError
from hpt.prompts import PromptSet
from hpt.results.rundir import RunDirError
from hpt.tasks import DatasetError
from hpt.tasks.depthqa.graph import (
    DepthNode,
    DepthQuestion,
    QuestionGraph,
    describe,
    write_graph_dir,
)

PROMPTS = "depthqa_decompose"
STATE_FILE = "decompose_state.jsonl"
SUMMARY_FILE = "decompose_summary.json"
REPLIES_FILE = "decompose_replies.jsonl"
EMPTY_REPLY = "the model's reply was empty"
MAX_CHILDREN = 4  # "maximum of 4" sub-questions per question (tables 23-26, section 3.3)
JSON_ATTEMPTS = 3
# The paper's augmentation ran at temperature 0.7 (appendix A); the default here too.
DEFAULT_TEMPERATURE = 0.7

# Deduplication thresholds on cosine similarity, from the paper's appendix A ("Question
# deduplication and augmentation"): within depth 1 or 2, >= 0.9 is a duplicate; across
# depths, a depth-2 question >= 0.9 similar to a depth-1 question is removed (it is really a
# depth-1 question) and a depth-1 question between 0.8 and 0.9 similar to a depth-2 question
# is removed (it is really a depth-2 one). The reference code (kaistAI/knowledge-reasoning)
# holds only inference and evaluation, so the paper is the only source.
SAME_DEPTH = 0.9
D2_LIKE_D1 = 0.9
D1_LIKE_D2 = (0.8, 0.9)

EXACT_NOTE = (
    "no --embedding-model: duplicates were found by exact text only (case, spacing and end "
    "punctuation ignored), not by embedding similarity as in the paper; near-duplicates that "
    "are worded differently were kept"
)

Depth = Literal[1, 2, 3]
Note = Callable[[str], None]


# -- the command's settings ----------------------------------------------------------------
class DecomposeSpec(ModelSettings):
    """``hpt decompose``: the model options are every model command's."""

    model: str
    embedding_model: str | None = None
    # The embedding model's endpoint, for an openai:MODEL spec (a tgi:URL names its own).
    embedding_base_url: str | None = None
    questions: Path
    out: Path
    limit: int | None = Field(None, ge=1)
    concurrency: int = Field(8, ge=1)
    params: GenerationParams = Field(
        default_factory=lambda: GenerationParams(temperature=DEFAULT_TEMPERATURE)
    )
    cache: bool = True
    resume: bool = False

    @field_validator("params", mode="before")
    @classmethod
    def _paper_temperature(cls, value: Any) -> Any:
        # A [run] params table or flags that set no temperature get the paper's.
        if isinstance(value, dict) and "temperature" not in value:
            return {**value, "temperature": DEFAULT_TEMPERATURE}
        return value

    def base_url_models(self) -> Sequence[str]:
        return [self.model]


# -- input ---------------------------------------------------------------------------------
NonBlank = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class SourceQuestion(BaseModel):
    """A depth-3 input row. chapter, key_points and explanation are TutorEval's context for
    table 20; rows without them get the plain variant."""

    model_config = ConfigDict(extra="ignore")

    qid: NonBlank
    question: NonBlank
    answer: str | None = None
    domain: str | None = None
    chapter: str | None = None
    key_points: str | list[str] | None = None
    explanation: str | None = None


def load_depth3(path: Path, limit: int | None = None) -> list[tuple[int, SourceQuestion]]:
    """(position, row) for the depth-3 rows of a JSONL file, position counting from 1 in the
    file's depth-3 rows, so ``limit`` only shortens the list and never renumbers it.

    When any row has a ``depth`` field only rows with depth 3 are taken (the hub's
    questions.jsonl holds all three depths); a file without depth fields is taken whole.
    """
    from hpt.tasks.sources import read_jsonl

    if not path.is_file():
        raise DatasetError(f"{path}: no such file; --questions takes a JSONL of questions")
    rows = list(read_jsonl(path))
    has_depth = any("depth" in row for _, row in rows)
    chosen: list[tuple[int, SourceQuestion]] = []
    seen: dict[str, int] = {}
    for lineno, row in rows:
        if has_depth and row.get("depth") != 3:
            continue
        try:
            source = SourceQuestion.model_validate(row)
        except ValidationError as exc:
            raise DatasetError(validation_message(exc, f"{path}:{lineno}", whole="row")) from None
        if source.qid in seen:
            raise DatasetError(
                f"{path}:{lineno}: duplicate qid {source.qid!r} (first on line {seen[source.qid]})"
            )
        seen[source.qid] = lineno
        chosen.append((len(chosen) + 1, source))
    if not chosen:
        which = "depth-3 rows (depth = 3)" if has_depth else "rows"
        raise DatasetError(f"{path}: no {which} to decompose")
    return chosen[:limit] if limit else chosen


# -- the model's JSON ----------------------------------------------------------------------
class _QuestionList(BaseModel):
    questions: list[NonBlank] = Field(min_length=1)


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def parse_questions(reply: str, keys: Sequence[str]) -> list[str] | str:
    """The question list of a reply such as ``{"Depth-2_questions": [...]}``, or what is wrong.

    The object may sit in a code fence or among prose. A Python-style literal with single
    quotes is read too: the prompts' own examples are written that way, and models copy them.
    """
    fenced = _FENCE.search(reply)
    text = fenced.group(1) if fenced else reply
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return "no JSON object in the reply"
    block = text[start : end + 1]
    try:
        data: Any = json.loads(block)
    except ValueError:
        try:
            data = ast.literal_eval(block)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return "the reply's object is not valid JSON"
    if not isinstance(data, dict):
        return "the reply's JSON is not an object"
    key = next((k for k in keys if k in data), None)
    if key is None:
        return f"the reply's object has no {' or '.join(map(repr, keys))} list"
    try:
        return _QuestionList.model_validate({"questions": data[key]}).questions
    except ValidationError as exc:
        return f"{key!r} is not a non-empty list of question strings ({exc.errors()[0]['msg']})"


# -- the checkpoint ------------------------------------------------------------------------
def log_lines(path: Path) -> list[str]:
    """The lines of an append-only log this build wrote. A line cut short by an interruption
    is ended (or the next entry would be glued to it and lost); a line that is not UTF-8
    (damaged) is passed over like one that is not JSON. Split at newline bytes only: an
    entry's text may hold other line separators (U+2028)."""
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        with path.open("ab") as fh:
            fh.write(b"\n")
    lines = []
    for line in raw.split(b"\n"):
        try:
            lines.append(line.decode("utf-8"))
        except UnicodeDecodeError:
            continue
    return [line for line in lines if line]


def fingerprint(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


class StateLog:
    """The finished steps, one JSON line each: ``{"step", "key", "input", ...}``.

    ``input`` fingerprints what the step was computed from; ``get`` returns an entry only if
    it matches, so a step whose inputs changed (another --limit, another embedding model)
    runs again. Appended and flushed as each step ends, so an interrupted run keeps them; a
    last line cut short by the interruption is ignored.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[tuple[str, str], dict[str, Any]] = {}
        self.reused = 0
        if path.is_file():
            for line in log_lines(path):
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict) and {"step", "key", "input"} <= entry.keys():
                    self.entries[(str(entry["step"]), str(entry["key"]))] = entry

    def get(self, step: str, key: str, inputs: str) -> dict[str, Any] | None:
        entry = self.entries.get((step, key))
        if entry is None or entry["input"] != inputs:
            return None
        self.reused += 1
        return entry

    def put(self, step: str, key: str, inputs: str, payload: dict[str, Any]) -> dict[str, Any]:
        entry = {"step": step, "key": key, "input": inputs, **payload}
        self.entries[(step, key)] = entry
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
        return entry


@dataclass(frozen=True)
class Asking:
    """What a call asks, as ``decompose_replies.jsonl`` names it: the prompt (its section in
    the prompt file: "d3_answer", "answer", "d2_questions", "d1_questions", "d2_augment",
    "d1_augment"), the item and its question, and the try (from 1)."""

    prompt: str
    item: str
    question: str
    attempt: int = 1

    @property
    def step(self) -> str:
        """How the summary's errors name it: "answer of 2.2", "d2_questions of 1"."""
        return f"{'answer' if self.prompt.endswith('answer') else self.prompt} of {self.item}"


class ReplyLog:
    """Every reply the build read, one JSON line each, beside its verdict: ``prompt``,
    ``item``, ``question``, ``attempt``, ``reply`` (the raw text; null when the call failed),
    ``parsed`` (the sub-question list read, before any cut to four, or the reference answer
    taken) and ``error`` (why nothing was taken: "no JSON object in the reply", the failed
    call). Appended as replies come; a rerun that reads a reply again from the response cache
    does not write the same line twice, and steps replayed from the checkpoint read none."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: set[str] = set()
        if path.is_file():
            self._seen = {fingerprint(line) for line in log_lines(path)}

    def put(
        self, asking: Asking, reply: str | None, parsed: str | list[str] | None, error: str | None
    ) -> None:
        line = json.dumps(
            {"prompt": asking.prompt, "item": asking.item, "question": asking.question,
             "attempt": asking.attempt, "reply": reply, "parsed": parsed, "error": error},
            ensure_ascii=False,
        )  # fmt: skip
        key = fingerprint(line)
        if key in self._seen:
            return
        self._seen.add(key)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")


# -- the questions being built ---------------------------------------------------------------
@dataclass
class Item:
    """One generated question where it was generated. ``id`` is its path from the depth-3
    question: ``"3"`` (the third depth-3 row), ``"3.2"`` (its second depth-2 sub-question),
    ``"3.2.1"``, and ``a`` for augmented ones (``"3.a1"``, ``"3.2.a1"``) -- stable across
    reruns, so checkpoints and cache seeds find their step again."""

    id: str
    group: str
    depth: int
    text: str
    parent: str | None = None
    augmented: bool = False
    children: list[str] = field(default_factory=list)


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold().rstrip("?.!").strip()


Similarity = Callable[[Sequence[Item], Sequence[Item]], NDArray[np.float64]]


def exact_similarity(a: Sequence[Item], b: Sequence[Item]) -> NDArray[np.float64]:
    """1 where two questions read the same once normalised, else 0."""
    codes: dict[str, int] = {}
    left = np.array([codes.setdefault(_normalise(i.text), len(codes)) for i in a], dtype=np.int64)
    right = np.array([codes.setdefault(_normalise(i.text), len(codes)) for i in b], dtype=np.int64)
    return np.equal.outer(left, right).astype(np.float64)


def vector_similarity(vectors: dict[str, NDArray[np.float32]]) -> Similarity:
    def similarity(a: Sequence[Item], b: Sequence[Item]) -> NDArray[np.float64]:
        if not a or not b:
            return np.zeros((len(a), len(b)))
        return cosine(np.vstack([vectors[i.id] for i in a]), np.vstack([vectors[i.id] for i in b]))

    return similarity


class Dedup(BaseModel):
    """What deduplication decided. ``removed``: item id -> reason; ``canonical``: each kept
    depth-1/2 item -> the item whose question it uses (itself when not a duplicate)."""

    removed: dict[str, str] = Field(default_factory=dict)
    canonical: dict[str, str] = Field(default_factory=dict)


def _leaders(items: Sequence[Item], sim: NDArray[np.float64], threshold: float) -> list[int]:
    """For each item, the index of its cluster's first item: an item joins the first earlier
    leader at least ``threshold`` similar, else leads its own cluster. Comparing with leaders
    only keeps a chain of near-duplicates from drifting to unrelated questions."""
    leaders: list[int] = []
    out: list[int] = []
    for i in range(len(items)):
        found = next((j for j in leaders if sim[i, j] >= threshold), None)
        if found is None:
            leaders.append(i)
            found = i
        out.append(found)
    return out


def deduplicate(d2: Sequence[Item], d1: Sequence[Item], similarity: Similarity) -> Dedup:
    """The paper's deduplication (appendix A), on the depth-2 and depth-1 questions as
    generated, each list in build order.

    Removals across depths come first, so that no removed question is the one others merge
    into (the paper lists the same-depth step first; the thresholds are its own):

    1. a depth-2 question at least ``D2_LIKE_D1`` similar to any depth-1 question is removed,
       with the depth-1 questions generated from it ("d2 like d1");
    2. depth-2 duplicates (``SAME_DEPTH``): within one depth-3 tree they are siblings, so all
       but the first are removed with their sub-questions ("duplicate"); in other trees they
       keep their node but use the first one's question (DepthQA shares questions between
       nodes: 1699 nodes, 1571 questions on the hub);
    3. a depth-1 question whose similarity to any depth-2 question left is in ``D1_LIKE_D2``
       is removed ("d1 like d2"). The paper's sentence says "to D1 questions", but it gives the
       reason "the D2 question is effectively at D1 level and vice versa", so depth 2 is meant;
    4. depth-1 duplicates (``SAME_DEPTH``) become one question. Within one tree they become one
       node whose successors are every depth-2 question that asked for them (the hub's
       1_d1_n2 -> 1_d2_n1, 1_d2_n2); across trees, nodes sharing the question. Duplicates
       under the same depth-2 question leave it one sub-question short, which augmentation
       fills (the paper's table 5).
    """
    result = Dedup()
    removed = result.removed
    if d2 and d1:
        cross = similarity(d2, d1)
        for i, item in enumerate(d2):
            if cross[i].max() >= D2_LIKE_D1:
                removed[item.id] = "d2 like d1"
    for item in d1:
        if item.parent in removed:
            removed[item.id] = "parent removed"

    kept2 = [i for i in d2 if i.id not in removed]
    leaders = _leaders(kept2, similarity(kept2, kept2), SAME_DEPTH)
    first_in_group: dict[tuple[int, str], str] = {}
    for item, lead in zip(kept2, leaders, strict=True):
        mine = first_in_group.setdefault((lead, item.group), item.id)
        if mine != item.id:
            removed[item.id] = "duplicate"
        else:
            result.canonical[item.id] = kept2[lead].id
    for item in d1:
        if item.id not in removed and item.parent in removed:
            removed[item.id] = "parent removed"

    kept2 = [i for i in d2 if i.id not in removed]
    kept1 = [i for i in d1 if i.id not in removed]
    if kept1 and kept2:
        low, high = D1_LIKE_D2
        cross = similarity(kept1, kept2)
        for i, item in enumerate(kept1):
            if ((cross[i] >= low) & (cross[i] < high)).any():
                removed[item.id] = "d1 like d2"
    kept1 = [i for i in kept1 if i.id not in removed]
    for item, lead in zip(
        kept1, _leaders(kept1, similarity(kept1, kept1), SAME_DEPTH), strict=True
    ):
        result.canonical[item.id] = kept1[lead].id
    return result


# -- summary ---------------------------------------------------------------------------------
class Failure(BaseModel):
    item: str
    question: str
    step: str
    problem: str


class DedupSummary(BaseModel):
    method: Literal["embeddings", "exact-text"]
    embedding_model: str | None
    note: str | None
    thresholds: dict[str, float | list[float]]
    d2_removed_like_d1: int
    d2_duplicates_removed: int
    d2_shared_across_trees: int
    d1_removed_like_d2: int
    d1_removed_with_parent: int
    d1_merged_in_tree: int
    d1_shared_across_trees: int


class GenerationSummary(BaseModel):
    json_replies: int  # sub-question replies read, retries included
    json_retries: int
    json_failures: int
    cut_to_max: int  # lists longer than MAX_CHILDREN, cut to their first four


class CallSummary(BaseModel):
    model_requests: int  # sent to the model by this run
    cache_hits: int  # answered by the response cache
    steps_from_checkpoint: int
    embedding_requests: int
    texts_embedded: int
    embeddings_cached: int


class DecomposeSummary(BaseModel):
    questions: dict[str, int]  # depth -> count
    nodes: dict[str, int]
    edges: int
    shared_questions: int
    dedup: DedupSummary
    augmented: dict[str, int]
    generation: GenerationSummary
    calls: CallSummary
    failures: list[Failure]
    errors: list[str]


# -- the build -------------------------------------------------------------------------------
def _messages(system: str, user: str) -> list[Message]:
    return [Message(role="system", content=system), Message(role="user", content=user)]


def d3_answer_messages(prompts: PromptSet, source: SourceQuestion) -> list[Message]:
    """Table 20 for a row with TutorEval's chapter, key points and explanation; its plain
    variant (the prompt file's adaptation) for a row without them."""
    p = prompts
    if source.chapter and source.key_points and source.explanation:
        points = source.key_points
        if isinstance(points, list):
            points = "\n".join(f"- {k}" for k in points)
        fields = {
            "chapter": source.chapter,
            "question": source.question,
            "key_points": points,
            "explanation": source.explanation,
        }
        return _messages(
            p.text("d3_answer", "system"),
            p.render("d3_answer", p.text("d3_answer", "user"), fields),
        )
    return _messages(
        p.text("d3_answer", "system_plain"),
        p.render("d3_answer", p.text("d3_answer", "user_plain"), {"question": source.question}),
    )


class _Builder:
    def __init__(
        self,
        spec: DecomposeSpec,
        prompts: PromptSet,
        model: ManagedBackend,
        embedder: Embedder | None,
        state: StateLog,
        replies: ReplyLog,
        note: Note,
    ) -> None:
        self.spec = spec
        self.prompts = prompts
        self.model = model
        self.embedder = embedder
        self.state = state
        self.replies = replies
        self.note = note
        self.slots = asyncio.Semaphore(spec.concurrency)
        self.items: dict[str, Item] = {}
        self.sources: dict[str, SourceQuestion] = {}
        # Reference answers by (depth, question text): the same question is answered once.
        self.answers: dict[tuple[int, str], str] = {}
        self.generations: list[dict[str, Any]] = []  # the sub-question steps this graph used
        self.failures: list[Failure] = []
        self.errors: list[str] = []
        self.dedup = Dedup()
        self.augmented = {"2": 0, "1": 0}

    # -- calls -------------------------------------------------------------------------
    async def _call(self, messages: list[Message], seed: str, asking: Asking) -> str | None:
        """The reply, or None after recording a failed call (the run goes on; a rerun tries
        it again). A fatal failure (bad key, unreachable endpoint) stops the run."""
        async with self.slots:
            try:
                completion = await self.model.complete(messages, self.spec.params, cache_seed=seed)
            except FatalBackendError:
                raise
            except BackendError as exc:
                self.errors.append(f"{asking.step}: {exc}")
                self.replies.put(asking, None, None, f"the call failed: {exc}")
                return None
        return completion.text

    async def _answer(self, item: Item) -> None:
        """A reference answer (table 20 for depth 3, 21 otherwise), once per question text."""
        key = (item.depth, item.text)
        if key in self.answers:
            return
        source = self.sources.get(item.id)
        if source is not None and source.answer and source.answer.strip():
            self.answers[key] = source.answer
            return
        if source is not None:
            messages = d3_answer_messages(self.prompts, source)
        else:
            p = self.prompts
            messages = _messages(
                p.text("answer", "system"),
                p.render("answer", p.text("answer", "user"), {"question": item.text}),
            )
        inputs = fingerprint([m.model_dump() for m in messages])
        step_key = fingerprint(item.depth, item.text)
        hit = self.state.get("answer", step_key, inputs)
        if hit is not None:
            self.answers[key] = str(hit["answer"])
            return
        seed = f"depthqa-decompose/answer/{step_key}"
        asking = Asking("d3_answer" if source is not None else "answer", item.id, item.text)
        reply = await self._call(messages, seed, asking)
        if reply is None:
            return
        if not reply.strip():
            self.replies.put(asking, reply, None, EMPTY_REPLY)
            self.errors.append(f"{asking.step}: {EMPTY_REPLY}")
            return
        self.replies.put(asking, reply, reply.strip(), None)
        self.state.put("answer", step_key, inputs, {"item": item.id, "answer": reply.strip()})
        self.answers[key] = reply.strip()

    def answer_of(self, item: Item) -> str | None:
        return self.answers.get((item.depth, item.text))

    async def _subquestions(
        self, parent: Item, section: str, fields: dict[str, str], limit: int
    ) -> list[str] | None:
        """Sub-questions from the model's JSON (tables 23-26), tried ``JSON_ATTEMPTS`` times.

        None when the calls failed (not checkpointed: a rerun asks again); [] when no reply
        was valid JSON of the right shape (checkpointed with the problem: the same seeds would
        get the same replies from the cache)."""
        p = self.prompts
        user = p.render(section, p.text(section, "user"), fields)
        messages = _messages(p.text("generate", "system"), user)
        inputs = fingerprint(section, [m.model_dump() for m in messages], limit)
        hit = self.state.get(section, parent.id, inputs)
        if hit is None:
            keys = p.texts(section, "keys")
            replies = 0
            parsed: list[str] | str = "no reply"
            for attempt in range(JSON_ATTEMPTS):
                seed = f"depthqa-decompose/{parent.id}/{section}/{attempt}"
                asking = Asking(section, parent.id, parent.text, attempt + 1)
                reply = await self._call(messages, seed, asking)
                if reply is None:
                    return None
                replies += 1
                parsed = parse_questions(reply, keys)
                if isinstance(parsed, str):
                    self.replies.put(asking, reply, None, parsed)
                else:
                    self.replies.put(asking, reply, parsed, None)
                    break
            payload: dict[str, Any] = {"replies": replies, "questions": [], "cut": 0}
            if isinstance(parsed, str):
                payload["problem"] = parsed
            else:
                payload["questions"] = parsed[:limit]
                payload["cut"] = max(0, len(parsed) - limit)
            hit = self.state.put(section, parent.id, inputs, payload)
        self.generations.append(hit)
        if hit.get("problem"):
            self.failures.append(
                Failure(item=parent.id, question=parent.text, step=section, problem=hit["problem"])
            )
        return [str(q) for q in hit["questions"]]

    async def _answer_all(self, items: Iterable[Item]) -> None:
        """Answers for ``items``, each distinct question once (two asking at once would
        both miss the cache)."""
        distinct = {(i.depth, i.text): i for i in items}
        await asyncio.gather(*(self._answer(i) for i in distinct.values()))

    # -- steps -------------------------------------------------------------------------
    def _add_children(self, parent: Item, texts: Sequence[str], augmented: bool) -> list[Item]:
        made = []
        for n, text in enumerate(texts, 1):
            suffix = f"a{n}" if augmented else str(n)
            child = Item(
                id=f"{parent.id}.{suffix}",
                group=parent.group,
                depth=parent.depth - 1,
                text=text,
                parent=parent.id,
                augmented=augmented,
            )
            self.items[child.id] = child
            parent.children.append(child.id)
            made.append(child)
        return made

    async def _decompose(self, parent: Item) -> list[Item]:
        """Up to four sub-questions of a depth-3 (table 23) or depth-2 (table 24) question."""
        answer = self.answer_of(parent)
        if answer is None:
            return []
        section = "d2_questions" if parent.depth == 3 else "d1_questions"
        texts = await self._subquestions(
            parent, section, {"question": parent.text, "answer": answer}, MAX_CHILDREN
        )
        return self._add_children(parent, texts or [], augmented=False)

    async def _augment(self, parent: Item, current: list[str], count: int) -> list[Item]:
        answer = self.answer_of(parent)
        if answer is None or count < 1:
            return []
        section = "d2_augment" if parent.depth == 3 else "d1_augment"
        fields = {
            "question": parent.text,
            "answer": answer,
            "current_questions": json.dumps(current, ensure_ascii=False),
            "count": str(count),
        }
        texts = await self._subquestions(parent, section, fields, count)
        return self._add_children(parent, texts or [], augmented=True)

    async def _similarity(self, items: Sequence[Item]) -> Similarity:
        if self.embedder is None:
            return exact_similarity
        vectors = await self.embedder.embed([i.text for i in items])
        return vector_similarity({item.id: vectors[n] for n, item in enumerate(items)})

    async def _deduplicate(self, d2: list[Item], d1: list[Item]) -> Dedup:
        method = f"embeddings:{self.embedder.identity}" if self.embedder else "exact"
        inputs = fingerprint(
            method,
            [SAME_DEPTH, D2_LIKE_D1, list(D1_LIKE_D2)],
            [(i.id, i.depth, i.parent, i.text) for i in [*d2, *d1]],
        )
        hit = self.state.get("dedup", "all", inputs)
        if hit is not None:
            return Dedup.model_validate(hit["result"])
        similarity = await self._similarity([*d2, *d1])
        result = deduplicate(d2, d1, similarity)
        self.state.put("dedup", "all", inputs, {"result": result.model_dump()})
        return result

    async def run(self, sources: list[tuple[int, SourceQuestion]]) -> QuestionGraph:
        roots = []
        for position, source in sources:
            root = Item(id=str(position), group=str(position), depth=3, text=source.question)
            self.items[root.id] = root
            self.sources[root.id] = source
            roots.append(root)

        self.note(f"reference answers for {len(roots)} depth-3 questions")
        await self._answer_all(roots)
        for root in roots:
            if self.answer_of(root) is None:
                self.failures.append(Failure(item=root.id, question=root.text, step="d3_answer",
                                             problem="no reference answer"))  # fmt: skip
        self.note("depth-2 sub-questions (table 23)")
        d2 = [c for cs in await asyncio.gather(*(self._decompose(r) for r in roots)) for c in cs]
        await self._answer_all(d2)
        d2 = [i for i in d2 if self.answer_of(i) is not None]
        self.note(f"depth-1 sub-questions of {len(d2)} depth-2 questions (table 24)")
        d1 = [c for cs in await asyncio.gather(*(self._decompose(i) for i in d2)) for c in cs]

        self.note(
            f"deduplicating {len(d2)} depth-2 and {len(d1)} depth-1 questions"
            + ("" if self.embedder else " by exact text")
        )
        self.dedup = dedup = await self._deduplicate(d2, d1)
        removed, canonical = dedup.removed, dedup.canonical
        d2_ids = {i.id for i in d2}

        # Augmentation: as many new sub-questions as deduplication took, up to four in all.
        def kept_d2(root: Item) -> list[Item]:
            return [self.items[c] for c in root.children if c not in removed and c in d2_ids]

        def d1_questions(parent: Item) -> list[str]:
            # The distinct depth-1 questions a kept depth-2 question now has.
            seen: dict[str, str] = {}
            for c in parent.children:
                if c in removed or c not in canonical:
                    continue
                lead = canonical[c]
                seen.setdefault(lead, self.items[lead].text)
            return list(seen.values())

        d2_jobs = []
        for root in roots:
            made = [c for c in root.children if c in d2_ids]
            kept = kept_d2(root)
            lost = len(made) - len(kept)
            if lost > 0:
                current = [self.items[canonical[k.id]].text for k in kept]
                d2_jobs.append(self._augment(root, current, min(lost, MAX_CHILDREN - len(kept))))
        d1_jobs = []
        for item in d2:
            if item.id in removed:
                continue
            current = d1_questions(item)
            lost = len(item.children) - len(current)
            if lost > 0:
                d1_jobs.append(self._augment(item, current, min(lost, MAX_CHILDREN - len(current))))
        self.note(f"augmenting {len(d2_jobs)} depth-3 and {len(d1_jobs)} depth-2 questions")
        new_d2 = [c for cs in await asyncio.gather(*d2_jobs) for c in cs]
        new_d1 = [c for cs in await asyncio.gather(*d1_jobs) for c in cs]
        await self._answer_all(new_d2)
        new_d2 = [i for i in new_d2 if self.answer_of(i) is not None]
        d1_of_new = [c for cs in await asyncio.gather(*(self._decompose(i) for i in new_d2))
                     for c in cs]  # fmt: skip
        self.augmented = {"2": len(new_d2), "1": len(new_d1)}

        # Depth-1 answers last: one per question left in the graph.
        final_d1 = [self.items[canonical[i.id]] for i in d1 if i.id in canonical]
        final_d1 += new_d1 + d1_of_new
        self.note(f"reference answers for {len({i.text for i in final_d1})} depth-1 questions")
        await self._answer_all(final_d1)
        return self._assemble(roots, d2, new_d2, dedup)

    # -- the graph ---------------------------------------------------------------------
    def _assemble(
        self, roots: list[Item], d2: list[Item], new_d2: list[Item], dedup: Dedup
    ) -> QuestionGraph:
        removed, canonical = dedup.removed, dedup.canonical
        decomposed = {i.id for i in d2}
        added = {i.id for i in new_d2}
        questions: dict[str, DepthQuestion] = {}
        nodes: dict[str, DepthNode] = {}
        node_to_q: dict[str, str] = {}
        qids: dict[str, str] = {}  # question item id -> qid
        taken = {self.sources[r.id].qid for r in roots}
        counters = {1: 0, 2: 0}

        def qid_of(lead: Item, domain: str | None) -> str | None:
            """The question's id, made on first use; None when it has no answer."""
            if lead.id in qids:
                return qids[lead.id]
            answer = self.answer_of(lead)
            if answer is None:
                return None
            if lead.depth == 3:
                qid = self.sources[lead.id].qid
            else:
                while True:
                    counters[lead.depth] += 1
                    qid = f"d{lead.depth}_q{counters[lead.depth]}"
                    if qid not in taken:
                        break
            taken.add(qid)
            qids[lead.id] = qid
            questions[qid] = DepthQuestion(
                qid=qid, depth=lead.depth, domain=domain, question=lead.text, answer=answer
            )
            return qid

        for root in roots:
            g = root.group
            domain = self.sources[root.id].domain
            root_q = qid_of(root, domain)
            if root_q is None:
                continue  # no reference answer: the tree is left out (listed in failures)
            top = DepthNode(nodeid=f"{g}_d3", group=g, depth=3)
            nodes[top.nodeid], node_to_q[top.nodeid] = top, root_q
            d1_nodes: dict[str, DepthNode] = {}  # question item id -> this tree's node
            n2 = 0
            for child in root.children:
                item = self.items[child]
                if child in removed or (child not in decomposed and child not in added):
                    continue
                lead = self.items[canonical.get(child, child)]
                q = qid_of(lead, domain)
                if q is None:
                    continue
                n2 += 1
                mid = DepthNode(nodeid=f"{g}_d2_n{n2}", group=g, depth=2,
                                direct_successors=[top.nodeid])  # fmt: skip
                top.direct_predecessors.append(mid.nodeid)
                nodes[mid.nodeid], node_to_q[mid.nodeid] = mid, q
                for grandchild in item.children:
                    sub = self.items[grandchild]
                    if grandchild in removed:
                        continue
                    if not sub.augmented and child in decomposed and grandchild not in canonical:
                        continue
                    lead1 = self.items[canonical.get(grandchild, grandchild)]
                    q1 = qid_of(lead1, domain)
                    if q1 is None:
                        continue
                    low = d1_nodes.get(lead1.id)
                    if low is None:
                        low = DepthNode(nodeid=f"{g}_d1_n{len(d1_nodes) + 1}", group=g, depth=1)
                        d1_nodes[lead1.id] = low
                        nodes[low.nodeid], node_to_q[low.nodeid] = low, q1
                    if mid.nodeid not in low.direct_successors:
                        low.direct_successors.append(mid.nodeid)
                        mid.direct_predecessors.append(low.nodeid)
        graph = QuestionGraph(questions=questions, nodes=nodes, node_to_q=node_to_q)
        graph.validate()
        return graph

    def summary(self, graph: QuestionGraph, note: str | None) -> DecomposeSummary:
        shape = describe(graph)
        removed = Counter(self.dedup.removed.values())
        canonical = self.dedup.canonical
        d2_shared = sum(1 for k, v in canonical.items()
                        if k != v and self.items[k].depth == 2)  # fmt: skip
        d1_in_tree = sum(1 for k, v in canonical.items() if k != v and self.items[k].depth == 1
                         and self.items[k].group == self.items[v].group)  # fmt: skip
        d1_across = sum(1 for k, v in canonical.items() if k != v and self.items[k].depth == 1
                        and self.items[k].group != self.items[v].group)  # fmt: skip
        replies = sum(int(g.get("replies", 0)) for g in self.generations)
        stats = self.model.stats
        emb = self.embedder.stats if self.embedder else None
        return DecomposeSummary(
            questions={str(d): v["questions"] for d, v in shape["by_depth"].items()},
            nodes={str(d): v["nodes"] for d, v in shape["by_depth"].items()},
            edges=shape["edges"],
            shared_questions=shape["shared"],
            dedup=DedupSummary(
                method="embeddings" if self.embedder else "exact-text",
                embedding_model=self.embedder.label if self.embedder else None,
                note=note,
                thresholds={
                    "same_depth": SAME_DEPTH,
                    "d2_like_d1": D2_LIKE_D1,
                    "d1_like_d2": list(D1_LIKE_D2),
                },
                d2_removed_like_d1=removed["d2 like d1"],
                d2_duplicates_removed=removed["duplicate"],
                d2_shared_across_trees=d2_shared,
                d1_removed_like_d2=removed["d1 like d2"],
                d1_removed_with_parent=sum(
                    1
                    for k, why in self.dedup.removed.items()
                    if why == "parent removed" and self.items[k].depth == 1
                ),
                d1_merged_in_tree=d1_in_tree,
                d1_shared_across_trees=d1_across,
            ),
            augmented=self.augmented,
            generation=GenerationSummary(
                json_replies=replies,
                json_retries=replies - len(self.generations),
                json_failures=len([f for f in self.failures if f.step != "d3_answer"]),
                cut_to_max=sum(1 for g in self.generations if int(g.get("cut", 0)) > 0),
            ),
            calls=CallSummary(
                model_requests=stats.calls,
                cache_hits=stats.cache_hits,
                steps_from_checkpoint=self.state.reused,
                embedding_requests=emb.requests if emb else 0,
                texts_embedded=emb.embedded if emb else 0,
                embeddings_cached=emb.cached if emb else 0,
            ),
            failures=self.failures,
            errors=self.errors,
        )


# -- the output folder -----------------------------------------------------------------------
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
    """Build the graph into ``spec.out``; see the module's docstring."""
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
        builder = _Builder(spec, prompts, model, embedder, state, replies, say)
        graph = await builder.run(sources)
        summary = builder.summary(graph, None if embedder else EXACT_NOTE)
    await asyncio.to_thread(write_graph_dir, graph, spec.out)
    await asyncio.to_thread(
        (spec.out / SUMMARY_FILE).write_text, summary.model_dump_json(indent=2), "utf-8"
    )
    return summary
