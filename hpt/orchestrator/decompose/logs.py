"""The build's two append-only logs in its output folder: the checkpoint of finished steps
(``decompose_state.jsonl``, ``StateLog``) that a rerun replays, and every reply the model gave
beside what was read from it (``decompose_replies.jsonl``, ``ReplyLog``)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def log_lines(path: Path) -> list[str]:
    """The lines of an append-only log this build wrote. A line cut short by an interruption
    is ended (or the next entry would be glued to it and lost); a line that is not UTF-8
    (damaged) is passed over like one that is not JSON. Split at newline bytes only: an
    entry's text may hold other line separators (U+2028)."""
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        with path.open("ab") as fh:
            fh.write(b"\n")
    lines = []
    for line in raw.split(b"\n"):
        try:
            lines.append(line.decode("utf-8"))
        except UnicodeDecodeError:
            continue
    return [line for line in lines if line]


def fingerprint(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


class StateLog:
    """The finished steps, one JSON line each: ``{"step", "key", "input", ...}``.

    ``input`` fingerprints what the step was computed from; ``get`` returns an entry only if
    it matches, so a step whose inputs changed (another --limit, another embedding model)
    runs again. Appended and flushed as each step ends, so an interrupted run keeps them; a
    last line cut short by the interruption is ignored.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[tuple[str, str], dict[str, Any]] = {}
        self.reused = 0
        if path.is_file():
            for line in log_lines(path):
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict) and {"step", "key", "input"} <= entry.keys():
                    self.entries[(str(entry["step"]), str(entry["key"]))] = entry

    def get(self, step: str, key: str, inputs: str) -> dict[str, Any] | None:
        entry = self.entries.get((step, key))
        if entry is None or entry["input"] != inputs:
            return None
        self.reused += 1
        return entry

    def put(self, step: str, key: str, inputs: str, payload: dict[str, Any]) -> dict[str, Any]:
        entry = {"step": step, "key": key, "input": inputs, **payload}
        self.entries[(step, key)] = entry
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
        return entry


@dataclass(frozen=True)
class Asking:
    """What a call asks, as ``decompose_replies.jsonl`` names it: the prompt (its section in
    the prompt file: "d3_answer", "answer", "d2_questions", "d1_questions", "d2_augment",
    "d1_augment"), the item and its question, and the try (from 1)."""

    prompt: str
    item: str
    question: str
    attempt: int = 1

    @property
    def step(self) -> str:
        """How the summary's errors name it: "answer of 2.2", "d2_questions of 1"."""
        return f"{'answer' if self.prompt.endswith('answer') else self.prompt} of {self.item}"


class ReplyLog:
    """Every reply the build read, one JSON line each, beside its verdict: ``prompt``,
    ``item``, ``question``, ``attempt``, ``reply`` (the raw text; null when the call failed),
    ``parsed`` (the sub-question list read, before any cut to four, or the reference answer
    taken) and ``error`` (why nothing was taken: "no JSON object in the reply", the failed
    call). Appended as replies come; a rerun that reads a reply again from the response cache
    does not write the same line twice, and steps replayed from the checkpoint read none."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: set[str] = set()
        if path.is_file():
            self._seen = {fingerprint(line) for line in log_lines(path)}

    def put(
        self, asking: Asking, reply: str | None, parsed: str | list[str] | None, error: str | None
    ) -> None:
        line = json.dumps(
            {"prompt": asking.prompt, "item": asking.item, "question": asking.question,
             "attempt": asking.attempt, "reply": reply, "parsed": parsed, "error": error},
            ensure_ascii=False,
        )  # fmt: skip
        key = fingerprint(line)
        if key in self._seen:
            return
        self._seen.add(key)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
