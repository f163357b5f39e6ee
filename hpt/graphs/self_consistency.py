"""Self-consistency (Wang et al., 2023) around any strategy: its answer drawn several times,
and the answer most draws reach.

Not one of the paper's five levels; name it anywhere in ``--strategies``.
``--strategy-arg self_consistency.n=7`` sets how many draws, ``self_consistency.of=role``
which strategy is drawn (zero-shot chain of thought by default). Draw i of the wrapped
strategy is the draw ``index`` i of each of its calls (its own cache entry and, under a fixed
sampling seed, seed + i), so a draw of the zero-shot prompt is recorded as it always was."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, fields

from pydantic import BaseModel, ConfigDict, Field

from hpt.backends import Backend, Completion, GenerationParams, Message
from hpt.graphs.strategies import STRATEGIES, NoAnswer, NoParams, StrategyContext, strategy
from hpt.results.records import Call

SELF_CONSISTENCY_SAMPLES = 5
ANSWER = "answer"  # the purpose of a strategy's answering call (StrategyContext.ask's)


class SelfConsistencyParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # Sampled answers; unset: the dataset's ``samples`` in its prompt file's
    # ``[self_consistency]`` table, else 5.
    n: int | None = Field(None, ge=1, le=100)
    # The strategy whose answer is drawn n times and voted on (run with its defaults).
    of: str = "zero_shot_cot"


@dataclass
class _Draw(StrategyContext):
    """The context of one draw of the wrapped strategy: its calls carry the draw's label
    ("sample 2/5", or "sample 2/5, step 1/3" for a strategy's own purposes)."""

    label: str = ""

    async def draw(
        self,
        messages: list[Message],
        purpose: str = ANSWER,
        model: Backend | None = None,
        *,
        params: GenerationParams | None = None,
        index: int = 0,
    ) -> Completion:
        purpose = self.label if purpose == ANSWER else f"{self.label}, {purpose}"
        return await super().draw(messages, purpose, model, params=params, index=index)


def _draw_context(ctx: StrategyContext, i: int, n: int) -> _Draw:
    seed, params = ctx.seeded(i)
    given = {f.name: getattr(ctx, f.name) for f in fields(StrategyContext)}
    # The calls go to the attempt's own list; notes, readings and parameters are the draw's.
    given.update(cache_seed=seed, params=params, notes={}, alternatives={}, args=NoParams(),
                 answer_call=None)  # fmt: skip
    return _Draw(**given, label=f"sample {i + 1}/{n}")


@strategy(
    "self_consistency",
    SelfConsistencyParams,
    wraps="of",
    description="Self-consistency: Samples several chain-of-thought answers and keeps the one "
    "most of them reach.",
)
async def self_consistency(ctx: StrategyContext) -> str:
    args = ctx.params_as(SelfConsistencyParams)
    n = args.n
    if n is None:
        n = SELF_CONSISTENCY_SAMPLES
        prompts = ctx.task.prompts
        if prompts.has("self_consistency"):
            n = int(prompts.section("self_consistency").get("samples", n))
    wrapped = STRATEGIES[args.of]
    texts: list[str | None] = []  # None: the draw gave nothing to read (NoAnswer)
    answered_by: list[Call | None] = []  # the call each draw's answer comes from
    for i in range(n):
        draw = _draw_context(ctx, i, n)
        before = len(ctx.calls)
        try:
            texts.append(await wrapped(draw))
        except NoAnswer:
            texts.append(None)
        # The draw's calls went to the attempt's list: its last wrote the draw's answer,
        # unless the wrapped strategy named another.
        made = ctx.calls[before:]
        answered_by.append(draw.answer_call or (made[-1] if made else None))
        ctx.notes.update({f"{draw.label} {k}": v for k, v in draw.notes.items()})
        ctx.alternatives.update({f"{draw.label} {k}": v for k, v in draw.alternatives.items()})
    # A draw cut off at the token limit does not vote: whatever it reads, its answer is
    # unfinished.
    cut = [c is not None and c.truncation is not None for c in answered_by]
    answers = [None if t is None or c else ctx.task.parse(t, ctx.sample)
               for t, c in zip(texts, cut, strict=True)]  # fmt: skip
    votes = Counter(a for a in answers if a is not None)
    unreadable = sum(a is None and not c for a, c in zip(answers, cut, strict=True))
    tally = ", ".join(f"{a!r}: {k}" for a, k in votes.most_common())
    ctx.notes["votes"] = f"{tally or 'none'}; unreadable: {unreadable}" + (
        f"; cut off: {sum(cut)}" if any(cut) else ""
    )
    if votes:
        # Most votes; a tie goes to the answer drawn first; the attempt is its first draw's.
        top = max(votes.values())
        winner = next(a for a in answers if a is not None and votes[a] == top)
        chosen = next(i for i, a in enumerate(answers) if a == winner)
    else:
        # Nothing to vote on: the first draw with a text, one that finished before a cut one.
        given = [i for i, t in enumerate(texts) if t is not None]
        if not given:
            raise NoAnswer(f"none of the {n} draws of {args.of} gave an answer")
        chosen = min(given, key=lambda i: (cut[i], i))
    ctx.answer_call = answered_by[chosen]
    text = texts[chosen]
    assert text is not None
    return text
