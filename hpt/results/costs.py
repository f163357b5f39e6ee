"""What calls cost: prices per token class (USD per million tokens) from litellm's model cost
map, read offline, under the user's own TOML file; and the cost of a call by class (fresh
input, cache read, cache write, output with its reasoning), at batch rates when it was
batched.

litellm is never imported: importing it is slow and fetches the remote map over the network.
Its bundled copy, a JSON file beside its ``__init__``, is read as data (``hpt[prices]``)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import tomllib
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hpt.errors import HptError, validation_message
from hpt.results.rundir import SPEC, RunDirError
from hpt.types import Usage, unset

MILLION = 1e6
COST_MAP = "model_prices_and_context_window_backup.json"
INSTALL_HINT = "install hpt[prices] (litellm's model cost map) or give --prices FILE"
SELF_HOSTED_SOURCE = "self-hosted: no per-token price"
# Run on the user's machines (the embedded model, TGI servers): no per-token bill.
SELF_HOSTED = frozenset({"local", "tgi"})
# Hosted providers the cost map prices, by hpt provider: (litellm_provider, the host their
# own API lives under). The same provider pointed at another host (vLLM, llama.cpp, a proxy)
# is not priced by the map.
LISTED = {"openai": ("openai", "openai.com"), "anthropic": ("anthropic", "anthropic.com")}
_DATE = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")
# OpenAI: models before GPT-5 get no prompt-cache discount in the Batch API (facts27 §3).
_GPT = re.compile(r"^(?:ft:)?gpt-(\d+)")
Rate = float | None


class PriceError(HptError, ValueError):
    """A prices file, or the cost map, cannot be read; or a price is needed and unknown."""


class ModelPrice(BaseModel):
    """One model's prices, USD per million tokens by class; saved in run.json (``prices``)."""

    # A run.json a later hpt wrote, with classes this one does not know, still reads.
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    input: float = Field(ge=0.0, description="USD per million fresh input tokens")
    output: float = Field(ge=0.0, description="USD per million output tokens, reasoning included")
    # None: billed as input (``source`` says so).
    cache_read: float | None = Field(None, ge=0.0, exclude_if=unset)
    cache_write: float | None = Field(None, ge=0.0, exclude_if=unset)
    # Through a provider's Batch API; None: half the standard rate of the class (both
    # providers' rule; the cache classes at half their own rate).
    batch_input: float | None = Field(None, ge=0.0, exclude_if=unset)
    batch_output: float | None = Field(None, ge=0.0, exclude_if=unset)
    batch_cache_read: float | None = Field(None, ge=0.0, exclude_if=unset)
    batch_cache_write: float | None = Field(None, ge=0.0, exclude_if=unset)
    source: str = Field(description="where the prices come from")

    def rates(self, batched: bool) -> tuple[float, float, float, float]:
        """USD per million (fresh input, cache read, cache write, output)."""
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        if not batched:
            return self.input, read, write, self.output
        fresh = _or(self.batch_input, self.input / 2)
        # A cache class without its own rate is billed as input: at the batch input rate.
        batch_read = fresh if self.cache_read is None else read / 2
        batch_write = fresh if self.cache_write is None else write / 2
        return (
            fresh,
            _or(self.batch_cache_read, batch_read),
            _or(self.batch_cache_write, batch_write),
            _or(self.batch_output, self.output / 2),
        )

    @property
    def free(self) -> bool:
        return self.source == SELF_HOSTED_SOURCE


def _or(value: Rate, default: float) -> float:
    return default if value is None else value


def as_input(read: Rate, write: Rate) -> str:
    """What ``source`` adds for cache classes without a price of their own."""
    missing = [
        name for name, rate in (("cache reads", read), ("cache writes", write)) if rate is None
    ]
    return f"; {' and '.join(missing)} billed as input" if missing else ""


