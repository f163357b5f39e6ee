"""Claude's thinking rules by model generation, and what a run's reasoning settings become on
the wire (``thinking`` and ``output_config``).

Three forms, by generation (researched 2026-11-24; each table entry cites its page):

- budget: ``{"type": "enabled", "budget_tokens": N}``, N at least 1024 and below
  ``max_tokens``, which counts the thinking too (Claude 3.7 Sonnet, 4, 4.1 and the 4.5
  family; https://platform.claude.com/docs/build-with-claude/thinking).
- adaptive: ``{"type": "adaptive"}``, its depth set by ``output_config: {"effort": E}``
  (Claude 4.6 takes both forms; Opus 4.7 and later and the 5 family refuse the budget form;
  https://platform.claude.com/docs/de/build-with-claude/adaptive-thinking,
  https://platform.claude.com/docs/en/build-with-claude/effort).
- off: ``{"type": "disabled"}`` (Sonnet 5.5: ``between_tools``, thinking off but for notes
  between tool calls, which hpt never offers), refused where a model always thinks.

The Models API says what one model takes (``capabilities.thinking.types`` and
``capabilities.effort``, https://platform.claude.com/docs/en/api/models): where it says, that
wins over the table, which serves proxies and API versions that do not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from hpt.backends.errors import SettingRefused
from hpt.types import GenerationParams

# Anthropic's ``output_config.effort`` values, in rank order.
EFFORTS = ("low", "medium", "high", "xhigh", "max")
NO_XHIGH = ("low", "medium", "high", "max")
# The API's smallest thinking budget (SDK: ThinkingConfigEnabledParam; the thinking page).
MIN_BUDGET = 1024
# An effort asked of a model that takes only a budget: hpt's own mapping, as Anthropic
# documents none. low is the API's smallest budget; each step up quadruples it.
BUDGET_BY_EFFORT = {"low": 1024, "medium": 4096, "high": 16384}
MAPPING = ", ".join(f"{effort} {tokens}" for effort, tokens in BUDGET_BY_EFFORT.items())

THINKING_PAGE = "https://platform.claude.com/docs/build-with-claude/thinking"
EFFORT_PAGE = "https://platform.claude.com/docs/en/build-with-claude/effort"
ADAPTIVE_PAGE = "https://platform.claude.com/docs/de/build-with-claude/adaptive-thinking"
# Opus 4.7 and later answer non-default temperature, top_p or top_k with a 400.
OPUS_4_7_PAGE = "https://platform.claude.com/docs/en/about-claude/models/whats-new-claude-4-7"
SAMPLING_REMOVED = f"{OPUS_4_7_PAGE}#sampling-parameters-removed"


@dataclass(frozen=True)
class ThinkingRules:
    """What one Claude model takes; ``source`` says where that was read."""

    budget: bool  # thinking.type "enabled" with budget_tokens
    adaptive: bool  # thinking.type "adaptive", its depth set by output_config.effort
    efforts: tuple[str, ...]  # the output_config.effort values it takes; (): no such parameter
    off: str | None  # the thinking type that turns thinking off; None: it always thinks
    source: str
    off_up_to: str | None = None  # thinking may be off only at this effort or below
    # Non-default temperature, top_p or top_k give a 400, thinking or not.
    fixed_sampling: bool = False

    @property
    def thinks(self) -> bool:
        return self.budget or self.adaptive

    def efforts_taken(self) -> tuple[str, ...]:
        """The ``--reasoning-effort`` values it takes ("none": thinking off)."""
        if not self.thinks:
            return ()
        on = self.efforts if self.adaptive else tuple(BUDGET_BY_EFFORT)
        return ("none", *on) if self.off else on


NO_THINKING = ThinkingRules(False, False, (), "disabled", "no extended thinking before 3.7")
BUDGET_ONLY = ThinkingRules(True, False, (), "disabled", THINKING_PAGE)
# Opus 4.5: the budget form, and effort beside it (low to high).
OPUS_4_5 = ThinkingRules(True, False, ("low", "medium", "high"), "disabled", EFFORT_PAGE)
# 4.6: the budget form still works (deprecated); adaptive with efforts up to max.
BOTH_FORMS = ThinkingRules(True, True, NO_XHIGH, "disabled", ADAPTIVE_PAGE)
# Opus 4.7 and 4.8: adaptive only, off unless asked, xhigh added, sampling refused.
# (What changed with Opus 4.7, all on one page: adaptive only, xhigh, sampling removed.)
OPUS_4_7 = ThinkingRules(False, True, EFFORTS, "disabled", OPUS_4_7_PAGE, fixed_sampling=True)
# Mythos Preview: adaptive, always on, no xhigh.
MYTHOS_PREVIEW = ThinkingRules(False, True, NO_XHIGH, None, EFFORT_PAGE, fixed_sampling=True)
# Fable 5 and Mythos 5: adaptive is the only form, always on.
FABLE_5 = ThinkingRules(
    False, True, EFFORTS, None,
    "https://platform.claude.com/docs/en/models/fable-5/migration-guide", fixed_sampling=True,
)  # fmt: skip
# Opus 5: thinks unless told not to, which it takes at effort high or below only.
OPUS_5 = ThinkingRules(
    False, True, EFFORTS, "disabled",
    "https://platform.claude.com/docs/es/models/opus-5/whats-new-opus-5", off_up_to="high",
    fixed_sampling=True,
)  # fmt: skip
# Sonnet 5: thinks unless told not to (whether it takes "disabled" is unconfirmed: taken).
SONNET_5 = ThinkingRules(
    False, True, EFFORTS, "disabled",
    "https://platform.claude.com/docs/zh-CN/models/sonnet-5/overview", fixed_sampling=True,
)  # fmt: skip
# Fable and Mythos 5.1, Opus 5.5: "Adaptive (always on)".
ALWAYS_ON_5_5 = ThinkingRules(
    False, True, EFFORTS, None,
    "https://platform.claude.com/docs/zh-CN/models/opus-5-5/overview", fixed_sampling=True,
)  # fmt: skip
# Sonnet 5.5: "disabled" replaced by "between_tools" (its efforts unconfirmed: all taken).
SONNET_5_5 = ThinkingRules(
    False, True, EFFORTS, "between_tools",
    "https://platform.claude.com/docs/zh-CN/models/sonnet-5-5/overview", fixed_sampling=True,
)  # fmt: skip
# Haiku 5.5: off at effort high or below (a third party's account; efforts: all taken).
HAIKU_5_5 = ThinkingRules(
    False, True, EFFORTS, "disabled",
    "https://docs.apiyi.com/en/live/2026-11/claude-thinking-guide-refresh", off_up_to="high",
    fixed_sampling=True,
)  # fmt: skip

# By model line and version. A version takes the rules of the newest entry of its line and
# major version at or below it: Sonnet 4.1 Sonnet 4's, Fable 5.2 (not yet described) 5.1's.
GENERATIONS: dict[str, dict[tuple[int, int], ThinkingRules]] = {
    "sonnet": {(3, 7): BUDGET_ONLY, (4, 0): BUDGET_ONLY, (4, 6): BOTH_FORMS, (5, 0): SONNET_5,
               (5, 5): SONNET_5_5},
    "opus": {(4, 0): BUDGET_ONLY, (4, 5): OPUS_4_5, (4, 6): BOTH_FORMS, (4, 7): OPUS_4_7,
             (5, 0): OPUS_5, (5, 5): ALWAYS_ON_5_5},
    "haiku": {(4, 5): BUDGET_ONLY, (5, 5): HAIKU_5_5},
    "fable": {(5, 0): FABLE_5, (5, 1): ALWAYS_ON_5_5},
    "mythos": {(5, 0): FABLE_5, (5, 1): ALWAYS_ON_5_5},
}  # fmt: skip
# claude-opus-4-5, claude-sonnet-4-20250514 (a date is no minor version), anthropic.claude-...
_LINE_FIRST = re.compile(r"claude-(opus|sonnet|haiku|fable|mythos)-(\d+)(?:-(\d{1,2}))?(?!\d)")
# claude-3-7-sonnet-20250219, claude-3-opus-20240229
_VERSION_FIRST = re.compile(r"claude-(\d)(?:-(\d))?-(opus|sonnet|haiku)")


def table_rules(model: str) -> ThinkingRules | None:
    """The rules of ``model``'s generation, read from its name; None: no name hpt knows."""
    if "claude-mythos-preview" in model:
        return MYTHOS_PREVIEW
    if m := _LINE_FIRST.search(model):
        line, version = m[1], (int(m[2]), int(m[3] or 0))
    elif m := _VERSION_FIRST.search(model):
        line, version = m[3], (int(m[1]), int(m[2] or 0))
    else:
        return None
    if version < (3, 7):
        return NO_THINKING
    known = [v for v in GENERATIONS[line] if v[0] == version[0] and v <= version]
    return GENERATIONS[line][max(known)] if known else None


