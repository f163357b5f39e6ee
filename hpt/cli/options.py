"""The model and generation options every model-calling command accepts (run,
judge-strategies, and the commands to come), and how they merge with a config file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hpt.backends import GenerationParams, RetryPolicy
from hpt.orchestrator.config import load_run_config
from hpt.orchestrator.models import ModelSettings

# CLI flag -> ModelSettings field
MODEL_FLAGS = {
    "base_url": "base_url",
    "max_concurrency": "max_concurrency",
    "rpm": "requests_per_minute",
    "tpm": "tokens_per_minute",
    "prompt_cache": "prompt_cache",
}
# CLI flag -> GenerationParams field
PARAM_FLAGS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "max_tokens": "max_tokens",
    "repetition_penalty": "repetition_penalty",
    "gen_seed": "seed",
}


def add_model_options(p: argparse.ArgumentParser) -> None:
    # Defaults are None so that a value from --config shows through unless a flag is given.
    p.add_argument(
        "--config",
        type=Path,
        help="config file (TOML or YAML): [run] settings and [models.NAME] entries, which "
        "every model option may name",
    )
    p.add_argument("--base-url", help="the model's endpoint (default: the provider's own)")
    p.add_argument("--max-concurrency", type=int, help="cap on calls in flight per backend")
    p.add_argument("--rpm", type=int, help="cap on requests per minute per backend")
    p.add_argument("--tpm", type=int, help="cap on tokens per minute per backend")
    p.add_argument(
        "--max-attempts",
        type=int,
        help=f"tries per model call before it counts as failed "
        f"(default {RetryPolicy().max_attempts})",
    )
    p.add_argument(
        "--no-cache", action="store_true", help="neither read nor write the response cache"
    )
    p.add_argument(
        "--prompt-cache",
        choices=("auto", "off"),
        help="provider prompt caching: auto (default) marks prompt prefixes shared across "
        "samples for providers that cache only where told (Anthropic's cache_control); off "
        "marks none (OpenAI and open servers cache prefixes by themselves either way)",
    )


def add_generation_options(p: argparse.ArgumentParser) -> None:
    defaults = GenerationParams()
    p.add_argument("--temperature", type=float, help=f"default {defaults.temperature}")
    p.add_argument("--top-p", type=float, help=f"default {defaults.top_p}")
    p.add_argument("--max-tokens", type=int, help=f"default {defaults.max_tokens}")
    p.add_argument(
        "--repetition-penalty",
        type=float,
        help=f"multiplicative penalty where the provider has one; 1 disables "
        f"(default {defaults.repetition_penalty})",
    )
    p.add_argument("--gen-seed", type=int, help="sampling seed sent to the model")


def given_model_flags(args: argparse.Namespace) -> list[str]:
    """The model and generation options given on the command line, by their dest names."""
    flags = [*MODEL_FLAGS, *PARAM_FLAGS, "config", "max_attempts"]
    given = [f for f in flags if getattr(args, f, None) is not None]
    return given + (["no_cache"] if args.no_cache else [])


def merge_model_options(args: argparse.Namespace) -> dict[str, Any]:
    """The config file's [run] table and models, with the command line's flags over them."""
    merged: dict[str, Any] = {}
    if args.config is not None:
        config = load_run_config(args.config)
        merged.update(config.run)
        merged["models"] = config.models
    for flag, key in MODEL_FLAGS.items():
        value = getattr(args, flag)
        if value is not None:
            merged[key] = value
    params = dict(merged.get("params") or {})
    for flag, key in PARAM_FLAGS.items():
        value = getattr(args, flag)
        if value is not None:
            params[key] = value
    merged["params"] = params
    if args.max_attempts is not None:
        merged["retry"] = {**(merged.get("retry") or {}), "max_attempts": args.max_attempts}
    if args.no_cache:
        merged["cache"] = False
    return merged


def model_settings_only(merged: dict[str, Any]) -> dict[str, Any]:
    """The part of a merged [run] table every model command takes: model settings, params
    and cache (a judge command ignores the run's datasets, modes and ladder)."""
    keep = {*ModelSettings.model_fields, "params", "cache"}
    return {k: v for k, v in merged.items() if k in keep}
