"""A run directory's layout: the files it holds, and the error that names a bad one."""

from __future__ import annotations

from hpt.errors import HptError

SAMPLES = "samples.jsonl"  # one record per finished sample, appended as samples finish
SUMMARY = "summary.json"  # metrics per cell
SPEC = "run.json"  # spec, version, environment


class RunDirError(HptError, ValueError):
    pass