def _supported(capabilities: Mapping[str, Any], name: str) -> bool:
    node = capabilities.get(name)
    return isinstance(node, Mapping) and node.get("supported") is True


def _mapping(node: object) -> Mapping[str, Any]:
    return node if isinstance(node, Mapping) else {}


def rules_for(model: str, capabilities: object) -> ThinkingRules | None:
    """``model``'s rules: what its Models API entry says (``capabilities``, JSON as served), else
    its generation's; None when neither is known. The API does not say whether a model
    refuses sampling parameters, nor up to which effort its thinking may be off: those come
    from the table, and for a model it lacks, taking adaptive thinking only marks the
    generations that refuse sampling parameters (Opus 4.7 and later)."""
    table = table_rules(model)
    said_by_api = _mapping(capabilities)
    thinking = _mapping(said_by_api.get("thinking"))
    if "supported" not in thinking:
        return table
    types = _mapping(thinking.get("types")) if thinking["supported"] is True else {}
    effort = _mapping(said_by_api.get("effort"))
    if effort.get("supported") is not True:
        effort = {}
    budget, adaptive = _supported(types, "enabled"), _supported(types, "adaptive")
    off = next((t for t in ("disabled", "between_tools") if _supported(types, t)), None)
    said = ThinkingRules(
        budget=budget,
        adaptive=adaptive,
        efforts=tuple(e for e in EFFORTS if _supported(effort, e)),
        off=off if budget or adaptive else "disabled",
        source=f"the Models API's capabilities for {model}",
        fixed_sampling=adaptive and not budget,
    )
    if table is None:
        return said
    return replace(said, off_up_to=table.off_up_to, fixed_sampling=table.fixed_sampling)


