"""DepthQA (depth-of-knowledge question graphs): the task, its graph of questions, the judge
of its answers and how a question is asked with its predecessors' answers."""

from hpt.tasks.depthqa.task import EMPTY_SCORE, DepthQA

__all__ = ["EMPTY_SCORE", "DepthQA"]
