"""``hpt annotate``'s pipeline: the representative set a dataset's HPI_dataset is measured on,
each sample as annotators see it, and the LLM annotator that may stand in for a person.

The representative set (HPT appendix A.1): 5% of the evaluated samples, at least one,
chosen by a hash of (seed, id) as ``--limit`` chooses. A dataset with categories (MMLU's
subjects, MMLU-Pro's categories, MedCalc's calculators, ...) is spread over them: every
category gets at least one sample, and otherwise as close to its share of the dataset as
whole samples allow; the set exceeds 5% only when the categories outnumber it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from pydantic import Field, ValidationError

from hpt.backends import Backend, BackendError, GenerationParams, Message, ResponseCache
from hpt.orchestrator.models import ModelBackends, ModelSettings
from hpt.prompts import PromptError, PromptSet
from hpt.results.annotations import annotations_file, append_annotation, read_annotations
from hpt.results.penalties import CRITERIA, Annotation, Scores
from hpt.tasks import Sample, Task, select

FRACTION = 0.05
# The sample field that names a dataset's categories, where it has them. Other datasets are
# spread over ``category`` when every sample carries one.
STRATA = {
    "mmlu": "subject",
    "mmlu_pro": "category",
    "gpqa": "domain",
    "medcalc": "calculator_id",
    "headqa": "category",
    "depthqa": "depth",
}
MODEL_ATTEMPTS = 3
_OBJECT = re.compile(r"\{[^{}]*\}", re.DOTALL)


def stratum_key(task: Task, samples: Sequence[Sample]) -> str | None:
    key = STRATA.get(task.name, "category")
    return key if samples and all(s.meta.get(key) for s in samples) else None


def set_size(population: int, fraction: float) -> int:
    """``fraction`` of the population, rounded half up, at least one."""
    return min(population, max(1, math.floor(population * fraction + 0.5)))


def allocate(sizes: dict[str, int], total: int) -> dict[str, int]:
    """Per category: at least one, otherwise as close to ``total`` x its share of the
    population as whole samples allow (one at a time to the category furthest below its
    quota, or from the one furthest above; ties by name); never more than it holds."""
    population = sum(sizes.values())
    quota = {c: total * n / population for c, n in sizes.items()}
    share = {c: min(n, max(1, math.floor(quota[c]))) for c, n in sizes.items()}
    while sum(share.values()) > total:
        over = [c for c in sorted(sizes) if share[c] > 1]
        if not over:  # more categories than the set has room for: one each
            break
        share[max(over, key=lambda c: share[c] - quota[c])] -= 1
    while sum(share.values()) < total:
        under = [c for c in sorted(sizes) if share[c] < sizes[c]]
        share[max(under, key=lambda c: quota[c] - share[c])] += 1
    return share


@dataclass
class RepresentativeSet:
    dataset: str
    title: str
    # In the order annotators see them: a seeded shuffle, categories mixed.
    samples: list[Sample]
    population: int
    seed: int
    fraction: float
    stratum: str | None = None
    strata: int = 0


def representative_set(task: Task, seed: int = 0, fraction: float = FRACTION) -> RepresentativeSet:
    """Load ``task``'s evaluated samples (blocking) and draw its representative set."""
    samples = task.load_samples()
    total = set_size(len(samples), fraction)
    key = stratum_key(task, samples)
    groups: dict[str, list[Sample]] = {}
    for s in samples:
        groups.setdefault(s.meta[key] if key else "", []).append(s)
    share = allocate({c: len(g) for c, g in groups.items()}, total)
    chosen = [s for c, g in groups.items() for s in select(g, share[c], seed)]
    chosen.sort(key=lambda s: _rank(seed, s.id))
    return RepresentativeSet(task.name, task.title, chosen, len(samples), seed, fraction, key,
                             len(groups) if key else 0)  # fmt: skip


def _rank(seed: int, sample_id: str) -> bytes:
    """The seeded order annotators see the set in (``select``'s ranking)."""
    return hashlib.sha256(f"{seed}:{sample_id}".encode()).digest()


# -- what annotators see -----------------------------------------------------------------
@dataclass(frozen=True)
class Criterion:
    key: str
    name: str
    definition: str


@dataclass(frozen=True)
class Guide:
    """The annotation policy as people and a model annotator see it (annotate.toml)."""

    guidance: str
    criteria: tuple[Criterion, ...]
    prompts: PromptSet


def load_guide() -> Guide:
    prompts = PromptSet.load("annotate")
    table = prompts.section("criteria")
    if tuple(table) != CRITERIA or not all(
        isinstance(table[k], dict) and isinstance(table[k].get("name"), str)
        and isinstance(table[k].get("definition"), str) for k in CRITERIA
    ):  # fmt: skip
        raise PromptError(
            f"{prompts.source}: [criteria] must hold {', '.join(CRITERIA)}, in that order, "
            "each with a name and a definition"
        )
    criteria = tuple(Criterion(k, table[k]["name"], table[k]["definition"]) for k in CRITERIA)
    return Guide(prompts.text("guidance", "text"), criteria, prompts)


