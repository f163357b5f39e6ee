"""Reasoning settings over the chat-completions protocol: OpenAI's own models, by generation,
and open servers (vLLM, llama.cpp) told as their ``reasoning_control`` setting says.

OpenAI's reasoning models (the o-series, gpt-5 and later) each take their own
``reasoning_effort`` values, refuse temperature, top_p and logprobs except at effort "none"
(gpt-5.1 and later), take ``max_completion_tokens`` for ``max_tokens`` and no thinking budget.
A setting a model cannot take is refused before any call (``SettingRefused``); a paper
setting left out is said once (``notes``). Sources are cited beside each rule; where none
fixes one, the comment says it is hpt's choice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from hpt.backends.errors import SettingRefused
from hpt.types import GenerationParams

# How a server takes an effort and a thinking budget (OpenAIConfig.reasoning_control):
# - "auto": "openai" on api.openai.com, "reasoning_effort" on any other host;
# - "openai": OpenAI's rules by model generation, whatever the host (Azure OpenAI, a proxy);
# - "reasoning_effort": the effort as a top-level ``reasoning_effort`` (vLLM copies it into
#   the chat template's kwargs and turns thinking on for any effort but "none",
#   https://github.com/vllm-project/vllm/issues/54616; llama.cpp's server passes it to the
#   template since https://github.com/ggml-org/llama.cpp/pull/26941, before which only "none"
#   did anything); a budget as vLLM's ``thinking_token_budget`` (honoured when the server
#   runs with --reasoning-config, https://docs.vllm.ai/en/v0.22.1/api/vllm/v1/sample/thinking_budget_state/;
#   llama.cpp takes a budget only at launch, --reasoning-budget, and ignores the field);
# - "chat_template_kwargs": thinking switched on or off through the chat template,
#   ``chat_template_kwargs: {"enable_thinking": ...}`` (Qwen3's form, taken by vLLM and
#   llama.cpp: https://docs.vllm.ai/en/stable/features/reasoning_outputs/,
#   https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md): off for effort
#   "none" or a budget of 0, on otherwise; a budget above 0 also as ``thinking_token_budget``;
# - "none": the server takes no reasoning settings; asking for one is refused.
ReasoningControl = Literal["auto", "openai", "reasoning_effort", "chat_template_kwargs", "none"]

# OpenAI's pages the rules come from (the rules' own comments cite the rest).
REASONING_GUIDE = "https://developers.openai.com/api/docs/guides/reasoning"
PARAMETER_RULES = (
    "https://platform.openai.com/docs/guides/latest-model#gpt-5-1-parameter-compatibility"
)
DEPLOYMENT_CHECKLIST = "https://developers.openai.com/api/docs/guides/deployment-checklist"


@dataclass(frozen=True)
class Family:
    """One generation of OpenAI reasoning models."""

    # The reasoning_effort values it takes; None: not known (a model newer than this table),
    # so an effort is sent as asked and the API's answer names the values it takes.
    efforts: tuple[str, ...] | None
    # It takes temperature, top_p and logprobs at effort "none" (gpt-5.1 and later:
    # PARAMETER_RULES; for GPT-6, DEPLOYMENT_CHECKLIST).
    sampling_at_none: bool = False


_LOW_HIGH = ("low", "medium", "high")
_TO_XHIGH = ("none", *_LOW_HIGH, "xhigh")
# Effort values per model: https://community.openai.com/t/request-for-compatibility-matrix-reasoning-effort-sampling-parameters-across-gpt-5-series/1371738
# (a community matrix), checked against the API's own 400 texts and OpenAI's spec text where
# those exist (cited per line).
_O_SERIES = Family(_LOW_HIGH)
_GPT5 = Family(("minimal", *_LOW_HIGH))
_CODEX = Family(_LOW_HIGH)
# "Supported values are: 'medium'" (https://github.com/Laisky/one-api/issues/285); gpt-5.3's
# chat model is taken to follow 5.1's and 5.2's (hpt's assumption).
_CHAT_LATEST = Family(("medium",))
_GPT56 = Family((*_TO_XHIGH, "max"), sampling_at_none=True)  # DEPLOYMENT_CHECKLIST
# Astra and 6.1 Sol/Terra have no "none" (https://github.com/yologdev/yoagent/releases/tag/v0.27.4)
_GPT6_NO_NONE = Family((*_LOW_HIGH, "xhigh", "max"))

# A model id, or its name before a dated or sized suffix (o3-mini-2025-01-31 is o3-mini's,
# gpt-5.4-mini is gpt-5.4's: hpt's assumption for sizes no source lists) -> its family;
# None: not a reasoning model, though its name is a reasoning generation's.
_FAMILIES: dict[str, Family | None] = {
    # Reasoning models that take no reasoning_effort: the API reference listed it for o1 and
    # o3-mini only (quoted in https://github.com/dzhng/deep-research/pull/89).
    "o1-mini": Family(()),
    "o1-preview": Family(()),
    "o1": _O_SERIES, "o1-pro": _O_SERIES, "o3": _O_SERIES, "o3-mini": _O_SERIES,
    "o3-pro": _O_SERIES, "o4-mini": _O_SERIES,
    "gpt-5": _GPT5, "gpt-5-mini": _GPT5, "gpt-5-nano": _GPT5,
    # gpt-5-chat-latest takes temperature and max_tokens and refuses reasoning_effort
    # (https://github.com/Laisky/one-api/issues/120).
    "gpt-5-chat": None,
    "gpt-5-pro": Family(("high",)),  # OpenAI's spec text: "gpt-5-pro supports only high"
    "gpt-5-codex": _CODEX, "gpt-5.1-codex": _CODEX, "gpt-5.1-codex-mini": _CODEX,
    "gpt-5.1-codex-max": Family((*_LOW_HIGH, "xhigh")),
    # "'minimal' is not supported with the 'gpt-5.1' model. Supported values are: 'none',
    # 'low', 'medium', and 'high'." (https://github.com/openai/openai-agents-python/issues/2089)
    "gpt-5.1": Family(("none", *_LOW_HIGH), sampling_at_none=True),
    "gpt-5.1-chat": _CHAT_LATEST, "gpt-5.2-chat": _CHAT_LATEST, "gpt-5.3-chat": _CHAT_LATEST,
    "gpt-5.2": Family(_TO_XHIGH, sampling_at_none=True),
    "gpt-5.2-pro": Family(("medium", "high", "xhigh")),
    "gpt-5.4": Family(_TO_XHIGH, sampling_at_none=True),
    # "Up to xhigh, no max" (https://github.com/QwenLM/qwen-code/pull/11295); "none" as for
    # 5.4 (hpt's assumption).
    "gpt-5.5": Family(_TO_XHIGH, sampling_at_none=True),
    "gpt-5.6": _GPT56, "gpt-5.6-sol": _GPT56, "gpt-5.6-terra": _GPT56, "gpt-5.6-luna": _GPT56,
    "gpt-6-astra": _GPT6_NO_NONE, "gpt-6.1-sol": _GPT6_NO_NONE, "gpt-6.1-terra": _GPT6_NO_NONE,
    # DEPLOYMENT_CHECKLIST names effort "none" for these two; the other values as 5.6's.
    "gpt-6-sol": _GPT56, "gpt-6-luna": _GPT56,
}  # fmt: skip

# Names the table does not hold. Every OpenAI generation since gpt-5 reasons and each new one
# has kept the rules of gpt-5.1 and later (PARAMETER_RULES, DEPLOYMENT_CHECKLIST), so a newer
# gpt-N (N >= 5: gpt-5.3, gpt-6.2-sol, gpt-7) or o-series name is taken for a reasoning model
# whose efforts are not known (sent as asked); any other name (gpt-4o, gpt-4.1, gpt-3.5...) is
# not a reasoning model.
_NEWER_GPT = re.compile(r"gpt-(\d+)")
_NEWER_O = re.compile(r"o\d")
_NEWER_GPT_FAMILY = Family(None, sampling_at_none=True)
_NEWER_O_FAMILY = Family(None)


def openai_family(model: str) -> Family | None:
    """The generation of OpenAI reasoning models ``model`` belongs to; None: it does not
    reason. A fine-tune (``ft:o4-mini-...:org::id``) is its base model's; a proxy's
    ``openai/`` prefix is ignored."""
    name = model.removeprefix("ft:").split(":")[0].rsplit("/", 1)[-1]
    key = name
    while True:
        if key in _FAMILIES:
            return _FAMILIES[key]
        cut = key.rfind("-")
        if cut < 0:
            break
        key = key[:cut]
    newer = _NEWER_GPT.match(name)
    if newer:
        return _NEWER_GPT_FAMILY if int(newer.group(1)) >= 5 else None
    return _NEWER_O_FAMILY if _NEWER_O.match(name) else None


@dataclass(frozen=True)
class ReasoningRules:
    """How one model on one server takes reasoning settings (``reasoning_rules``)."""

    model: str
    control: ReasoningControl  # never "auto": resolved by host
    family: Family | None = None  # "openai" control: the model's generation (None: none)

    @property
    def sampling(self) -> bool:
        """Whether temperature, top_p and logprobs are sent whatever the effort."""
        return self.family is None

    def sampling_at(self, params: GenerationParams) -> bool:
        """Whether temperature, top_p and logprobs are sent with ``params``: a reasoning
        model takes them at an explicit effort "none" only, where its generation does."""
        return self.family is None or (
            self.family.sampling_at_none and params.reasoning_effort == "none"
        )

    def fields(self, params: GenerationParams) -> dict[str, Any]:
        """The request fields for ``params``' effort and thinking budget (none asked: none);
        ``SettingRefused`` for one the model or server cannot take."""
        effort, budget = params.reasoning_effort, params.thinking_budget
        if effort is None and budget is None:
            return {}
        if self.control == "openai":
            return self._openai(effort, budget)
        if self.control == "none":
            raise SettingRefused(
                f"{self.model}: its server takes no reasoning settings (reasoning_control "
                "is none); drop --reasoning-effort and --thinking-budget, or set the model's "
                "reasoning_control to how the server takes them"
            )
        sent: dict[str, Any] = {}
        if self.control == "chat_template_kwargs":
            on = effort != "none" and budget != 0
            sent["chat_template_kwargs"] = {"enable_thinking": on}
            if budget:
                sent["thinking_token_budget"] = budget
            return sent
        if effort is not None:
            sent["reasoning_effort"] = effort
        if budget is not None:
            sent["thinking_token_budget"] = budget
        return sent

    def _openai(self, effort: str | None, budget: int | None) -> dict[str, Any]:
        if budget is not None:
            # No budget field in Chat Completions, only reasoning_effort (REASONING_GUIDE).
            raise SettingRefused(
                f"{self.model}: OpenAI's models take no thinking budget; use "
                f"--reasoning-effort instead of --thinking-budget ({REASONING_GUIDE})"
            )
        family = self.family
        if family is None:
            # "Unsupported parameter: 'reasoning.effort' is not supported with this model."
            # (https://github.com/BoundaryML/baml/pull/2708, gpt-4.1)
            raise SettingRefused(
                f"{self.model} is not an OpenAI reasoning model and takes no reasoning effort "
                f"({REASONING_GUIDE}); drop --reasoning-effort or evaluate a reasoning model "
                "(o3, o4-mini, gpt-5 and later)"
            )
        if family.efforts is not None and effort not in family.efforts:
            if not family.efforts:
                raise SettingRefused(
                    f"{self.model} takes no reasoning effort ({REASONING_GUIDE}); drop "
                    "--reasoning-effort"
                )
            raise SettingRefused(
                f"{self.model} takes the reasoning efforts {', '.join(family.efforts)}, not "
                f"{effort!r} ({REASONING_GUIDE}); use one of those with --reasoning-effort"
            )
        return {"reasoning_effort": effort}

    def notes(self, params: GenerationParams) -> list[str]:
        """One sentence for each of ``params`` this model is sent otherwise than asked."""
        notes: list[str] = []
        family = self.family
        if family is not None and not self.sampling_at(params):
            hint = ""
            if family.sampling_at_none and (family.efforts is None or "none" in family.efforts):
                hint = "; it takes them at --reasoning-effort none"
            # Their defaults, 1 and 1, change nothing left out (PARAMETER_RULES: "only the
            # default (1) value is supported").
            asked = [
                f"{name} {value:g}"
                for name, value in (("temperature", params.temperature), ("top_p", params.top_p))
                if value != 1
            ]
            if asked:
                notes.append(
                    f"{' and '.join(asked)} not sent: {self.model}, an OpenAI reasoning model, "
                    f"takes only their defaults{hint} ({PARAMETER_RULES})"
                )
            if params.logprobs:
                notes.append(
                    f"logprobs not sent: {self.model}, an OpenAI reasoning model, returns "
                    f"none{hint} ({PARAMETER_RULES})"
                )
        effort = params.reasoning_effort
        if self.control == "chat_template_kwargs" and effort not in (None, "none"):
            notes.append(
                f"reasoning effort {effort} sent as enable_thinking true: {self.model}'s chat "
                "template switches thinking on or off only (reasoning_control "
                "chat_template_kwargs)"
            )
        open_server = self.control in ("reasoning_effort", "chat_template_kwargs")
        if open_server and "thinking_token_budget" in self.fields(params):
            notes.append(
                f"thinking budget {params.thinking_budget} sent as thinking_token_budget: "
                "honoured only by vLLM started with --reasoning-config and ignored by "
                "llama.cpp (which takes a budget at launch only, --reasoning-budget), so on "
                "llama.cpp cells that differ only in their budget are the same run"
            )
        return notes


def reasoning_rules(model: str, control: ReasoningControl, openai_host: bool) -> ReasoningRules:
    """The rules for ``model`` on a server (``openai_host``: api.openai.com) whose
    ``reasoning_control`` is ``control``."""
    if control == "auto":
        control = "openai" if openai_host else "reasoning_effort"
    family = openai_family(model) if control == "openai" else None
    return ReasoningRules(model, control, family)
