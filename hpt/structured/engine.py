"""DSPy's LM calls routed through an hpt Backend, by DSPy 3.4's engine interface.

``dspy.LM(model, engine=..., async_engine=...)`` hands a custom engine one canonical
``dspy.lm15.Request`` per attempt and expects a ``dspy.lm15.Response`` back
(dspy/clients/engines/base.py; execution.py ``_attempt``/``_aattempt``). The engines here
turn the request into hpt messages and generation parameters, call the backend (its rate
limits, retries and response cache) and record the call. DSPy's own response cache and
retries are switched off for these LMs (``cache=False``, ``num_retries=0``): hpt does both.

Threads. DSPy's optimisers and ``Evaluate`` call the *sync* engine from worker threads. The
sync engine schedules the backend call on hpt's event loop
(``asyncio.run_coroutine_threadsafe``) and waits for it in the worker thread; called on the
loop's own thread it refuses (waiting there would deadlock). Callers run DSPy's sync work
with ``asyncio.to_thread``; the async path (``await program.acall(...)``) awaits directly.

``rollout_id``. DSPy makes repeated proposals distinct only by a ``rollout_id`` it strips
from the request before any engine sees it (execution.py ``_canonical``). ``HptLM``
(a ``dspy.LM`` subclass overriding ``__call__``/``acall``, not ``forward``, so DSPy still
treats it as a managed LM) puts the id of each call in a context variable, and the engine
folds it into the hpt ``cache_seed``: each rollout is its own cache entry, and the same
rollout asked again is a cache hit.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from hpt.backends import Backend, BackendError, Completion, GenerationParams, Message
from hpt.backends.errors import BudgetSpent
from hpt.errors import in_chain
from hpt.results.records import Call

Phase = Literal["optimisation", "evaluation"]
OPTIMISATION: Phase = "optimisation"
EVALUATION: Phase = "evaluation"
PHASES: tuple[Phase, ...] = (OPTIMISATION, EVALUATION)
E = TypeVar("E", bound=BaseException)

# The rollout_id of the DSPy LM call under way in this thread / task (None: none given).
_ROLLOUT: contextvars.ContextVar[Any] = contextvars.ContextVar("hpt_dspy_rollout", default=None)


def import_dspy() -> Any:
    """dspy, imported on first use. litellm (which dspy may import) otherwise fetches its
    model cost map from the internet when it is imported."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        return importlib.import_module("dspy")
    except ImportError as exc:  # pragma: no cover - the extra is installed in the test venv
        raise BackendError(
            "the DSPy strategies need the dspy extra: pip install 'hpt[dspy]'"
        ) from exc


def dspy_module(name: str) -> Any:
    """A dspy submodule (``lm15``, ``utils.exceptions``), dspy imported as above."""
    import_dspy()
    return importlib.import_module(f"dspy.{name}")


class PhaseUsage(BaseModel):
    """What one phase (optimisation or evaluation) cost."""

    calls: int = 0  # answered
    # Of ``calls``, those answered by the response cache (no model call was made).
    cached_calls: int = 0
    # Calls that ended in an error after the backend's retries (not in ``calls``).
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def made(self) -> int:
        """Every call asked for, answered or failed."""
        return self.calls + self.failed_calls

    def describe(self) -> str:
        failed = f", {self.failed_calls} failed calls" if self.failed_calls else ""
        return (
            f"{self.calls} calls ({self.cached_calls} cached){failed}, {self.tokens} tokens "
            f"({self.prompt_tokens} prompt + {self.completion_tokens} completion)"
        )


