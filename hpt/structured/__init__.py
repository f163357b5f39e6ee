"""DSPy programs (Predict, ChainOfThought, BFRS, MIPROv2) run through hpt's backends.

Nothing here imports dspy at module level: ``import hpt`` works without the dspy extra, and
dspy (with litellm's offline cost map) is imported the first time a DSPy strategy runs."""

from hpt.structured.engine import (
    EVALUATION,
    OPTIMISATION,
    EngineBinding,
    Meter,
    PhaseUsage,
    import_dspy,
    make_lm,
)
from hpt.structured.runtime import CellRuntime, OptimisationError, ProgramStore

__all__ = [
    "EVALUATION",
    "OPTIMISATION",
    "CellRuntime",
    "EngineBinding",
    "Meter",
    "OptimisationError",
    "PhaseUsage",
    "ProgramStore",
    "import_dspy",
    "make_lm",
]
