"""Datasets and what "resolved" means for each."""

from hpt.tasks.base import Check, DatasetError, NoArgs, Sample, Task, TaskArgError, select
from hpt.tasks.registry import TASKS, UnknownTaskError, get_task, register_task, task_class
from hpt.tasks.sources import DATA_DIR_ENV, resolve_data_dir

__all__ = [
    "DATA_DIR_ENV",
    "TASKS",
    "Check",
    "DatasetError",
    "NoArgs",
    "Sample",
    "Task",
    "TaskArgError",
    "UnknownTaskError",
    "get_task",
    "register_task",
    "resolve_data_dir",
    "select",
    "task_class",
]
