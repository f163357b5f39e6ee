"""The structured-prompting methods of "Structured prompting enables more robust evaluation
of language models" (DSPy-HELM) as strategies, each usable alone or as a ladder level:

- ``helm_baseline``: HELM's fixed zero-shot prompt (the ``[helm_baseline]`` section);
- ``dspy_predict`` / ``dspy_cot``: zero-shot dspy.Predict / dspy.ChainOfThought seeded with
  HELM's instruction (the ``[dspy]`` section), in DSPy's ChatAdapter format;
- ``dspy_bfrs`` / ``dspy_mipro``: that program optimised by BootstrapFewShotWithRandomSearch
  / MIPROv2 once per dataset x model on a train/validation split of the task's training pool
  (never the test set), with the task's own check as the metric; every test sample then runs
  the optimised program.

The completion a task checks is DSPy's prediction, the program's output field (after DSPy's
JSON fallback where its chat format did not parse; no prediction: unresolved). Every model
call -- the optimisers' too -- goes through hpt's backend (limits, retries, cache;
hpt.structured.engine). Optimised programs are saved as DSPy JSON in ``RUN/programs/`` with a
``.meta.json`` (the optimisation's calls made and failed, and tokens) and reused on ``--resume``;
``--program STRATEGY=FILE`` loads a saved program instead of optimising.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from hpt.graphs.strategies import (
    Needs,
    NoAnswer,
    StrategyContext,
    UnknownStrategyError,
    strategy,
)
from hpt.results.records import Reading
from hpt.structured.engine import (
    EVALUATION,
    JSON_FALLBACK,
    EngineBinding,
    Meter,
    adapter_labels,
    backend_error_in,
    import_dspy,
    parse_error_in,
)
from hpt.structured.engine import make_lm as _make_lm
from hpt.structured.optimise import (
    BfrsParams,
    MiproParams,
    OptimisationJob,
    Optimiser,
    OptimiserParams,
    read_meta,
    write_outcome,
)
from hpt.structured.programs import (
    SECTION,
    DspySpec,
    Module,
    build_program,
    load_program,
    load_program_state,
    program_summary,
)

HELM = "helm_baseline"
# The purposes of DSPy's answering calls: its chat-format request, and the JSON request its
# ChatAdapter falls back to when it cannot parse the reply.
ANSWER = "answer"
FALLBACK = f"{ANSWER} ({JSON_FALLBACK})"
# The first reply's reading by the task, recorded where the adapter fell back.
FIRST_REPLY = "first_reply"


@strategy(HELM, prompt_section=HELM)
async def helm_baseline(ctx: StrategyContext) -> str:
    """HELM's fixed zero-shot prompt: ``user`` (and an optional ``system``)."""
    messages = []
    if ctx.task.prompts.optional_text(HELM, "system") is not None:
        messages.append(ctx.message(HELM, "system", "system"))
    messages.append(ctx.message(HELM, "user"))
    return await ctx.ask(messages)


# The cell's program, the signature it answers with, and the notes its attempts carry.
Prepared = tuple[Any, DspySpec, dict[str, str]]


def _describe(meta: dict[str, Any]) -> str:
    u = meta.get("optimisation") or {}
    prompt, completion = u.get("prompt_tokens", 0), u.get("completion_tokens", 0)
    failed = f", {u['failed_calls']} failed calls" if u.get("failed_calls") else ""
    return (
        f"{meta.get('optimiser')}: {u.get('calls', 0)} calls ({u.get('cached_calls', 0)} "
        f"cached){failed}, {prompt + completion} tokens ({prompt} prompt + {completion} "
        f"completion)"
    )


async def _prepare(
    ctx: StrategyContext, name: str, module: Module, optimiser: Optimiser | None
) -> Prepared:
    """The cell's program for ``name`` and the notes every attempt with it carries."""
    await asyncio.to_thread(import_dspy)  # its first import takes a second: not on the loop
    spec = DspySpec.of(ctx.task)
    run = ctx.run
    program = build_program(spec, module)
    given = run.given_program(name) if run is not None else None
    if given is not None:
        loaded, spec = await asyncio.to_thread(load_program, given, ctx.task, module)
        return loaded, spec, {"program": f"{given} (--program)", **_summary(loaded)}
    if optimiser is None:
        return program, spec, {}
    if run is None:
        raise UnknownStrategyError(f"{name} optimises once per cell and needs a run's runtime")
    file = run.program_file(name)
    meta = read_meta(file) if file is not None else None
    if file is not None and meta is not None:  # a resumed run: the program it optimised
        await asyncio.to_thread(load_program_state, program, file, spec)
        return program, spec, {"program": str(file), "optimisation": _describe(meta),
                               **_summary(program)}  # fmt: skip
    params = ctx.params_as(BfrsParams if optimiser == "bfrs" else MiproParams)
    assert isinstance(params, OptimiserParams)
    job = OptimisationJob(
        strategy=name,
        optimiser=optimiser,
        params=params,
        task=ctx.task,
        spec=spec,
        model=ctx.model,
        prompt_model=run.prompt_model or ctx.model,
        gen_params=ctx.params,
        meter=run.meter(name),
        where=f"{name} on {run.dataset} × {run.model}",
        seed=f"dspy/{name}/{run.dataset}#{run.epoch}",
        out=run.store.out,
    )
    optimised = await job.run()
    notes = _summary(optimised)
    if file is None:
        return optimised, spec, {"optimisation": _describe(job.meta(Path(name))), **notes}
    meta = await asyncio.to_thread(write_outcome, job, optimised, file)
    return optimised, spec, {"program": str(file), "optimisation": _describe(meta), **notes}


def _summary(program: Any) -> dict[str, str]:
    s = program_summary(program)
    return {"demos": str(s["demos"])}