def thinking_fields(
    model: str, rules: ThinkingRules | None, params: GenerationParams
) -> dict[str, Any]:
    """The request fields (``thinking``, ``output_config``) carrying ``params``' reasoning
    effort and thinking budget to ``model``; {} when neither is set. ``SettingRefused`` for
    a setting the model cannot take, saying what to do instead."""
    effort, budget = params.reasoning_effort, params.thinking_budget
    if effort is None and budget is None:
        return {}
    if rules is None:
        raise SettingRefused(
            f"{model}: hpt does not know which thinking form this model takes (no Claude "
            f"generation hpt knows by that name, and no capabilities on GET /v1/models/{model}); "
            "run it without --reasoning-effort and --thinking-budget"
        )
    if effort == "none" and budget:
        raise SettingRefused(
            f"{model}: --reasoning-effort none turns thinking off, which leaves "
            f"--thinking-budget {budget} nothing to bound; give one of them"
        )
    off = effort == "none" or budget == 0
    if not rules.thinks:
        if off:
            return {}  # it never thinks: nothing to turn off
        raise SettingRefused(
            f"{model} has no extended thinking (Claude before 3.7 Sonnet); run it without "
            "--reasoning-effort and --thinking-budget"
        )
    effort = None if effort == "none" else effort
    if effort is not None and effort not in rules.efforts_taken():
        raise SettingRefused(
            f"{model} takes --reasoning-effort {', '.join(rules.efforts_taken())}, not "
            f"{effort} ({rules.source})"
        )
    if off:
        return _off(model, rules, effort)
    if budget:
        return _budget(model, rules, params.max_tokens, budget, effort)
    assert effort is not None
    if rules.adaptive:
        return {"thinking": {"type": "adaptive", **SHOWN}, "output_config": {"effort": effort}}
    tokens = BUDGET_BY_EFFORT[effort]
    if tokens >= params.max_tokens:
        # Each effort is checked in turn: name the whole mapping, so one retry serves them all.
        raise SettingRefused(
            f"{model} thinks within a token budget, which hpt sets by effort ({MAPPING} "
            "tokens) and which must be below max_tokens, as max_tokens counts the thinking "
            f"too ({THINKING_PAGE}); --max-tokens {params.max_tokens} is not above effort "
            f"{effort}'s {tokens}: raise it above the budget of each effort you ask"
        )
    return _with_effort(
        {"thinking": {"type": "enabled", "budget_tokens": tokens, **SHOWN}}, rules, effort
    )


