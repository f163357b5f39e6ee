"""What a task is: its samples, its prompts' fields, and what "resolved" means."""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hpt.backends import Backend, GenerationParams
from hpt.errors import HptError, validation_message
from hpt.prompts import FieldValue, PromptSet
from hpt.results.info import ReportTable, TaskInfo
from hpt.results.penalties import UNSTATED, PenaltySource
from hpt.results.records import Attempt, Call, Reading, Verdict
from hpt.tasks import tables
from hpt.tasks.cutoff import CUT_OFF, Whole, noted, whole_part


class DatasetError(HptError, ValueError):
    """The data could not be read: missing file, malformed row, unreachable hub."""


class TaskArgError(HptError, ValueError):
    """A task argument (--task-arg, [run.task_args]) the dataset does not take, or a value it
    refuses."""


class NoArgs(BaseModel):
    """The arguments of a task that takes none."""

    model_config = ConfigDict(extra="forbid")


class Sample(BaseModel):
    id: str
    # Values for the prompt templates' placeholders.
    fields: dict[str, FieldValue]
    # The gold answer in the task's normal form ("True", "42", "B").
    target: str
    # The gold answer as shown in a three-shot exemplar (a worked solution for GSM8K).
    shown_answer: str | None = None
    meta: dict[str, str] = Field(default_factory=dict)


class Check(BaseModel):
    """The task's verdict on one completion."""

    parsed: str | None
    resolved: bool
    # Why, where the task can say more than the parsed answer (a failing test, a timeout).
    detail: str | None = None
    # A graded score on a 0-1 scale, for tasks resolved by a threshold (BLEU, ROUGE-L).
    score: float | None = None
    # Other readings of the same completion by name ("strict": GSM8K's stated-answer-only
    # reader; "rule": the rule reader when an LLM extractor decides). They never decide the
    # climb; summaries report how often they disagree, so a user sees how much reading matters.
    alternatives: dict[str, Reading] = Field(default_factory=dict)
    # Tasks checked by a judge model: its verdict, and the calls it took (recorded in the
    # attempt like the strategy's own).
    verdict: Verdict | None = None
    calls: list[Call] = Field(default_factory=list)
    # What the attempt should carry about how it was checked (HumanEval: the sandbox's
    # isolation), kept in the attempt's notes.
    notes: dict[str, str] = Field(default_factory=dict)