async def _program(
    ctx: StrategyContext, name: str, module: Module, optimiser: Optimiser | None
) -> Prepared:
    if ctx.run is None:
        return await _prepare(ctx, name, module, optimiser)
    return await ctx.run.once(name, lambda: _prepare(ctx, name, module, optimiser))


async def _answer(
    ctx: StrategyContext, name: str, module: Module, optimiser: Optimiser | None = None
) -> str:
    """DSPy's prediction: the program's output field, as the paper's pipeline scores it.

    When DSPy's ChatAdapter cannot parse a reply it asks again for JSON (its JSONAdapter
    fallback), and the prediction is what that second reply parses to. Both calls are
    recorded; the first reply, read by the task, is kept as the "first_reply" reading. When
    neither reply parses, DSPy has no prediction: ``NoAnswer`` (unresolved), never the raw
    fallback text read as if it were an answer."""
    program, spec, notes = await _program(ctx, name, module, optimiser)
    ctx.notes.update(notes)
    meter = ctx.run.meter(name) if ctx.run is not None else Meter()
    binding = EngineBinding(ctx.model, asyncio.get_running_loop(), ctx.params, ctx.cache_seed,
                            EVALUATION, meter, purpose=ANSWER, calls=ctx.calls)  # fmt: skip
    dspy = import_dspy()
    first = len(ctx.calls)
    failure: BaseException | None = None
    try:
        with dspy.context(lm=_make_lm(binding), adapter=dspy.ChatAdapter(),
                          callbacks=[adapter_labels(binding)]):  # fmt: skip
            prediction = await program.acall(**spec.render(ctx.task, ctx.sample))
    except Exception as exc:
        backend = backend_error_in(exc)
        if backend is not None:
            raise backend from None
        failure = parse_error_in(exc)
        if failure is None:
            raise
    calls = ctx.calls[first:]
    fell_back = any(c.purpose == FALLBACK for c in calls)
    if fell_back:
        reply = next(c.completion for c in calls if c.purpose == ANSWER)
        ctx.alternatives[FIRST_REPLY] = await _reading(ctx, field_text(reply, spec.output))
    if failure is not None:
        raise NoAnswer(_no_prediction(failure, fell_back)) from None
    if fell_back:
        ctx.notes["dspy"] = ("DSPy's chat adapter could not parse the first reply; the answer "
                             "is what its JSON fallback reply parsed to")  # fmt: skip
    answer = prediction.get(spec.output)
    return "" if answer is None else str(answer)


async def _reading(ctx: StrategyContext, text: str) -> Reading:
    """``text`` read by the task's own reader (never an extractor model)."""
    check = await ctx.task.acheck(ctx.sample, text, ctx.shared_seed)
    ctx.calls.extend(check.calls)  # a judge's calls belong to the attempt it judged
    return Reading(parsed=check.parsed, resolved=check.resolved)


def _no_prediction(error: BaseException, fell_back: bool) -> str:
    """Why DSPy gave no prediction, from its AdapterParseError."""
    signature = getattr(error, "signature", None)
    parsed = getattr(error, "parsed_result", None)
    wanted = list(getattr(signature, "output_fields", {}) or {})
    if isinstance(parsed, dict) and wanted:
        missing = [f for f in wanted if f not in parsed]
        why = f"it has no {', '.join(missing)} field" if missing else "a field did not parse"
    else:
        message = str(getattr(error, "message", "") or error).strip()
        why = message.splitlines()[0] if message else type(error).__name__
    which = ("DSPy could not parse the reply in its chat format nor the JSON fallback reply"
             if fell_back else "DSPy could not parse the reply")  # fmt: skip
    return f"no prediction: {which} ({why.rstrip('.')})"


_MARKER = re.compile(r"^\s*\[\[\s*##\s*(\w+)\s*##\s*\]\]\s*$", re.MULTILINE)


def field_text(reply: str, output: str) -> str:
    """A DSPy-format reply's ``output`` section ("[[ ## answer ## ]]\nC" -> "C"), else the
    reply with the field-marker lines taken out."""
    marks = list(_MARKER.finditer(reply))
    for i, m in enumerate(marks):
        if m.group(1) == output:
            end = marks[i + 1].start() if i + 1 < len(marks) else len(reply)
            return reply[m.end() : end].strip()
    return _MARKER.sub("", reply).strip()


@strategy("dspy_predict", prompt_section=SECTION, needs=Needs(program=True))
async def dspy_predict(ctx: StrategyContext) -> str:
    """Zero-shot dspy.Predict seeded with HELM's instruction (the paper's Zero-Shot Predict)."""
    return await _answer(ctx, "dspy_predict", "predict")


@strategy("dspy_cot", prompt_section=SECTION, needs=Needs(program=True))
async def dspy_cot(ctx: StrategyContext) -> str:
    """Zero-shot dspy.ChainOfThought (the paper's Zero-Shot CoT)."""
    return await _answer(ctx, "dspy_cot", "cot")


@strategy("dspy_bfrs", BfrsParams, prompt_section=SECTION, needs=Needs(program=True))
async def dspy_bfrs(ctx: StrategyContext) -> str:
    """BootstrapFewShotWithRandomSearch, once per dataset x model (K <= 3 demos)."""
    return await _answer(ctx, "dspy_bfrs", ctx.params_as(BfrsParams).module, "bfrs")


@strategy(
    "dspy_mipro", MiproParams, prompt_section=SECTION, needs=Needs(program=True, prompt_model=True)
)
async def dspy_mipro(ctx: StrategyContext) -> str:
    """MIPROv2 (auto="light" by default), once per dataset x model; --prompt-model sets the
    instruction proposer."""
    return await _answer(ctx, "dspy_mipro", ctx.params_as(MiproParams).module, "mipro")
