"""BootstrapFewShotWithRandomSearch and MIPROv2 over a task's training pool.

An optimisation runs DSPy's synchronous optimiser in a worker thread (``asyncio.to_thread``)
while every LM call it makes -- from that thread or DSPy's own worker threads -- runs on
hpt's event loop through the backend (engine.py). Its calls and tokens are counted under the
"optimisation" phase, apart from the evaluation of the test samples.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hpt.backends import Backend, FatalBackendError, GenerationParams
from hpt.backends.errors import BudgetSpent
from hpt.errors import StorageError, in_chain
from hpt.results.records import Call
from hpt.structured.engine import (
    OPTIMISATION,
    EngineBinding,
    Meter,
    PhaseUsage,
    backend_error_in,
    dspy_module,
    import_dspy,
    make_lm,
    parse_error_in,
)
from hpt.structured.programs import DspySpec, Module, build_program, examples, save_program, split
from hpt.structured.runtime import OptimisationError
from hpt.tasks import Sample, Task

PROGRAM_ROLE = "program"
PROPOSER_ROLE = "propose"


class OptimiserParams(BaseModel):
    """Settings every optimiser shares: the program it optimises and the data split."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # The program optimised: ChainOfThought (as the paper's optimised programs) or Predict.
    module: Module = "cot"
    # The split of Task.load_train_pool(): train (bootstrapping) vs validation (scoring).
    train_fraction: float = Field(0.9, gt=0.0, lt=1.0)
    split_seed: int = 42
    # Use at most this many pool samples (after the seeded shuffle); None: all of them.
    pool_limit: int | None = Field(None, ge=2)
    max_bootstrapped_demos: int = Field(3, ge=0)
    max_labeled_demos: int = Field(3, ge=0)
    # DSPy's worker threads; the backend's own limits still cap calls in flight.
    num_threads: int = Field(8, ge=1)
    # Failed program runs DSPy tolerates before it gives up (None: DSPy's default, 10).
    max_errors: int | None = Field(None, ge=1)
    # The share of the optimisation's model calls that may fail (after the backend's own
    # retries) before it stops instead of saving a program. DSPy scores a failed call as a
    # wrong answer (or drops its example) and carries on, so each one skews the scores the
    # program is chosen by. 0.1 lets through the odd request a server refuses for good (a
    # demo set past the context window, a content filter); a failing endpoint stops.
    max_failed_share: float = Field(0.1, ge=0.0, le=1.0)


class BfrsParams(OptimiserParams):
    # Random demo sets tried, besides DSPy's three fixed candidates (zero-shot, labelled
    # only, unshuffled bootstrap). DSPy's default is 16; a small default keeps runs cheap.
    num_candidate_programs: int = Field(4, ge=1)


class MiproParams(OptimiserParams):
    auto: Literal["light", "medium", "heavy"] | None = "light"
    # With auto unset (null), both are needed.
    num_candidates: int | None = Field(None, ge=1)
    num_trials: int | None = Field(None, ge=1)
    minibatch: bool = True
    minibatch_size: int = Field(35, ge=1)
    seed: int = 9
    init_temperature: float = Field(1.0, ge=0.0, le=2.0)

    @model_validator(mode="after")
    def _budget(self) -> MiproParams:
        given = self.num_candidates is not None or self.num_trials is not None
        if self.auto is not None and given:
            raise ValueError("num_candidates/num_trials need auto=null (auto sets them)")
        if self.auto is None and (self.num_candidates is None or self.num_trials is None):
            raise ValueError("with auto=null, set both num_candidates and num_trials")
        return self


Optimiser = Literal["bfrs", "mipro"]
OPTIMISER_NAMES = {"bfrs": "BootstrapFewShotWithRandomSearch", "mipro": "MIPROv2"}


@dataclass
class ParseCounts:
    calls: int = 0
    failures: int = 0
    first: str | None = None


@dataclass
class _Watch:
    lock: threading.Lock = field(default_factory=threading.Lock)
    roles: dict[str, str] = field(default_factory=dict)
    counts: dict[str, ParseCounts] = field(default_factory=dict)