@dataclass(frozen=True)
class SampleView:
    """A sample as annotators see it: its fields in order, then the answer the dataset
    gives (a worked solution where it has one)."""

    id: str
    blocks: tuple[tuple[str, str], ...]
    answer: str
    category: str | None = None

    def text(self) -> str:
        parts = [f"{label}:\n{body}" for label, body in self.blocks]
        return "\n\n".join([*parts, f"Reference answer:\n{self.answer}"])


def sample_view(task: Task, sample: Sample, stratum: str | None = None) -> SampleView:
    blocks = []
    for name, value in sample.fields.items():
        body = value if isinstance(value, str) else "\n".join(f"{k}. {t}" for k, t in value)
        blocks.append((name.replace("_", " ").capitalize(), body))
    category = sample.meta.get(stratum) if stratum else None
    return SampleView(sample.id, tuple(blocks), sample.shown_answer or sample.target, category)


# -- the LLM annotator --------------------------------------------------------------------
def parse_scores(reply: str) -> Scores | None:
    """The four scores from a model's reply: the first JSON object that validates."""
    for block in _OBJECT.findall(reply):
        try:
            return Scores.model_validate(json.loads(block))
        except (ValueError, ValidationError):
            continue
    return None


def model_messages(guide: Guide, dataset: str, view: SampleView) -> list[Message]:
    prompts = guide.prompts
    listed = "\n".join(
        prompts.render("annotator", prompts.text("annotator", "criterion"),
                       {"key": c.key, "name": c.name, "definition": c.definition})
        for c in guide.criteria
    )  # fmt: skip
    system = prompts.render("annotator", prompts.text("annotator", "system"),
                            {"guidance": guide.guidance, "criteria": listed})  # fmt: skip
    user = prompts.render("annotator", prompts.text("annotator", "user"),
                          {"dataset": dataset, "sample": view.text()})  # fmt: skip
    return [Message(role="system", content=system), Message(role="user", content=user)]


@dataclass
class ModelOutcome:
    scored: int = 0
    # Samples this annotator had scored before (skipped: a session resumes).
    already: int = 0
    failed: dict[str, str] = field(default_factory=dict)


async def annotate_one(
    backend: Backend, params: GenerationParams, guide: Guide, dataset: str, view: SampleView
) -> tuple[Scores | None, str | None]:
    """(scores, None), or (None, why not) after MODEL_ATTEMPTS unreadable replies."""
    messages = model_messages(guide, dataset, view)
    for attempt in range(MODEL_ATTEMPTS):
        seed = f"annotate:{dataset}:{view.id}:{attempt}"
        try:
            reply = (await backend.complete(messages, params, cache_seed=seed)).text
        except BackendError as exc:
            return None, f"the model call failed: {exc}"
        scores = parse_scores(reply)
        if scores is not None:
            return scores, None
        retry = guide.prompts.text("annotator", "retry")
        messages = [*messages, Message(role="assistant", content=reply),
                    Message(role="user", content=retry)]  # fmt: skip
    return None, f"no four scores from 1 to 5 in {MODEL_ATTEMPTS} replies"


class ModelAnnotatorSpec(ModelSettings):
    """``hpt annotate --annotator-model``: the model options are every model command's."""

    annotator_model: str
    params: GenerationParams = Field(default_factory=GenerationParams)
    concurrency: int = Field(8, ge=1)
    cache: bool = True

    def base_url_models(self) -> Sequence[str]:
        return [self.annotator_model]


def model_annotator_name(spec: ModelAnnotatorSpec) -> str:
    return f"model:{spec.resolve(spec.annotator_model).label}"


async def annotate_with_model(
    spec: ModelAnnotatorSpec, chosen: RepresentativeSet, views: Sequence[SampleView], out: Path
) -> ModelOutcome:
    """Score every sample of the set the model has not scored yet; each annotation is
    appended to ``out``'s file as it arrives."""
    guide = await asyncio.to_thread(load_guide)
    path = annotations_file(out, chosen.dataset)
    name = model_annotator_name(spec)
    seen = await asyncio.to_thread(read_annotations, path)
    done = {a.sample_id for a in seen if a.annotator == name}
    outcome = ModelOutcome(already=sum(v.id in done for v in views))
    slots = asyncio.Semaphore(spec.concurrency)
    async with contextlib.AsyncExitStack() as stack:
        cache = await stack.enter_async_context(ResponseCache()) if spec.cache else None
        backend = await ModelBackends(stack, cache).open(spec.resolve(spec.annotator_model))

        async def one(view: SampleView) -> None:
            async with slots:
                scores, why = await annotate_one(backend, spec.params, guide, chosen.dataset, view)
            if scores is None:
                outcome.failed[view.id] = why or "no scores"
                return
            annotation = Annotation(
                dataset=chosen.dataset, sample_id=view.id, annotator=name, kind="model",
                scores=scores, at=datetime.now().isoformat(timespec="seconds"),
            )  # fmt: skip
            await asyncio.to_thread(append_annotation, path, annotation)
            outcome.scored += 1

        async with asyncio.TaskGroup() as tg:
            for view in views:
                if view.id not in done:
                    tg.create_task(one(view))
    return outcome
