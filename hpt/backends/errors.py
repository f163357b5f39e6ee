"""Backend failures, split by what the caller should do about them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpt.errors import HptError

if TYPE_CHECKING:
    from hpt.types import GenerationParams


class BackendError(HptError):
    """A model call failed for this sample (after any retries); other samples may still work."""


class FatalBackendError(BackendError):
    """The backend cannot work at all (bad key, unknown model, unreachable): stop the run."""


class SettingRefused(FatalBackendError):
    """A run setting the model cannot take as asked (a reasoning effort it does not know, a
    thinking budget where its provider has none): said before any call, never dropped."""


class TransientError(Exception):
    """One attempt failed in a way worth retrying.

    ``retry_after_s`` is the server's own wait (Retry-After or x-ratelimit reset), if it gave
    one; ``overloaded`` marks a 429 / "model is overloaded" answer, which also lowers the
    backend's concurrency. ``replica_down`` says the endpoint itself looks dead (refused or
    dropped connection), so a replica pool takes it out of rotation.
    """

    def __init__(
        self,
        message: str,
        *,
        retry_after_s: float | None = None,
        overloaded: bool = False,
        replica_down: bool = False,
    ) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.overloaded = overloaded
        self.replica_down = replica_down


def refuse_reasoning(params: GenerationParams, why: str, instead: str) -> None:
    """``SettingRefused`` if ``params`` ask a reasoning effort or thinking budget of a backend
    whose API takes neither (``why`` says so, ``instead`` what else to do)."""
    if params.reasoning_effort is not None or params.thinking_budget is not None:
        raise SettingRefused(f"{why}; drop --reasoning-effort and --thinking-budget, or {instead}")


class BudgetSpent(HptError):
    """No further call may be sent: the run's budget (``--budget-usd``, ``--max-calls``) would
    be passed. Not a ``BackendError``: the climb that asked is abandoned, not recorded as a
    failure, and runs again on resume."""