def _parse_watch() -> Any:
    """A DSPy callback counting, per role (the program vs the instruction proposer), the
    Predict calls and those whose reply DSPy could not parse. DSPy's proposer swallows
    such failures (it carries on without a data summary or program description); this sees
    them."""
    dspy = import_dspy()
    base_callback: Any = dspy_module("utils.callback").BaseCallback
    parse_error = dspy_module("utils.exceptions").AdapterParseError

    class ParseWatch(base_callback):  # type: ignore[misc]
        def __init__(self) -> None:
            self.watch = _Watch()

        def on_module_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
            if not isinstance(instance, dspy.Predict):
                return
            binding = getattr(getattr(dspy.settings.lm, "_engine_spec", None), "binding", None)
            if binding is not None:
                with self.watch.lock:
                    self.watch.roles[call_id] = binding.purpose

        def on_module_end(
            self, call_id: str, outputs: Any | None, exception: Exception | None = None
        ) -> None:
            with self.watch.lock:
                role = self.watch.roles.pop(call_id, None)
                if role is None:
                    return
                counts = self.watch.counts.setdefault(role, ParseCounts())
                counts.calls += 1
                if isinstance(exception, parse_error):
                    counts.failures += 1
                    counts.first = counts.first or _short(exception)

    return ParseWatch()


