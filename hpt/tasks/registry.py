"""Task names -> task classes."""

from __future__ import annotations

from pathlib import Path

from hpt.errors import HptError
from hpt.tasks.base import Task
from hpt.tasks.boolq import BoolQ
from hpt.tasks.csqa import CommonsenseQA
from hpt.tasks.depthqa import DepthQA
from hpt.tasks.gpqa import GPQA
from hpt.tasks.gsm8k import GSM8K
from hpt.tasks.headqa import HeadQA
from hpt.tasks.humaneval import HumanEval
from hpt.tasks.iwslt import IWSLT
from hpt.tasks.medbullets import MedBullets
from hpt.tasks.medcalc import MedCalc
from hpt.tasks.medec import MEDEC
from hpt.tasks.mmlu import MMLU
from hpt.tasks.mmlu_pro import MMLUPro
from hpt.tasks.samsum import SAMSum

# Open: plugins add theirs with register_task.
TASKS: dict[str, type[Task]] = {
    t.name: t
    for t in (
        *(BoolQ, GSM8K, CommonsenseQA, MMLU, HumanEval, IWSLT, SAMSum, DepthQA),
        # The benchmarks of the structured-prompting (DSPy+HELM) paper.
        *(MMLUPro, GPQA, MedCalc, MEDEC, HeadQA, MedBullets),
    )
}


class UnknownTaskError(HptError, ValueError):
    pass


def register_task(cls: type[Task], *, replace: bool = False) -> type[Task]:
    """Make ``cls`` a dataset ``--dataset`` can name (a plugin's own); usable as a class
    decorator. Its ``info()`` goes into run.json, so reports need no code of it."""
    name = cls.name.lower()
    if name in TASKS and TASKS[name] is not cls and not replace:
        raise UnknownTaskError(f"a dataset named {name!r} is registered already")
    TASKS[name] = cls
    return cls


def task_class(name: str) -> type[Task]:
    try:
        return TASKS[name.lower()]
    except KeyError:
        raise UnknownTaskError(
            f"unknown dataset {name!r}; choose one of {', '.join(TASKS)}"
        ) from None


def get_task(name: str, data_dir: Path | None = None) -> Task:
    return task_class(name)(data_dir)