class Task(ABC):
    name: ClassVar[str]
    title: ClassVar[str]
    hub_id: ClassVar[str]
    hub_config: ClassVar[str | None] = None
    hub_split: ClassVar[str]
    # HPI_dataset: what an unresolved sample scores beyond the ladder's m levels, and where
    # that value comes from (hpt.results.penalties: TABLE_4 for HPT's human-annotated
    # values, ``borrowed(...)`` or ``convention(...)`` for a stand-in nobody measured). A
    # run saves both in run.json and says once when no human measured it.
    penalty: ClassVar[float]
    penalty_source: ClassVar[PenaltySource] = UNSTATED
    # How reports show the dataset: its kind, headline metric, and the table it joins
    # (``rank`` orders the datasets inside it). Saved in run.json by ``info()``.
    kind: ClassVar[str] = "answer"
    metric: ClassVar[str] = "accuracy"
    report_table: ClassVar[ReportTable] = tables.ANSWERS
    report_rank: ClassVar[int] = 100
    extra_report_tables: ClassVar[tuple[ReportTable, ...]] = ()
    # Where the task's prompt file NAME.toml lives; None: hpt's own templates. A plugin's
    # dataset points it at its package.
    prompt_dir: ClassVar[Path | None] = None
    # The record type its samples are saved as (hpt.results.records: "depth"), if not the
    # plain SampleRecord; ``record_extras`` fills its fields.
    record_kind: ClassVar[str | None] = None
    # Checked by a judge model, which the run binds to each cell (``bind_judge``).
    needs_judge: ClassVar[bool] = False
    # The task's own arguments (--task-arg NAME.FIELD=VALUE, [run.task_args.NAME]): a pydantic
    # model whose fields all have defaults and which forbids others (a misspelt field is an
    # error, not a silent default). A task that declares one takes the validated instance
    # as its constructor's ``args`` and reads it as ``self.args``.
    Args: ClassVar[type[BaseModel]] = NoArgs
    # Generation settings of the dataset's paper, under whatever the run sets.
    default_params: ClassVar[dict[str, Any]] = {}
    # Whether shared/data holds a copy (False: hub only, e.g. HeadQA, MEDEC, MedBullets).
    offline_data: ClassVar[bool] = True
    # How many answers a uniform random guess picks from, where the samples do not list
    # their options (BoolQ: 2); None: the answer is open (a number, code, free text).
    guess_options: ClassVar[int | None] = None

    def __init__(self, data_dir: Path | None = None, *, args: BaseModel | None = None) -> None:
        self.data_dir = data_dir
        self.args = args if args is not None else self.Args()
        self.prompts = PromptSet.load(self.name, self.prompt_dir)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.Args.model_config.get("extra") != "forbid":
            raise TypeError(f"{cls.__name__}.Args must forbid extra fields "
                            f"(model_config = ConfigDict(extra='forbid'))")  # fmt: skip
        required = [n for n, f in cls.Args.model_fields.items() if f.is_required()]
        if required:
            raise TypeError(f"{cls.__name__}.Args: every argument needs a default, "
                            f"not {', '.join(required)}")  # fmt: skip

    @classmethod
    def arguments(cls, given: Mapping[str, Any], where: str = "--task-arg ") -> BaseModel:
        """``given`` (one dataset's --task-arg settings) as the task's ``Args``; a field it
        lacks or a value it refuses is a TaskArgError naming the setting after ``where``
        (the flag, or a config file and its table)."""
        try:
            return cls.Args.model_validate(dict(given))
        except ValidationError as exc:
            fields = ", ".join(cls.Args.model_fields) or "none"
            problem = validation_message(exc, prefix=cls.name)
            raise TaskArgError(f"{where}{problem} (its arguments: {fields})") from None

    @classmethod
    def configured(cls, data_dir: Path | None, given: Mapping[str, Any]) -> Task:
        """The task with its arguments validated from ``given``. One without arguments of its
        own is built as before: its constructor may not take ``args``."""
        args = cls.arguments(given)
        return cls(data_dir) if cls.Args is NoArgs else cls(data_dir, args=args)

    @classmethod
    def info(cls) -> TaskInfo:
        """The dataset as reports see it, without this code."""
        return TaskInfo(
            name=cls.name,
            title=cls.title,
            kind=cls.kind,
            metric=cls.metric,
            rank=cls.report_rank,
            table=cls.report_table,
            extra_tables=cls.extra_report_tables,
        )

    def answer_options(self, sample: Sample) -> int | None:
        """The number of answers a uniform random guess at ``sample`` picks from (its listed
        options: MMLU-Pro's questions have 1 to 10), for the chance level; None where the
        answer is open."""
        listed = sample.fields.get("options")
        return len(listed) if isinstance(listed, list) else self.guess_options

    # -- data ---------------------------------------------------------------------------
    @abstractmethod
    def load_samples(self) -> list[Sample]:
        """All evaluation samples in the dataset's order (blocking I/O: run in a thread)."""

    @abstractmethod
    def load_exemplar_pool(self) -> list[Sample]:
        """Where three-shot exemplars come from (train/dev split)."""

    def load_train_pool(self) -> list[Sample]:
        """The benchmark's training data, for prompt optimisers (DSPy's bootstrapping and
        validation); never evaluated on. By default the exemplar pool."""
        return self.load_exemplar_pool()

    def split_notes(self) -> list[str]:
        """Plain-language notes on any train/validation slice the task carved out of another
        split (and so excluded from evaluation); none by default."""
        return []

    def choose(self, samples: Sequence[Sample], limit: int | None, seed: int) -> list[Sample]:
        """The samples a run with ``--limit`` evaluates (a seeded choice by default)."""
        return select(samples, limit, seed)

    def shard_key(self, sample: Sample) -> str:
        """What places ``sample`` in a shard (--shard) or a Ray worker's chunk: samples of one
        key run in one process. Its id by default; a task whose samples share answers
        (DepthQA's nodes, their predecessors' answers) keeps them together."""
        return sample.id

    def variants(self, strategies: Sequence[str],
                 ladder_given: bool) -> list[tuple[str | None, list[str]]]:  # fmt: skip
        """The task's cells beyond dataset x model x mode x threshold: (variant, ladder)
        pairs. One plain cell with the run's ladder by default; DepthQA adds the modes its
        arguments name."""
        return [(None, list(strategies))]

    def bind_judge(self, judge: Backend, params: GenerationParams) -> None:
        """Give a judged task its judge model (``needs_judge``)."""
        raise NotImplementedError(f"{self.name} is not checked by a judge model")

    def record_extras(self, sample: Sample, attempts: Sequence[Attempt]) -> dict[str, Any]:
        """Fields of the task's own record kind, beyond SampleRecord's."""
        return {}

    def exemplar_ids(self) -> list[str]:
        section = (
            self.prompts.section("three_shot_cot") if self.prompts.has("three_shot_cot") else {}
        )
        ids = section.get("exemplar_ids", [])
        return [str(i) for i in ids]

    def exemplars_for(self, sample: Sample, pool: Sequence[Sample]) -> list[Sample]:
        """The three exemplars shown with ``sample``; by default the prompt file's fixed ids."""
        wanted = self.exemplar_ids()
        by_id = {s.id: s for s in pool if s.id in wanted}
        missing = [i for i in wanted if i not in by_id]
        if missing:
            raise DatasetError(f"{self.name}: exemplar ids not found in the data: {missing}")
        return [by_id[i] for i in wanted]

    def explanation(self, exemplar: Sample) -> str | None:
        if not self.prompts.has("three_shot_cot"):
            return None
        explanations: dict[str, Any] = self.prompts.section("three_shot_cot").get(
            "explanations", {}
        )
        value = explanations.get(exemplar.id)
        return value if isinstance(value, str) else None

    # -- checking -----------------------------------------------------------------------
    @abstractmethod
    def parse(self, completion: str, sample: Sample) -> str | None:
        """The answer stated in the model's completion, or None if there is none to read."""

    def parse_why(self, completion: str, sample: Sample) -> tuple[str | None, str | None]:
        """``parse``'s answer and, when there is none, why, where the reader can say ("conflict:
        D is written with option C's text ..."); by default ``parse`` with no reason."""
        return self.parse(completion, sample), None

    def alternative_readings(self, completion: str, sample: Sample) -> dict[str, str | None]:
        """Readings other than ``parse``'s, by name, recorded beside it (none by default)."""
        return {}

    def same(self, parsed: str, target: str) -> bool:
        return parsed == target

    def reading(self, parsed: str | None, sample: Sample) -> Reading:
        resolved = parsed is not None and self.same(parsed, sample.target)
        return Reading(parsed=parsed, resolved=resolved)

    def check(self, sample: Sample, completion: str) -> Check:
        parsed, why = self.parse_why(completion, sample)
        primary = self.reading(parsed, sample)
        others = self.alternative_readings(completion, sample)
        return Check(
            parsed=primary.parsed,
            resolved=primary.resolved,
            detail=why,
            alternatives={name: self.reading(p, sample) for name, p in others.items()},
        )

    async def acheck(self, sample: Sample, completion: str, cache_seed: str = "") -> Check:
        """The check of ``completion``; tasks that run code or models override it.
        ``cache_seed``: the attempt's seed without the sample's identity, so a judge asked the
        same thing about two samples answers once."""
        return self.check(sample, completion)

    async def acheck_reply(
        self, sample: Sample, completion: str, calls: Sequence[Call], cache_seed: str = ""
    ) -> Check:
        """What the ladder calls: ``acheck`` of ``completion`` as the call that wrote it
        (among ``calls``) ended. An answer task (``kind`` "answer") reads a reply cut off at
        the length limit only up to where it is whole, and nothing of one cut off in a
        repeating loop (hpt.tasks.cutoff); the detail says so. Tasks that score the text
        itself (code, translations, judged answers) read every reply as it came."""
        whole = self.reply_part(completion, calls)
        if whole is None:
            return await self.acheck(sample, completion, cache_seed)
        check = await self.acheck(sample, whole.text, cache_seed)
        return check.model_copy(update={"detail": noted(check.detail, whole.note)})

    def cut_check(self) -> Check | None:
        """What a reply cut off at the token limit scores where the task does not read it
        (it resolves nothing either way): a judged task's own rule, so no judge is asked about
        an unfinished answer. None (the default): it is read as any reply, for the record."""
        return None

    def reply_part(self, completion: str, calls: Sequence[Call]) -> Whole | None:
        """What of ``completion`` an answer task reads when the call that wrote it (among
        ``calls``) was cut off at the length limit: its whole part, "" for a repeating loop
        (hpt.tasks.cutoff). None: the reply is read as it came."""
        if self.kind != "answer":
            return None
        finish = next((c.finish_reason for c in reversed(calls) if c.completion == completion),
                      None)  # fmt: skip
        return whole_part(completion) if finish in CUT_OFF else None


