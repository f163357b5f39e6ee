"""Datasets and what "resolved" means for each."""

from hpt.tasks.base import Check, DatasetError, Sample, Task, select
from hpt.tasks.registry import TASKS, UnknownTaskError, get_task, register_task, task_class
from hpt.tasks.sources import DATA_DIR_ENV, resolve_data_dir

__all__ = [
    "DATA_DIR_ENV",
    "TASKS",
    "Check",
    "DatasetError",
    "Sample",
    "Task",
    "UnknownTaskError",
    "get_task",
    "register_task",
    "resolve_data_dir",
    "select",
    "task_class",
]
