"""What a run would cost at list price: a TOML file of USD per million tokens per model, and
the cost of a cell's calls under it."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hpt.errors import validation_message
from hpt.reports import ReportError


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0.0, description="USD per million prompt tokens")
    output: float = Field(ge=0.0, description="USD per million completion tokens")


def load_prices(path: Path) -> dict[str, Price]:
    """A TOML file of ``["MODEL"] input = USD, output = USD`` per million tokens."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"prices file {path} does not exist") from None
    except OSError as exc:
        raise ReportError(f"cannot read prices file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ReportError(f"{path}: not UTF-8 text; give a TOML prices file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ReportError(f"{path}: not valid TOML: {exc}") from None
    prices = {}
    for model, entry in data.items():
        try:
            prices[model] = Price.model_validate(entry)
        except ValidationError as exc:
            problem = validation_message(exc, prefix=model, whole="(table)")
            raise ReportError(f"{path}: {problem}") from None
    return prices


def cost_usd(tokens: Mapping[str, list[int]], prices: Mapping[str, Price]) -> float | None:
    """USD at list price for every call, cached or not: what a fresh run would cost, given
    ``tokens`` as {called model: [prompt, completion]}. None when some model that was called
    has no price."""
    total = 0.0
    for model, (prompt, completion) in tokens.items():
        price = prices.get(model)
        if price is None:
            return None
        total += (prompt * price.input + completion * price.output) / 1e6
    return total