class ReasonedTask(Task):
    """A task whose reader says why it read nothing, where it can: ``parse_why`` is the
    reader, and ``parse`` its answer alone (``check`` calls ``parse_why`` directly)."""

    @abstractmethod
    def parse_why(self, completion: str, sample: Sample) -> tuple[str | None, str | None]: ...

    def parse(self, completion: str, sample: Sample) -> str | None:
        return self.parse_why(completion, sample)[0]


def select(samples: Sequence[Sample], limit: int | None, seed: int) -> list[Sample]:
    """A seeded choice of ``limit`` samples, stable across runs and machines.

    Ranking by a hash of (seed, id) rather than shuffling positions means the same ids are
    chosen whatever the row order, and a larger limit extends a smaller one.
    """
    if limit is None or limit >= len(samples):
        return list(samples)
    return sorted(samples, key=lambda s: _rank(seed, s.id))[:limit]


def in_shard(seed: int, key: str, index: int, count: int) -> bool:
    """Whether a sample of shard key ``key`` (``Task.shard_key``) is in the ``index``-th
    (from 1) of ``count`` shards: by the hash ``--limit`` ranks by, so shards are disjoint,
    together whole, and the same on every machine."""
    return int.from_bytes(_rank(seed, key)[:8], "big") % count == index - 1