def call_cost(usage: Usage, batched: bool, price: ModelPrice) -> float:
    """USD for one call's tokens by class; reasoning tokens are part of the output."""
    fresh, read, write, output = price.rates(batched)
    return (
        usage.fresh_input_tokens * fresh
        + (usage.cache_read_tokens or 0) * read
        + (usage.cache_write_tokens or 0) * write
        + usage.completion_tokens * output
    ) / MILLION


def worst_cost(price: ModelPrice, prompt_tokens: int, max_tokens: int, batched: bool) -> float:
    """The most a call can cost: every prompt token at the dearer of input and cache write
    (a prompt may be written to the provider's cache), and ``max_tokens`` of output."""
    fresh, _, write, output = price.rates(batched)
    return (prompt_tokens * max(fresh, write) + max_tokens * output) / MILLION


class UserPrice(BaseModel):
    """One entry of the user's prices file, USD per million tokens."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    input: float = Field(ge=0.0)
    output: float = Field(ge=0.0)
    cache_read: float | None = Field(None, ge=0.0)
    cache_write: float | None = Field(None, ge=0.0)
    batch_input: float | None = Field(None, ge=0.0)
    batch_output: float | None = Field(None, ge=0.0)
    batch_cache_read: float | None = Field(None, ge=0.0)
    batch_cache_write: float | None = Field(None, ge=0.0)

    def price(self, source: str) -> ModelPrice:
        source += as_input(self.cache_read, self.cache_write)
        return ModelPrice(**self.model_dump(), source=source)


def load_user_prices(path: Path) -> dict[str, ModelPrice]:
    """A TOML file of ``["LABEL or MODEL ID"] input = USD, output = USD`` per million tokens,
    with optional cache_read, cache_write, batch_input, batch_output, batch_cache_read and
    batch_cache_write."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PriceError(f"prices file {path} does not exist") from None
    except OSError as exc:
        raise PriceError(f"cannot read prices file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise PriceError(f"{path}: not UTF-8 text; give a TOML prices file") from None
    except tomllib.TOMLDecodeError as exc:
        raise PriceError(f"{path}: not valid TOML: {exc}") from None
    prices = {}
    for model, entry in data.items():
        try:
            prices[model] = UserPrice.model_validate(entry).price(path.name)
        except ValidationError as exc:
            problem = validation_message(exc, prefix=model, whole="(table)")
            raise PriceError(f"{path}: {problem}") from None
    return prices


def litellm_cost_map() -> Path | None:
    """The cost map bundled with the installed litellm, found without importing it."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / COST_MAP


def _litellm_version() -> str:
    try:
        return importlib.metadata.version("litellm")
    except importlib.metadata.PackageNotFoundError:
        return "(unknown version)"


def served_elsewhere(provider: str, endpoint: str | None) -> bool:
    """A hosted provider's protocol spoken by another server (vLLM, llama.cpp, a proxy)."""
    if provider not in LISTED or not endpoint:
        return False
    host = (urlsplit(endpoint).hostname or "").lower()
    own = LISTED[provider][1]
    return host != own and not host.endswith("." + own)


class PriceBook:
    """Prices by backend label: the user's file first (keyed by label or model id), then
    prices a run recorded, then litellm's cost map for OpenAI and Anthropic models; the
    embedded model and TGI servers are free."""

    def __init__(
        self,
        user: Mapping[str, ModelPrice] | None = None,
        cost_map: Path | None = None,
        version: str = "",
    ) -> None:
        self.user = dict(user or {})
        self.cost_map = cost_map
        self.version = version

    @classmethod
    def load(cls, user_file: Path | None = None, *, cost_map: Path | None = None) -> PriceBook:
        """The user's file (read now: its errors are PriceError) over litellm's bundled map
        (read at the first price it is asked for). ``cost_map``: another copy of the map (a
        missing file is a missing litellm); None: the installed litellm's, if any."""
        user = load_user_prices(user_file) if user_file is not None else {}
        version = ""
        if cost_map is None:
            cost_map = litellm_cost_map()
            version = _litellm_version() if cost_map is not None else ""
        if cost_map is not None and not cost_map.is_file():
            cost_map = None
        return cls(user, cost_map, version or "(given)")

    @cached_property
    def _table(self) -> dict[str, dict[str, Any]]:
        if self.cost_map is None:
            return {}
        try:
            data = json.loads(self.cost_map.read_bytes())
        except (OSError, ValueError) as exc:
            raise PriceError(
                f"cannot read litellm's cost map {self.cost_map}: {exc}; reinstall litellm, or "
                "give every model's price in --prices FILE"
            ) from None
        if not isinstance(data, dict):
            raise PriceError(f"{self.cost_map}: not a cost map (a JSON object of models)")
        return {k: v for k, v in data.items() if isinstance(v, dict)}

    def price(
        self,
        label: str,
        provider: str,
        model: str,
        *,
        endpoint: str | None = None,
        recorded: Mapping[str, ModelPrice] | None = None,
    ) -> ModelPrice | None:
        """``label``'s prices; None: unknown (``unknown`` says why and what to do).
        ``endpoint``: the base URL the backend calls, where it is not the provider's own;
        ``recorded``: prices a run saved (run.json), used after the user's file."""
        given = self.user.get(label) or (self.user.get(model) if model else None)
        if given is not None:
            if provider == "openai" and not served_elsewhere(provider, endpoint):
                return _openai_batch_reads(given, model)
            return given
        if recorded and label in recorded:
            return recorded[label]
        if provider in SELF_HOSTED:
            return ModelPrice(input=0.0, output=0.0, source=SELF_HOSTED_SOURCE)
        if provider not in LISTED or served_elsewhere(provider, endpoint) or not model:
            return None
        found = self._lookup(LISTED[provider][0], model)
        return None if found is None else self._listed(provider, model, *found)

    def unknown(self, label: str, provider: str, model: str, endpoint: str | None = None) -> str:
        """Why ``label`` has no price, and how to give one: one line."""
        give = (
            f'give it in --prices FILE (["{label}"] input = USD, output = USD per million tokens)'
        )
        if provider in LISTED and served_elsewhere(provider, endpoint):
            host = urlsplit(endpoint or "").netloc.rpartition("@")[2]  # never credentials
            return f"{label} is served by {host}, not by {provider}: {give}, 0 for your own server"
        if provider in LISTED and self.cost_map is None:
            return f"no price for {label}: {INSTALL_HINT}"
        if provider in LISTED:
            return f"litellm {self.version}'s cost map has no {provider} model {model!r}: {give}"
        if provider == "hf":
            where = "Hugging Face's inference providers, whose prices hpt does not know"
            return f"{label} runs on {where}: {give}"
        return f"no price for {label}: {give}"

    def _lookup(self, litellm_provider: str, model: str) -> tuple[str, dict[str, Any]] | None:
        """The map's entry for ``model``: its own key, the key without the provider's prefix
        or a snapshot date ("claude-sonnet-4-5-20250929" -> "claude-sonnet-4-5"), or the
        newest dated snapshot of an undated id."""
        table = self._table
        model = model.removeprefix(f"{litellm_provider}/")
        undated = _DATE.sub("", model)
        keys = [model, f"{litellm_provider}/{model}", undated, f"{litellm_provider}/{undated}"]
        for key in keys:
            entry = table.get(key)
            if entry is not None and entry.get("litellm_provider") == litellm_provider:
                if "input_cost_per_token" in entry and "output_cost_per_token" in entry:
                    return key, entry
        snapshots = sorted(
            k for k, v in table.items()
            if k.startswith(undated + "-") and _DATE.fullmatch(k[len(undated):])
            and v.get("litellm_provider") == litellm_provider and "input_cost_per_token" in v
        )  # fmt: skip
        return (snapshots[-1], table[snapshots[-1]]) if snapshots else None

    def _listed(self, provider: str, model: str, key: str, entry: dict[str, Any]) -> ModelPrice:
        def rate(field: str) -> Rate:
            value = entry.get(field)
            return round(float(value) * MILLION, 9) if isinstance(value, int | float) else None

        notes = [f"litellm {self.version} cost map: {key}"]
        fresh, output = rate("input_cost_per_token") or 0.0, rate("output_cost_per_token") or 0.0
        read, write = rate("cache_read_input_token_cost"), rate("cache_creation_input_token_cost")
        batch_input, batch_output = (
            rate("input_cost_per_token_batches"),
            rate("output_cost_per_token_batches"),
        )
        if batch_input is None or batch_output is None:
            notes.append("batch at half the standard rates")
        batch_input = _or(batch_input, fresh / 2)
        batch_output = _or(batch_output, output / 2)
        batch_read = rate("cache_read_input_token_cost_batches")
        if batch_read is None and read is not None:
            if provider == "openai" and not _gpt5_or_later(model):
                # OpenAI gives models before GPT-5 no prompt-cache discount in Batch.
                batch_read = batch_input
                notes.append("no cache discount in batch before GPT-5")
            else:  # Anthropic: the batch discount stacks with cache prices (GPT-5+ too)
                batch_read = read / 2
        batch_write = None if write is None else write / 2
        return ModelPrice(
            input=fresh, output=output, cache_read=read, cache_write=write,
            batch_input=batch_input, batch_output=batch_output,
            batch_cache_read=batch_read if read is not None else None,
            batch_cache_write=batch_write, source="; ".join(notes) + as_input(read, write),
        )  # fmt: skip


def _openai_batch_reads(price: ModelPrice, model: str) -> ModelPrice:
    """A user's price of an OpenAI model before GPT-5 with a cache-read rate and no batch
    one: batched cache reads at the batch input rate, as the cost map's entries (OpenAI
    gives those models no prompt-cache discount in Batch)."""
    if price.cache_read is None or price.batch_cache_read is not None or _gpt5_or_later(model):
        return price
    fresh = price.rates(batched=True)[0]
    source = f"{price.source}; no cache discount in batch before GPT-5"
    return price.model_copy(update={"batch_cache_read": fresh, "source": source})


def _gpt5_or_later(model: str) -> bool:
    found = _GPT.match(model)
    return found is not None and int(found.group(1)) >= 5


class ServedModel(BaseModel):
    """A named model of run.json's ``models``, as far as pricing needs it."""

    model_config = ConfigDict(extra="ignore")

    provider: str
    model: str | None = None
    endpoints: list[str] = Field(default_factory=list)


class RunPrices(BaseModel):
    """What run.json says of a run's prices: those it used (``prices``), and where its
    models were served (``base_url``, ``models``), for models it recorded no price of."""

    model_config = ConfigDict(extra="ignore")

    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    base_url: str | None = None
    model: list[str] = Field(default_factory=list)
    models: dict[str, ServedModel] = Field(default_factory=dict)

    @field_validator("model", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    def where(self, label: str) -> tuple[str, str, str | None]:
        """(provider, model id, endpoint) of a call's model label: a named model's config,
        else the label read as ``PROVIDER:MODEL`` (served at ``base_url`` for the run's own
        models, where one was given)."""
        named = self.models.get(label)
        if named is not None:
            return named.provider, named.model or "", next(iter(named.endpoints), None)
        provider, _, model = label.partition(":")
        endpoint = self.base_url if self.base_url and label in self.model else None
        return provider.strip(), model.strip(), endpoint

    def price(self, book: PriceBook, label: str) -> ModelPrice | None:
        provider, model, endpoint = self.where(label)
        return book.price(label, provider, model, endpoint=endpoint, recorded=self.prices)

    def unknown(self, book: PriceBook, label: str) -> str:
        return book.unknown(label, *self.where(label))


def read_run_prices(directory: Path) -> RunPrices:
    """run.json's prices and model endpoints; nothing for a run directory without one."""
    path = directory / SPEC
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return RunPrices()
    except (OSError, UnicodeDecodeError) as exc:
        raise RunDirError(f"cannot read {path}: {exc}") from None
    try:
        return RunPrices.model_validate_json(text)
    except ValidationError as exc:
        problem = validation_message(exc, whole="(file)")
        raise RunDirError(f"{path}: not a run description ({problem})") from None
