"""The providers hpt ships, registered through the same ``register_provider`` a plugin
calls. Each module holds a provider's config class and how its transport opens; the
transports (and their SDKs, slow to import) load only when a model of theirs is opened."""

from hpt.backends.builtin.anthropic import AnthropicConfig, AnthropicProvider
from hpt.backends.builtin.hf import HFConfig, HFProvider
from hpt.backends.builtin.local import LocalConfig, LocalProvider
from hpt.backends.builtin.openai import OpenAIConfig, OpenAIProvider
from hpt.backends.builtin.tgi import TGIConfig, TGIProvider
from hpt.backends.providers import register_provider

for _provider in (
    LocalProvider(),
    OpenAIProvider(),
    AnthropicProvider(),
    TGIProvider(),
    HFProvider(),
):
    register_provider(_provider)

__all__ = [
    "AnthropicConfig",
    "AnthropicProvider",
    "HFConfig",
    "HFProvider",
    "LocalConfig",
    "LocalProvider",
    "OpenAIConfig",
    "OpenAIProvider",
    "TGIConfig",
    "TGIProvider",
]