def _short(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class OptimisationJob:
    """One optimisation of one cell's program; ``run()`` returns the optimised program."""

    strategy: str
    optimiser: Optimiser
    params: OptimiserParams
    task: Task
    spec: DspySpec
    model: Backend
    prompt_model: Backend
    gen_params: GenerationParams
    meter: Meter
    where: str  # "dspy_mipro on gsm8k × openai:gpt-4o", for messages
    seed: str
    out: Path | None = None  # the run directory, for the resume command in messages
    calls: list[Call] = field(default_factory=list)
    train_size: int = 0
    val_size: int = 0
    parse_counts: dict[str, ParseCounts] = field(default_factory=dict)

    @property
    def prompt_params(self) -> GenerationParams:
        """What the instruction proposer is asked with (before DSPy's own settings)."""
        return self.gen_params.without_reasoning()

    def _split(self) -> tuple[list[Sample], list[Sample]]:
        pool = self.task.load_train_pool()
        train, val = split(pool, self.params.train_fraction, self.params.split_seed,
                           self.params.pool_limit)  # fmt: skip
        if not train or not val:
            raise OptimisationError(
                f"{self.where}: the training pool has {len(pool)} sample(s); the optimiser "
                f"needs at least 2 (a train and a validation split)"
            )
        return train, val

    async def run(self) -> Any:
        train, val = await asyncio.to_thread(self._split)
        self.train_size, self.val_size = len(train), len(val)
        loop = asyncio.get_running_loop()

        def bind(backend: Backend, purpose: str, params: GenerationParams) -> EngineBinding:
            return EngineBinding(backend, loop, params, self.seed, OPTIMISATION, self.meter,
                                 purpose=purpose, calls=self.calls)  # fmt: skip

        # DSPy logs every trial at INFO, over the run's live display, and every failed call
        # at ERROR; hpt reports the optimisation itself (calls, failures, tokens, the
        # program's file) and stops, in one line, when too many calls failed.
        logging.getLogger("dspy").setLevel(logging.CRITICAL)
        program_binding = bind(self.model, PROGRAM_ROLE, self.gen_params)
        # The proposer is an instrument, as a judge is: the run's settings without the
        # cell's reasoning ones, whatever model it is (the runner checks it so at the start).
        proposer_binding = bind(self.prompt_model, PROPOSER_ROLE, self.prompt_params)
        try:
            program = await asyncio.to_thread(
                self._compile, make_lm(program_binding), make_lm(proposer_binding), train, val
            )
        except Exception as exc:
            # A call the budget refused, first: whatever DSPy made of it (a wrong answer,
            # a cancelled evaluation), the optimisation is abandoned with the climb.
            program_binding.raise_refused()
            proposer_binding.raise_refused()
            if isinstance(exc, FatalBackendError | BudgetSpent):
                raise
            raise self._failure(exc) from None
        finally:
            program_binding.closed.set()
            proposer_binding.closed.set()
        # DSPy may also finish on calls the budget refused: no program chosen on them.
        program_binding.raise_refused()
        proposer_binding.raise_refused()
        self._check_failures()
        self._check_parses()
        return program

    def _compile(self, lm: Any, prompt_lm: Any, train: Sequence[Sample],
                 val: Sequence[Sample]) -> Any:  # fmt: skip
        dspy = import_dspy()
        by_inputs = {tuple(self.spec.render(self.task, s).values()): s for s in [*train, *val]}
        spec, task = self.spec, self.task

        def metric(example: Any, prediction: Any, trace: Any = None) -> bool:
            sample = by_inputs.get(tuple(example[name] for name in spec.inputs))
            answer = getattr(prediction, spec.output, None) if prediction is not None else None
            if sample is None or not isinstance(answer, str):
                return False
            return task.check(sample, answer).resolved

        student = build_program(self.spec, self.params.module)
        trainset = examples(self.task, self.spec, train)
        valset = examples(self.task, self.spec, val)
        watch = _parse_watch()
        p = self.params
        try:
            with dspy.context(lm=lm, adapter=dspy.ChatAdapter(), callbacks=[watch]):
                if isinstance(p, BfrsParams):
                    bfrs = dspy.BootstrapFewShotWithRandomSearch(
                        metric=metric,
                        max_bootstrapped_demos=p.max_bootstrapped_demos,
                        max_labeled_demos=p.max_labeled_demos,
                        num_candidate_programs=p.num_candidate_programs,
                        num_threads=p.num_threads,
                        max_errors=p.max_errors,
                    )
                    return bfrs.compile(student, trainset=trainset, valset=valset)
                assert isinstance(p, MiproParams)
                mipro = dspy.MIPROv2(
                    metric=metric,
                    prompt_model=prompt_lm,
                    task_model=lm,
                    max_bootstrapped_demos=p.max_bootstrapped_demos,
                    max_labeled_demos=p.max_labeled_demos,
                    auto=p.auto,
                    num_candidates=p.num_candidates,
                    num_threads=p.num_threads,
                    max_errors=p.max_errors,
                    seed=p.seed,
                    init_temperature=p.init_temperature,
                    verbose=False,
                    track_stats=False,
                )
                return mipro.compile(
                    student,
                    trainset=trainset,
                    valset=valset,
                    num_trials=p.num_trials,
                    minibatch=p.minibatch and len(valset) > p.minibatch_size,
                    minibatch_size=p.minibatch_size,
                )
        finally:
            self.parse_counts = dict(watch.watch.counts)

    def _unparseable(self, role: str, counts: ParseCounts) -> OptimisationError:
        if role == PROPOSER_ROLE:
            who = f"the prompt model ({self.prompt_model.name})"
            fix = ("a small model cannot write DSPy's field format; name a stronger model "
                   "with --prompt-model")  # fmt: skip
        else:
            who = f"the evaluated model ({self.model.name})"
            fix = ("the model cannot follow DSPy's field format; use a stronger model, or "
                   "dspy_predict/dspy_cot/helm_baseline, which need no optimisation")  # fmt: skip
        return OptimisationError(
            f"{self.where}: {who} wrote {counts.failures} of {counts.calls} replies that DSPy "
            f"could not parse in its field format ([[ ## field ## ]] sections), so "
            f"{OPTIMISER_NAMES[self.optimiser]} cannot optimise the program ({counts.first}). "
            f"Not falling back to the unoptimised program: {fix}."
        )

    def _check_parses(self) -> None:
        # DSPy goes on past a proposal it cannot parse; only when none parsed is the
        # "optimised" instruction the seed one, which must not pass for an optimisation.
        # Partial failures are counted in the program's meta file.
        proposer = self.parse_counts.get(PROPOSER_ROLE)
        if proposer is not None and proposer.calls and proposer.failures == proposer.calls:
            raise self._unparseable(PROPOSER_ROLE, proposer)
        program = self.parse_counts.get(PROGRAM_ROLE)
        if program is not None and program.calls and program.failures == program.calls:
            raise self._unparseable(PROGRAM_ROLE, program)

    def _failed_calls(self, verdict: str) -> OptimisationError:
        usage = self.meter.usage(OPTIMISATION)
        first = self.meter.first_failure(OPTIMISATION)
        # --resume keeps the spec (no --strategy-arg): a larger share means a new run.
        resume = f" and continue with: hpt run --resume {self.out}" if self.out else ""
        return OptimisationError(
            f"{self.where}: {usage.failed_calls} of {usage.made} model calls failed during "
            f"optimisation, {verdict}; no program is saved (first failure: {first}). Fix what "
            f"fails{resume}; or start a new run that allows more with --strategy-arg "
            f"{self.strategy}.max_failed_share=SHARE"
        )

    def _check_failures(self) -> None:
        # A program chosen on failed calls would pass for an optimised one: not saved.
        usage = self.meter.usage(OPTIMISATION)
        limit = self.params.max_failed_share
        if usage.failed_calls and usage.failed_calls > limit * usage.made:
            raise self._failed_calls(
                f"more than max_failed_share={limit:g} ({usage.failed_calls / usage.made:.0%})"
            )

    def _failure(self, exc: Exception) -> BaseException:
        # The run's budget refused a call: the climb is abandoned, not failed.
        refused = in_chain(exc, BudgetSpent)
        if refused is not None:
            return refused
        backend = backend_error_in(exc)
        if isinstance(backend, FatalBackendError):
            return backend
        if backend is not None and self.meter.usage(OPTIMISATION).failed_calls:
            # The real cause, whatever else failed to parse.
            return self._failed_calls(f"and {OPTIMISER_NAMES[self.optimiser]} gave up")
        if backend is not None:  # refused before it was sent
            return OptimisationError(
                f"{self.where}: a model call failed during optimisation: {backend}"
            )
        for role in (PROPOSER_ROLE, PROGRAM_ROLE):
            counts = self.parse_counts.get(role)
            if counts is not None and counts.failures:
                return self._unparseable(role, counts)
        if parse_error_in(exc) is not None:
            return self._unparseable(PROGRAM_ROLE, ParseCounts(1, 1, _short(exc)))
        return OptimisationError(
            f"{self.where}: {OPTIMISER_NAMES[self.optimiser]} failed: "
            f"{type(exc).__name__}: {_short(exc)}"
        )

    def meta(self, program_file: Path) -> dict[str, Any]:
        usage: PhaseUsage = self.meter.usage(OPTIMISATION)
        failures = {
            "made": usage.made,
            "failed": usage.failed_calls,
            "max_failed_share": self.params.max_failed_share,
            "first": self.meter.first_failure(OPTIMISATION),
        }
        return {
            "strategy": self.strategy,
            "optimiser": OPTIMISER_NAMES[self.optimiser],
            "program": program_file.name,
            "model": self.model.name,
            "prompt_model": self.prompt_model.name,
            "params": self.params.model_dump(mode="json"),
            "train_size": self.train_size,
            "val_size": self.val_size,
            "optimisation": usage.model_dump(),
            # Model calls made (answered or failed after the backend's retries) and failed.
            "failures": failures,
            "parses": {k: vars(v) for k, v in self.parse_counts.items()},
            "created_at": datetime.now().isoformat(timespec="seconds"),
        }


def meta_file(program_file: Path) -> Path:
    return program_file.with_name(program_file.stem + ".meta.json")


def calls_file(program_file: Path) -> Path:
    return program_file.with_name(program_file.stem + ".calls.jsonl")


def write_outcome(job: OptimisationJob, program: Any, program_file: Path) -> dict[str, Any]:
    """The program, its meta (calls/tokens of the optimisation) and its calls' traces; the
    meta is written last, so a program with a meta file is complete. A write the storage
    refuses stops the run (``StorageError``): an optimisation that cannot be kept is paid for
    again on every resume."""
    try:
        save_program(program, program_file)
        with calls_file(program_file).open("w", encoding="utf-8") as out:
            for call in job.calls:
                out.write(call.model_dump_json() + "\n")
        meta = job.meta(program_file)
        meta_file(program_file).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        for partial in (meta_file(program_file), calls_file(program_file)):
            partial.unlink(missing_ok=True)  # no meta: the program is not complete
        raise StorageError("an optimised program", program_file, exc) from exc
    return meta


def read_meta(program_file: Path) -> dict[str, Any] | None:
    """The meta of a complete saved program, or None if there is none (or it is torn)."""
    try:
        meta = json.loads(meta_file(program_file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and program_file.is_file() else None