class Meter:
    """Calls and tokens per phase; safe to add to from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._usage = {phase: PhaseUsage() for phase in PHASES}
        self._first_failure: dict[Phase, str] = {}

    def add(self, phase: Phase, result: Completion) -> None:
        with self._lock:
            u = self._usage[phase]
            u.calls += 1
            u.cached_calls += int(result.cached)
            u.prompt_tokens += result.usage.prompt_tokens
            u.completion_tokens += result.usage.completion_tokens

    def fail(self, phase: Phase, error: BaseException) -> None:
        """A call of ``phase`` that ended in ``error``."""
        with self._lock:
            self._usage[phase].failed_calls += 1
            self._first_failure.setdefault(phase, str(error))

    def first_failure(self, phase: Phase) -> str | None:
        with self._lock:
            return self._first_failure.get(phase)

    def usage(self, phase: Phase) -> PhaseUsage:
        with self._lock:
            return self._usage[phase].model_copy()

    def snapshot(self) -> dict[str, PhaseUsage]:
        return {phase: self.usage(phase) for phase in PHASES}

    def describe(self) -> str:
        return "; ".join(f"{phase}: {self.usage(phase).describe()}" for phase in PHASES)


@dataclass
class EngineBinding:
    """Everything one DSPy LM's calls go through: the backend and the loop it lives on, the
    generation settings DSPy's request does not set, the cache seed, and where each call is
    counted (``meter``, under ``phase``) and recorded (``calls``)."""

    backend: Backend
    loop: asyncio.AbstractEventLoop
    params: GenerationParams
    seed: str
    phase: Phase
    meter: Meter
    purpose: str = "dspy"
    calls: list[Call] | None = None
    # Set when the work that owns this binding is abandoned: later sync calls fail at once.
    closed: threading.Event = field(default_factory=threading.Event)
    # The run's budget refused one of its calls. DSPy's optimisers and Evaluate score a
    # failed call as a wrong answer and go on, so the refusal is kept here, every later
    # call fails at once, and the owner raises it once DSPy returns (``raise_refused``).
    refused: BudgetSpent | None = None

    def cache_seed(self, rollout: Any) -> str:
        return self.seed if rollout is None else f"{self.seed}#rollout={rollout}"

    def raise_refused(self) -> None:
        """Raise the budget's refusal of one of this binding's calls, if any came."""
        if self.refused is not None:
            raise BudgetSpent(str(self.refused))

    async def acomplete(self, request: Any, rollout: Any) -> Any:
        self.raise_refused()
        messages = request_messages(request)
        params = request_params(self.params, request.config)
        try:
            result = await self.backend.complete(
                messages, params, cache_seed=self.cache_seed(rollout)
            )
        except BudgetSpent as exc:
            self.refused = self.refused or exc
            self.closed.set()
            raise
        except BackendError as exc:
            # DSPy's optimisers score a failed call as a wrong answer (or skip its example)
            # and go on; counted, an optimisation can refuse to stand on too many of them.
            self.meter.fail(self.phase, exc)
            raise
        self.meter.add(self.phase, result)
        if self.calls is not None:
            purpose = self.purpose if rollout is None else f"{self.purpose} (rollout {rollout})"
            self.calls.append(Call.of(purpose, self.backend.name, messages, result))
        return to_response(request, result)


def _text(parts: Sequence[Any], where: str) -> str:
    texts = []
    for part in parts:
        kind = getattr(part, "type", None)
        if kind == "text":
            texts.append(part.text)
        elif kind == "thinking":
            continue
        else:
            raise BackendError(f"hpt's DSPy engine sends text only; {where} has a {kind} part")
    return "".join(texts)


def request_messages(request: Any) -> list[Message]:
    """A canonical DSPy request as hpt chat messages (text only)."""
    out: list[Message] = []
    if request.tools:
        raise BackendError("hpt's DSPy engine does not send tools")
    system = request.system
    if system is not None:
        text = system if isinstance(system, str) else _text(system, "the system prompt")
        out.append(Message(role="system", content=text))
    for i, m in enumerate(request.messages):
        role = {"developer": "system"}.get(m.role, m.role)
        if role not in ("system", "user", "assistant"):
            raise BackendError(f"hpt's DSPy engine cannot send a {m.role!r} message")
        out.append(Message(role=role, content=_text(m.parts, f"message {i}")))
    # A program's instructions and demos are the same for every sample; only its last turn
    # is the sample's (where a provider's prompt cache may break: Message.shared_prefix).
    for message in out[:-1]:
        message.shared_prefix = len(message.content)
    return out


def request_params(base: GenerationParams, config: Any) -> GenerationParams:
    """The run's generation settings under what DSPy's request sets (an optimiser's
    temperature=1.0 rollouts, a module's max_tokens)."""
    update: dict[str, Any] = {}
    if config.temperature is not None:
        update["temperature"] = min(max(float(config.temperature), 0.0), 2.0)
    if config.top_p is not None:
        update["top_p"] = config.top_p
    if config.max_tokens is not None:
        update["max_tokens"] = config.max_tokens
    if config.stop:
        update["stop"] = list(config.stop)
    if config.seed is not None:
        update["seed"] = config.seed
    return base.model_copy(update=update) if update else base


def to_response(request: Any, result: Completion) -> Any:
    lm15 = dspy_module("lm15")
    finish = (
        result.finish_reason if result.finish_reason in ("length", "content_filter") else "stop"
    )
    usage = lm15.Usage(
        input_tokens=result.usage.prompt_tokens,
        output_tokens=result.usage.completion_tokens,
        total_tokens=result.usage.total_tokens,
    )
    return lm15.Response(
        id=None,
        model=request.model,
        message=lm15.Message.assistant([lm15.TextPart(result.text)]),
        finish_reason=finish,
        usage=usage,
    )


class HptEngine:
    """DSPy's sync engine: runs the call on hpt's loop and waits in the calling thread."""

    def __init__(self, binding: EngineBinding) -> None:
        self.binding = binding

    def complete(self, request: Any) -> Any:
        b = self.binding
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is b.loop:
            raise RuntimeError(
                "hpt's DSPy engine was called synchronously on the event loop's own thread, "
                "which would deadlock; run DSPy's synchronous work with asyncio.to_thread, or "
                "use the async path (await program.acall(...))"
            )
        b.raise_refused()
        if b.closed.is_set() or b.loop.is_closed():
            raise BackendError("the run that owned this DSPy program has stopped")
        rollout = _ROLLOUT.get()
        future = asyncio.run_coroutine_threadsafe(b.acomplete(request, rollout), b.loop)
        return future.result()

    def stream(self, request: Any) -> Any:
        raise BackendError("hpt's DSPy engine does not stream")

    def close(self) -> None:
        pass


class AsyncHptEngine:
    """DSPy's async engine: awaits the backend directly (on hpt's loop)."""

    def __init__(self, binding: EngineBinding) -> None:
        self.binding = binding

    async def complete(self, request: Any) -> Any:
        return await self.binding.acomplete(request, _ROLLOUT.get())

    def stream(self, request: Any) -> Any:
        raise BackendError("hpt's DSPy engine does not stream")

    async def aclose(self) -> None:
        pass


def _rollout_of(lm: Any, kwargs: dict[str, Any]) -> Any:
    return {**lm.kwargs, **kwargs}.get("rollout_id")


@functools.cache
def _lm_class() -> type:
    base: Any = import_dspy().LM

    class HptLM(base):  # type: ignore[misc]
        """A dspy.LM whose calls carry their rollout_id to hpt's engine."""

        def __call__(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
            token = _ROLLOUT.set(_rollout_of(self, kwargs))
            try:
                return super().__call__(prompt, messages=messages, **kwargs)
            finally:
                _ROLLOUT.reset(token)

        async def acall(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
            token = _ROLLOUT.set(_rollout_of(self, kwargs))
            try:
                return await super().acall(prompt, messages=messages, **kwargs)
            finally:
                _ROLLOUT.reset(token)

    HptLM.__module__ = __name__
    HptLM.__qualname__ = "HptLM"
    return HptLM


def make_lm(binding: EngineBinding) -> Any:
    """A dspy.LM whose every call goes through ``binding``'s backend."""
    cls = _lm_class()
    return cls(
        f"hpt/{binding.backend.name}",
        engine=HptEngine(binding),
        async_engine=AsyncHptEngine(binding),
        cache=False,
        num_retries=0,
    )


# What a call's purpose says when DSPy's ChatAdapter could not parse the reply to its
# chat-format request and asked again, through a JSONAdapter, for a JSON object.
JSON_FALLBACK = "JSON fallback"


def adapter_labels(binding: EngineBinding) -> Any:
    """A DSPy callback naming each call of ``binding`` by the adapter that formatted its
    request: ``binding.purpose`` for DSPy's chat format, "PURPOSE (JSON fallback)" for the
    JSONAdapter that ChatAdapter falls back to. For one program call at a time (it sets the
    binding's purpose before each request)."""
    base: Any = dspy_module("utils.callback").BaseCallback
    json_adapter: type = import_dspy().JSONAdapter
    purpose = binding.purpose
    fallback = f"{purpose} ({JSON_FALLBACK})"

    class AdapterLabels(base):  # type: ignore[misc]
        def on_adapter_format_start(
            self, call_id: str, instance: Any, inputs: dict[str, Any]
        ) -> None:
            binding.purpose = fallback if isinstance(instance, json_adapter) else purpose

    return AdapterLabels()


def parse_error_in(exc: BaseException) -> BaseException | None:
    """The DSPy AdapterParseError (a reply not in DSPy's format) behind ``exc``, if any."""
    parse_error: type[BaseException] = dspy_module("utils.exceptions").AdapterParseError
    return _failure_in(exc, parse_error)


def backend_error_in(exc: BaseException) -> BackendError | None:
    """The hpt BackendError that DSPy wrapped (in an LMError) on its way out, if any."""
    return _failure_in(exc, BackendError)


def _failure_in(exc: BaseException, kind: type[E]) -> E | None:
    """The first ``kind`` in ``exc``'s chain; none where the budget refused a call on the way:
    a refusal raised while an error was handled (ChatAdapter's JSON fallback, asked after a
    reply it could not parse) is the failure, and the climb is abandoned."""
    return None if in_chain(exc, BudgetSpent) is not None else in_chain(exc, kind)