# Thinking hpt turns on comes back summarized, so the attempt records it: Opus 4.7 and later
# return it signed but without its text unless asked (display "omitted" by default:
# https://platform.claude.com/docs/en/about-claude/models/whats-new-claude-4-7). Billed alike.
SHOWN = {"display": "summarized"}


def _with_effort(
    fields: dict[str, Any], rules: ThinkingRules, effort: str | None
) -> dict[str, Any]:
    """``fields`` with ``output_config.effort`` where the model takes that parameter."""
    if effort is not None and effort in rules.efforts:
        return {**fields, "output_config": {"effort": effort}}
    return fields


def _off(model: str, rules: ThinkingRules, effort: str | None) -> dict[str, Any]:
    if rules.off is None:
        raise SettingRefused(
            f"{model} always thinks: its thinking cannot be turned off ({rules.source}); "
            "drop --reasoning-effort none and --thinking-budget 0"
        )
    if effort is not None and effort not in rules.efforts:
        raise SettingRefused(
            f"{model} takes no effort setting beside --thinking-budget 0 (its efforts are "
            "thinking budgets); give one of them"
        )
    if effort is not None and rules.off_up_to:
        if EFFORTS.index(effort) > EFFORTS.index(rules.off_up_to):
            raise SettingRefused(
                f"{model} turns its thinking off only at effort {rules.off_up_to} or below "
                f"({rules.source}); lower --reasoning-effort or drop --thinking-budget 0"
            )
    return _with_effort({"thinking": {"type": rules.off}}, rules, effort)


def _budget(
    model: str, rules: ThinkingRules, max_tokens: int, budget: int, effort: str | None
) -> dict[str, Any]:
    if not rules.budget:
        raise SettingRefused(
            f"{model} takes adaptive thinking only, which has no token budget "
            f"({ADAPTIVE_PAGE}); use --reasoning-effort ({', '.join(rules.efforts_taken())})"
        )
    if budget < MIN_BUDGET:
        # Said once: a budget of 1024 must be below max_tokens too.
        also = " and --max-tokens above it" if max_tokens <= MIN_BUDGET else ""
        raise SettingRefused(
            f"{model}: --thinking-budget {budget} is below the smallest thinking budget, "
            f"{MIN_BUDGET} tokens ({THINKING_PAGE}); raise it to {MIN_BUDGET} or more{also}"
        )
    if budget >= max_tokens:
        raise SettingRefused(
            f"{model}: --thinking-budget {budget} with --max-tokens {max_tokens}: a thinking "
            f"budget must be below max_tokens, which counts the thinking too "
            f"({THINKING_PAGE}); raise --max-tokens above {budget} or lower the budget"
        )
    if effort is not None and effort not in rules.efforts:
        raise SettingRefused(
            f"{model} takes a thinking budget and no effort setting beside it (its efforts "
            "are thinking budgets); give --reasoning-effort or --thinking-budget, not both"
        )
    return _with_effort(
        {"thinking": {"type": "enabled", "budget_tokens": budget, **SHOWN}}, rules, effort
    )


def thinking_notes(model: str, rules: ThinkingRules | None, params: GenerationParams) -> list[str]:
    """One sentence where ``params``' effort is sent as a thinking budget (a model whose
    thinking takes the budget form only): hpt's mapping, not Anthropic's effort of that name."""
    effort = params.reasoning_effort
    budget_form = rules is not None and rules.budget and not rules.adaptive
    if not budget_form or params.thinking_budget is not None or effort not in BUDGET_BY_EFFORT:
        return []
    assert rules is not None and effort is not None
    sent = f"a thinking budget of {BUDGET_BY_EFFORT[effort]} tokens"
    if effort in rules.efforts:  # Opus 4.5 takes the effort too, beside the budget
        sent, why = f"{sent} beside effort {effort}", "thinks within a token budget"
    else:
        why = "takes no effort setting"
    mapping = f"hpt's mapping: {MAPPING} tokens"
    return [f"reasoning effort {effort} sent as {sent}: {model} {why} ({mapping})"]


def thinking_on(fields: Mapping[str, Any]) -> bool:
    """Whether ``thinking_fields`` turn thinking on. (A model that thinks unasked refuses
    sampling parameters anyway: ``ThinkingRules.fixed_sampling``.)"""
    thinking = fields.get("thinking")
    return thinking is not None and thinking["type"] in ("enabled", "adaptive")
