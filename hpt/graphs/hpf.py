"""The Hierarchical Prompting Framework's five levels as strategies, each reading its own
section of the dataset's prompt file. Their descriptions are the HPT paper's appendix E.3,
word for word: the adaptive selector is shown them."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from hpt.backends import Completion, Message
from hpt.graphs.strategies import Needs, StrategyContext, strategy
from hpt.prompts.library import Rendered
from hpt.results.records import mean_token_prob


def _user(prompt: Rendered) -> list[Message]:
    return [prompt.message("user")]


@strategy(
    "role",
    prompt_section="role",
    description="Role Prompting: Defines a role for the model in solving the task.",
)
async def role(ctx: StrategyContext) -> str:
    return await ctx.ask(_user(ctx.rendered("role", "user")))


@strategy(
    "zero_shot_cot",
    prompt_section="zero_shot_cot",
    description="Zero-shot Chain of Thought prompting: Stimulates reasoning and problem-solving "
    "by including the phrase 'Let's think step by step' without offering previous examples "
    "related to the task.",
)
async def zero_shot_cot(ctx: StrategyContext) -> str:
    return await ctx.ask(_user(ctx.rendered("zero_shot_cot", "user")))


@strategy(
    "three_shot_cot",
    prompt_section="three_shot_cot",
    description="Three-shot Chain of Thought prompting: Offers three examples related to the "
    "task to guide the model's reasoning process.",
)
async def three_shot_cot(ctx: StrategyContext) -> str:
    prompts = ctx.task.prompts
    shots = []
    for ex in ctx.task.exemplars_for(ctx.sample, ctx.exemplar_pool):
        fields = {**ex.fields, "answer": ex.shown_answer or ex.target}
        text = prompts.render("three_shot_cot", prompts.text("three_shot_cot", "exemplar"), fields)
        why = ctx.task.explanation(ex)
        suffix = prompts.optional_text("three_shot_cot", "explanation")
        if why and suffix:
            text += prompts.render("three_shot_cot", suffix, {"explanation": why})
        shots.append(text)
    return await ctx.ask(_user(ctx.rendered("three_shot_cot", "user", exemplars=" ".join(shots))))


@strategy(
    "least_to_most",
    prompt_section="least_to_most",
    description="Least-to-most prompting: Uses a sequential method to derive essential insights "
    "from the task to solve it.",
)
async def least_to_most(ctx: StrategyContext) -> str:
    # One conversation: every step sees all earlier steps and answers, and {previous} names
    # the latest answer explicitly, as the paper's templates do.
    steps = ctx.task.prompts.texts("least_to_most", "steps")
    history: list[Message] = []
    previous = ""
    for i, template in enumerate(steps, 1):
        prompt = ctx.task.prompts.rendered(
            "least_to_most", template, {**ctx.fields, "previous": previous}
        )
        history = [*history, prompt.message("user")]
        previous = await ctx.ask(history, purpose=f"step {i}/{len(steps)}")
        history = [*history, Message(role="assistant", content=previous)]
    return previous


def choose_knowledge(candidates: Sequence[Completion]) -> tuple[int, str]:
    """The candidate to use and the rule that chose it (GKP: highest mean token probability
    when every candidate has logprobs, else the first)."""
    scores = [mean_token_prob(c.logprobs) for c in candidates]
    if not scores or any(s is None for s in scores):
        if any(c.reasoning is not None and c.logprobs is None for c in candidates):
            # hpt.backends.thinking drops those that covered inline thinking.
            return 0, "first candidate (no logprobs of the answer apart from the thinking)"
        return 0, "first candidate (the backend returned no logprobs)"
    known = [s for s in scores if s is not None]
    best = max(range(len(known)), key=lambda i: known[i])
    shown = ", ".join(f"{s:.3f}" for s in known)
    return best, f"candidate {best + 1} of {len(known)} by mean token probability ({shown})"


class GeneratedKnowledgeParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # The paper samples three knowledge candidates and keeps the most probable one.
    candidates: int = Field(3, ge=1, le=20)


@strategy(
    "generated_knowledge",
    GeneratedKnowledgeParams,
    prompt_section="generated_knowledge",
    description="Generated Knowledge Prompting: Integration and application of external "
    "knowledge to accomplish the task. The external knowledge is generated using some other "
    "model based on the task.",
    needs=Needs(logprobs=True),
)
async def generated_knowledge(ctx: StrategyContext) -> str:
    n = ctx.params_as(GeneratedKnowledgeParams).candidates
    prompt = _user(ctx.rendered("generated_knowledge", "knowledge"))
    with_logprobs = ctx.knowledge_params.model_copy(update={"logprobs": True})
    candidates = [
        await ctx.draw(
            prompt,
            purpose=f"knowledge {i + 1}/{n}",
            model=ctx.knowledge_model,
            params=with_logprobs,
            index=i,
        )
        for i in range(n)
    ]
    chosen, rule = choose_knowledge(candidates)
    ctx.notes["knowledge"] = rule
    knowledge = candidates[chosen].text
    return await ctx.ask(_user(ctx.rendered("generated_knowledge", "user", knowledge=knowledge)))
