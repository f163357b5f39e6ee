"""The provider registry: a provider registered from outside works everywhere a built-in does,
and each provider's config takes its own settings only."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field, ValidationError

from hpt.backends import (
    PROVIDERS,
    AnyModelConfig,
    BackendLimits,
    Completion,
    GenerationParams,
    Message,
    ModelConfig,
    OpenedTransport,
    Provider,
    RateLimitFields,
    UnknownModelSpecError,
    Usage,
    model_config_from,
    open_backend,
    parse_model_spec,
    providers,
    register_provider,
    spec_help,
    unregister_provider,
)
from hpt.backends.builtin import HFConfig, LocalConfig, OpenAIConfig, TGIConfig

# -- a provider from outside hpt ---------------------------------------------------------


class ToyConfig(ModelConfig):
    provider: Literal["toy"] = "toy"
    model: str
    # How many times the toy repeats the question: its own setting, validated.
    repeat: int = Field(1, ge=1, le=5)


class ToyTransport:
    """Answers from memory, by echoing the last message ``repeat`` times."""

    provider = "toy"

    def __init__(self, config: ToyConfig) -> None:
        self.model = config.model
        self.endpoint = config.endpoint or "memory"
        self.repeat = config.repeat
        self.started = False
        self.closed = False

    @property
    def suggested_concurrency(self) -> int | None:
        return 3

    async def start(self) -> None:
        self.started = True

    async def send(self, messages: list[Message], params: GenerationParams) -> Completion:
        text = " ".join([messages[-1].content] * self.repeat)
        return Completion(text=text, finish_reason="stop", usage=Usage(completion_tokens=2))

    async def aclose(self) -> None:
        self.closed = True


class ToyProvider:
    name = "toy"
    config = ToyConfig
    spec_help = "toy:MODEL"

    def __init__(self) -> None:
        self.opened: list[ToyTransport] = []
        self.open_now = 0

    def from_spec(self, rest: str) -> ToyConfig:
        if not rest:
            raise UnknownModelSpecError("no model named")
        return ToyConfig(model=rest)

    @contextlib.asynccontextmanager
    async def open_transport(self, config: ModelConfig) -> AsyncIterator[OpenedTransport]:
        assert isinstance(config, ToyConfig)
        transport = ToyTransport(config)
        self.opened.append(transport)
        self.open_now += 1  # stands for something the provider runs beside the transport
        try:
            yield OpenedTransport(transport, cache_endpoint="toy-memory")
        finally:
            self.open_now -= 1


@pytest.fixture
def toy() -> Iterator[ToyProvider]:
    provider = ToyProvider()
    register_provider(provider)
    try:
        yield provider
    finally:
        unregister_provider("toy")


def test_the_toy_satisfies_the_protocol() -> None:
    provider: Provider = ToyProvider()  # checked by mypy
    assert provider.config is ToyConfig


def test_a_registered_provider_parses_specs_and_configs(toy: ToyProvider) -> None:
    config = parse_model_spec("toy:xyz")
    assert isinstance(config, ToyConfig) and config.model == "xyz" and config.repeat == 1
    assert PROVIDERS["toy"] is toy and providers()[-1] is toy

    config = model_config_from({"provider": "toy", "model": "m", "repeat": 3})
    assert isinstance(config, ToyConfig) and config.repeat == 3
    with pytest.raises(ValidationError) as err:
        model_config_from({"provider": "toy", "model": "m", "repeat": 9})
    assert [e["loc"] for e in err.value.errors()] == [("repeat",)]
    assert "repeat" in str(err.value) and "less than or equal to 5" in str(err.value)


async def test_a_registered_provider_opens_and_completes(toy: ToyProvider) -> None:
    config = parse_model_spec("toy:xyz")
    async with open_backend(config, label="toy:xyz") as backend:
        assert toy.open_now == 1
        out = await backend.complete([Message(role="user", content="hello")], GenerationParams())
        assert backend.stats.concurrency == 3  # the transport's suggested cap
    assert out.text == "hello" and out.finish_reason == "stop"
    (transport,) = toy.opened
    assert transport.started and transport.closed and toy.open_now == 0

    cfg = model_config_from({"provider": "toy", "model": "m", "repeat": 2})
    async with open_backend(cfg, label="toy:m", base_url="http://elsewhere") as backend:
        out = await backend.complete([Message(role="user", content="hi")], GenerationParams())
    assert out.text == "hi hi" and toy.opened[-1].endpoint == "http://elsewhere"


def test_spec_help_follows_the_registry(toy: ToyProvider) -> None:
    assert "'toy:MODEL'" in spec_help()
    assert spec_help().startswith("use 'local', 'openai:MODEL', 'anthropic:MODEL'")
    with pytest.raises(UnknownModelSpecError) as err:
        parse_model_spec("toy:")
    assert "model spec 'toy:'" in str(err.value) and "use 'toy:MODEL'" in str(err.value)


def test_unregistered_provider_is_gone() -> None:
    register_provider(ToyProvider())
    unregister_provider("toy")
    assert "toy" not in PROVIDERS and "toy" not in spec_help()
    with pytest.raises(UnknownModelSpecError, match="unknown model provider 'toy'"):
        parse_model_spec("toy:xyz")
    with pytest.raises(ValueError, match="unknown model provider 'toy'; known: local, openai"):
        model_config_from({"provider": "toy", "model": "m"})


def test_registration_rules(toy: ToyProvider) -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_provider(ToyProvider())
    other = ToyProvider()
    assert register_provider(other, replace=True) is other and PROVIDERS["toy"] is other

    class Mislabelled(ToyProvider):
        name = "toy2"  # but its config says provider "toy"

    with pytest.raises(TypeError, match=r"Literal\['toy2'\]"):
        register_provider(Mislabelled())
    assert "toy2" not in PROVIDERS


# -- each provider's own settings --------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "field", "owners"),
    [
        ({"provider": "openai", "model": "x", "hf_provider": "together"}, "hf_provider", "hf"),
        ({"provider": "tgi", "endpoints": ["http://a"], "client": "sdk"}, "client", "openai"),
        ({"provider": "hf", "model": "x", "anthropic_version": "2023-06-01"},
         "anthropic_version", "anthropic"),
        ({"provider": "local", "api": "generate"}, "api", "tgi"),
        ({"provider": "openai", "model": "x", "health_interval_s": 1}, "health_interval_s", "tgi"),
    ],
)  # fmt: skip
def test_settings_of_other_providers_are_refused(
    data: dict[str, Any], field: str, owners: str
) -> None:
    with pytest.raises(ValidationError) as err:
        model_config_from(data)
    (error,) = err.value.errors()
    assert error["loc"] == (field,)
    assert error["msg"] == (
        f"'{field}' is not a setting of {data['provider']} models (only of {owners} models)"
    )


def test_unknown_settings_and_shapes_are_refused() -> None:
    with pytest.raises(ValidationError) as err:
        model_config_from({"provider": "openai", "model": "x", "colour": "red"})
    assert err.value.errors()[0]["type"] == "extra_forbidden"
    with pytest.raises(ValidationError, match="keys never go in config files"):
        model_config_from({"provider": "openai", "model": "x", "api_key": "sk-1"})
    with pytest.raises(ValidationError) as err:
        model_config_from({"provider": "openai"})
    assert err.value.errors()[0]["loc"] == ("model",)
    with pytest.raises(ValidationError, match="a openai model takes one endpoint, not 2"):
        model_config_from(
            {"provider": "openai", "model": "x", "endpoints": ["http://a", "http://b"]}
        )
    with pytest.raises(ValidationError, match="needs 'endpoints'"):
        model_config_from({"provider": "tgi"})
    with pytest.raises(ValidationError, match="must be http"):
        model_config_from({"provider": "tgi", "endpoints": ["localhost:80"]})
    with pytest.raises(ValidationError) as err:
        model_config_from({"provider": "vertex", "model": "x"})
    assert err.value.errors()[0]["loc"] == ("provider",)
    assert "known: local, openai, anthropic, tgi, hf" in str(err.value)


def test_a_bare_model_config_becomes_its_providers_own() -> None:
    base = ModelConfig(provider="openai", model="x", max_concurrency=4)
    config = model_config_from(base)
    assert isinstance(config, OpenAIConfig) and config.max_concurrency == 4
    assert config.client == "auto" and model_config_from(config) is config
    with pytest.raises(ValidationError, match="unknown model provider 'vertex'"):
        ModelConfig(provider="vertex")


def test_with_endpoint_keeps_the_class_and_the_original() -> None:
    config = model_config_from({"provider": "tgi", "endpoints": ["http://a", "http://b"]})
    moved = config.with_endpoint("http://c")
    assert isinstance(moved, TGIConfig) and moved.endpoints == ["http://c"]
    assert config.endpoints == ["http://a", "http://b"]


def test_limit_fields_are_declared_once() -> None:
    assert issubclass(ModelConfig, RateLimitFields) and issubclass(BackendLimits, RateLimitFields)
    for cls in (ModelConfig, BackendLimits):
        for name in RateLimitFields.model_fields:
            assert repr(cls.model_fields[name]) == repr(RateLimitFields.model_fields[name])
    config = model_config_from({"provider": "local", "tokens_per_minute": 100})
    assert config.limits.tokens_per_minute == 100
    with pytest.raises(ValidationError):
        model_config_from({"provider": "local", "requests_per_minute": 0})


# -- configs inside other models ---------------------------------------------------------


class Holder(BaseModel):
    """Stands for the run spec and the run config file."""

    models: dict[str, AnyModelConfig] = Field(default_factory=dict)


def test_any_model_config_round_trips_through_json(toy: ToyProvider) -> None:
    holder = Holder.model_validate(
        {
            "models": {
                "gpt": {"provider": "openai", "model": "g", "client": "aiohttp"},
                "pool": {"provider": "tgi", "endpoints": ["http://a", "http://b"],
                         "api": "generate", "health_interval_s": 0.5},
                "router": {"provider": "hf", "model": "org/m", "hf_provider": "together"},
                "claude": {"provider": "anthropic", "model": "c",
                           "anthropic_version": "2023-06-01"},
                "embedded": {"provider": "local", "max_concurrency": 2},
                "toy": {"provider": "toy", "model": "t", "repeat": 4},
            }
        }
    )  # fmt: skip
    dumped = holder.model_dump_json()
    assert '"hf_provider":"together"' in dumped and '"repeat":4' in dumped
    again = Holder.model_validate_json(dumped)
    assert again == holder
    assert {k: type(v) for k, v in again.models.items()} == {
        k: type(v) for k, v in holder.models.items()
    }
    assert isinstance(again.models["router"], HFConfig)
    assert isinstance(again.models["embedded"], LocalConfig)
    assert isinstance(again.models["toy"], ToyConfig) and again.models["toy"].repeat == 4
    # A python dump (a saved run spec re-read) keeps them too.
    assert Holder.model_validate(holder.model_dump()) == holder
    # Named entries resolve to their provider's config.
    assert parse_model_spec("pool", again.models) is again.models["pool"]


@pytest.mark.parametrize(
    ("entry", "loc", "needle"),
    [
        ({"provider": "vertex", "model": "x"}, ("models", "m", "provider"), "known: local"),
        ({"provider": "tgi"}, ("models", "m"), "needs 'endpoints'"),
        ({"provider": "openai", "model": "x", "max_concurrency": 0},
         ("models", "m", "max_concurrency"), "greater than or equal to 1"),
        ({"provider": "openai", "model": "x", "api": "chat"}, ("models", "m", "api"),
         "not a setting of openai models"),
        ({"model": "x"}, ("models", "m", "provider"), "Field required"),
        ("openai:x", ("models", "m"), "valid dictionary"),
    ],
)  # fmt: skip
def test_errors_inside_other_models_name_the_key(
    entry: Any, loc: tuple[str, ...], needle: str
) -> None:
    with pytest.raises(ValidationError) as err:
        Holder.model_validate({"models": {"m": entry}})
    first = err.value.errors()[0]
    assert first["loc"] == loc and needle in first["msg"]