def _rank(seed: int, sample_id: str) -> bytes:
    """A sample's place in a seeded order: the same whatever the row order or machine."""
    return hashlib.sha256(f"{seed}:{sample_id}".encode()).digest()


Parts = tuple[list[Sample], list[Sample]]


class CarvedSplit:
    """A task whose training data may be carved out of the split it evaluates (where a copy
    of the data lacks the training split the paper used). ``_carve`` makes (training,
    evaluated) once; ``_carve_note(training)`` says how a carved slice was chosen, or None
    when nothing was carved (the hub's own split was used)."""

    _parts: Parts | None = None

    def _carve(self) -> Parts:
        raise NotImplementedError

    def _carve_note(self, training: list[Sample]) -> str | None:
        raise NotImplementedError

    def _split(self) -> Parts:
        if self._parts is None:
            self._parts = self._carve()
        return self._parts

    def load_samples(self) -> list[Sample]:
        return self._split()[1]

    def load_exemplar_pool(self) -> list[Sample]:
        return self._split()[0]

    def split_notes(self) -> list[str]:
        training, evaluated = self._split()
        note = self._carve_note(training)
        if note is None:
            return []
        total = len(training) + len(evaluated)
        return [f"{note} is training data and is excluded from evaluation "
                f"({total} -> {len(evaluated)})"]  # fmt: skip


def seeded_slice(
    samples: Sequence[Sample], per_group: Mapping[str, int], group: Callable[[Sample], str],
    seed: int, twins: Callable[[Sample], str] | None = None,
) -> tuple[list[Sample], list[Sample]]:  # fmt: skip
    """Split ``samples`` into (slice, rest): from each group (``group(sample)``) about
    ``per_group[name]`` samples, ranked by a hash of (seed, id), as ``select`` ranks.
    Samples with the same ``twins`` key (the same question asked twice in the data) go to
    the same side, so a repeated question never sits in both; a group's slice then holds
    whole sets of twins, as many as fit the count. Deterministic and independent of row
    order; both parts keep the input order."""
    twin_of = twins or (lambda s: s.id)
    sets: dict[str, dict[str, list[Sample]]] = {}
    for s in samples:
        sets.setdefault(group(s), {}).setdefault(twin_of(s), []).append(s)

    chosen: set[str] = set()
    for name, by_twin in sets.items():
        wanted, taken = per_group.get(name, 0), 0
        for key in sorted(by_twin, key=lambda k: _rank(seed, by_twin[k][0].id)):
            if taken >= wanted:
                break
            members = by_twin[key]
            if taken and taken + len(members) > wanted:
                continue
            chosen.update(m.id for m in members)
            taken += len(members)
    return [s for s in samples if s.id in chosen], [s for s in samples if s.id not in chosen]
