"""The state a ladder graph carries: the sample and what each level recorded of it."""

from __future__ import annotations

import operator
from typing import Annotated, Any, NotRequired, TypedDict

from hpt.results.records import Attempt
from hpt.tasks import Sample


class LadderState(TypedDict):
    sample: Sample
    attempts: Annotated[list[Attempt], operator.add]
    # Which of the run's independent climbs of this sample (--samples-per-task) this is.
    draw: NotRequired[int]
    # Adaptive HPF: every prompt-selector turn (hpt.results.records.Selection).
    selections: NotRequired[Annotated[list[Any], operator.add]]
